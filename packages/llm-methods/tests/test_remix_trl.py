"""Our GRPO loss equals TRL's ``GRPOTrainer._compute_loss`` (trl installed) on one batch given
the same rollouts: same model, prompts, completions, advantages, old and reference log-probs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from llm_methods.remix.data import records_to_problems, sft_texts, synth_problems
from llm_methods.remix.model import grpo_loss, sequence_logps
from llm_methods.remix.runner import Rollout, collate_rollouts


@pytest.mark.parametrize(("beta", "eps_high"), [(0.0, None), (0.04, 0.28)])
def test_grpo_loss_matches_trl(tmp_path: Path, beta: float, eps_high: float | None) -> None:
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from llm_methods.zoo.models import tiny_lm

    problems = records_to_problems(synth_problems(12, 0))
    lm = tiny_lm(
        [p + r for p, r in sft_texts(problems)],
        vocab_size=300,
        n_layers=1,
        hidden=32,
        heads=2,
        seed=0,
    )
    lm.model.save_pretrained(tmp_path / "m")
    lm.tokenizer.save_pretrained(tmp_path / "m")
    G, tok = 4, lm.tokenizer
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        num_generations=G,
        max_completion_length=6,
        loss_type="grpo",
        beta=beta,
        epsilon=0.2,
        epsilon_high=eps_high,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        bf16=False,
    )
    data = Dataset.from_dict({"prompt": [problems[0].prompt] * 8})
    trainer = GRPOTrainer(
        model=str(tmp_path / "m"),
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=args,
        train_dataset=data,
        processing_class=tok,
    )
    trainer.current_gradient_accumulation_steps = 1
    model = trainer.model
    model.train()
    gen = torch.Generator().manual_seed(0)
    items = []
    for i in range(8):  # prompts of different lengths (left padding), ragged completions
        prompt = [
            tok.bos_token_id,
            *tok(problems[i // G].prompt, add_special_tokens=False).input_ids,
        ]
        n = 2 + i % 4
        comp = torch.randint(5, len(tok), (n,), generator=gen).tolist()
        if i % 3 == 0:
            comp[-1] = tok.eos_token_id
        items.append(
            Rollout(prompt, comp, 0.0, float(torch.randn(1, generator=gen)), torch.empty(0), 0)
        )
    batch = collate_rollouts(items, tok.pad_token_id)
    mask = batch["completion_mask"]
    with torch.no_grad():
        current = sequence_logps(
            model, batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"], mask
        )
    old = current + 0.3 * torch.randn(current.shape, generator=gen)  # ratios hit both clip sides
    ref = current + 0.2 * torch.randn(current.shape, generator=gen)
    inputs = {
        "prompt_ids": batch["prompt_ids"],
        "prompt_mask": batch["prompt_mask"],
        "completion_ids": batch["completion_ids"],
        "completion_mask": mask,
        "advantages": batch["advantages"],
        "old_per_token_logps": old,
        "ref_per_token_logps": ref,
    }
    trl_loss = trainer._compute_loss(model, inputs)
    logps = sequence_logps(
        model, batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"], mask
    )
    ours, stats = grpo_loss(logps, old, batch["advantages"], mask, 0.2, eps_high, beta, ref)
    assert stats["clip_frac"] > 0  # the clip is exercised
    diff = abs(float(ours.detach()) - float(trl_loss.detach()))
    assert diff < 1e-5, (float(ours.detach()), float(trl_loss.detach()))
    grads_trl = torch.autograd.grad(trl_loss, list(model.parameters()), allow_unused=True)
    grads_ours = torch.autograd.grad(ours, list(model.parameters()), allow_unused=True)
    for a, b in zip(grads_trl, grads_ours, strict=True):
        if a is not None and b is not None:
            assert torch.allclose(a, b, atol=1e-5)
