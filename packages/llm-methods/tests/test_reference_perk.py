"""PERK's inner loop, outer loss and meta-gradient equal upstream's (eric11eca/perk).

Reference numbers: ``tests/data/reference/perk_meta_step.*``, produced once by running
upstream's ``MetaLMModule.step`` / ``truncated_inner_loop_step`` (training: 4 AdamW steps, the
first 2 first-order, then the outer loss and its backward) and ``inner_loop_step`` as
``validation_step`` runs it (test time: gradient accumulation over 2 micro-batches), with
upstream's bundled ``higher``, on a tiny Llama + rsLoRA whose weights we generated (repository,
commit, command, stubs and patches in the ``.source.json`` sidecar). Upstream's LoRA and
weighter start values and its per-tensor per-step LSLRs are loaded into ours by name.

Tolerances are float32 rounding: the reference ran transformers 4.51.3 / peft 0.13.2, ours runs
the workspace's versions, whose kernels sum in a different order (~1e-7 relative per forward).
Measured max |diff|: inner losses 6e-8; outer loss 1e-6 (value 6.6); meta-gradients 4e-7
(LoRA, weighter; values up to 0.37) and 3e-6 (LSLRs, values up to 2.3); LoRA weights after 4
steps 9e-8 in training, 2e-6 at test time. The latter is one element whose first gradient is
8e-7 (max 0.73): Adam's first update lr·g/(|g| + ε) there has sensitivity lr·ε/(|g| + ε)² ≈ 140
to g, and float32's own error on that gradient is 1.2e-7 (against float64), i.e. 1.4e-5 on the
weight; hence ``WEIGHT_ATOL`` = 3e-5. The other bounds are ~10x the measured differences. All
are far below a modelling difference: test-time adaptation without the gradient accumulation
moves the weights by 0.07; a step with another tensor's LSLR by ~lr/2 = 5e-3."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

REF = Path(__file__).parent / "data" / "reference"
WEIGHT_ATOL = 3e-5  # see the module docstring
UP = "lm_model."  # upstream's CausalLM wraps the peft model as ``lm_model``


def _up(name: str) -> str:
    return UP + name


def _lslr_key(name: str) -> str:  # upstream LSLRSchedular key of a LoRA tensor
    return _up(name).replace(".", "-")


@pytest.fixture(scope="module")
def ref():  # type: ignore[no-untyped-def]
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from llm_methods.perk.model import PERK

    data = json.loads((REF / "perk_meta_step.json").read_text())
    arr = np.load(REF / "perk_meta_step.npz")
    tok = PreTrainedTokenizerFast(
        tokenizer_file=str(REF / "perk_tokenizer.json"),
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    with torch.random.fork_rng(devices=[]):
        model = LlamaForCausalLM(LlamaConfig(**data["config"]))
        base = {
            k.removeprefix("base/"): torch.from_numpy(arr[k])
            for k in arr.files
            if k.startswith("base/")
        }
        model.load_state_dict(base)
        perk = PERK(
            model,
            tok,
            r=data["lora_r"],
            alpha=data["lora_alpha"],
            target_modules=data["lora_targets"],
            inner_steps=data["n_inner_iter"],
            first_order_steps=data["unroll_start"],
            betas=tuple(data["betas"]),
            eps=data["eps"],
            weight_decay=data["weight_decay"],
            accumulation=data["test_accumulation"],
            lora_dropout=0.0,
        )
    assert perk.lora_names == [n.removeprefix(UP) for n in data["lora_names"]]
    params = dict(perk.model.named_parameters())
    with torch.no_grad():
        for j, name in enumerate(perk.lora_names):
            params[name].copy_(torch.from_numpy(arr[f"init/{_up(name)}"]))
            perk.lslr[:, j] = torch.from_numpy(arr[f"lslr/{_lslr_key(name)}"][: perk.inner_steps])
        for name, p in perk.weighter.named_parameters():
            p.copy_(torch.from_numpy(arr[f"init/weighting_model.{name}"]))
    return perk, data, arr


def _ref_params(perk, arr, prefix: str) -> dict[str, torch.Tensor]:  # type: ignore[no-untyped-def]
    return {n: torch.from_numpy(arr[f"{prefix}/{_up(n)}"]) for n in perk.lora_names}


def test_inputs_equal_upstream_collator(ref) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.perk.model import encode_prompt_response, format_qa, format_segments

    perk, data, _ = ref
    tok = perk.tokenizer
    for rec, key in ((data["record"], ""), (data["test_record"], "test_")):
        ids, mask, labels = perk.encode(format_segments(rec["context"], tok.eos_token))
        assert ids.tolist() == data[f"{key}train_input_ids"] and bool(mask.all())
        prompt, resp = format_qa(
            len(rec["context"]), rec["question"], rec["answer"], rec["support"]
        )
        outer_ids, _ = encode_prompt_response(tok, prompt, f"{prompt} {resp}{tok.eos_token}")
        assert outer_ids == data[f"{key}input_ids"][0]
    assert labels.tolist() != data["train_labels"]  # (3 segments here vs 4 there)
    ids, _, labels = perk.encode(format_segments(data["record"]["context"], tok.eos_token))
    assert labels.tolist() == data["train_labels"]  # doc_{i}: prompts masked as upstream
    _, n_prompt = encode_prompt_response(tok, prompt, f"{prompt} {resp}{tok.eos_token}")
    assert n_prompt == sum(x == -100 for x in data["labels"][0])


def test_inner_losses_equal_upstream(ref) -> None:  # type: ignore[no-untyped-def]
    """The weighted inner loss at upstream's fast weights before each of the 4 steps."""
    from llm_methods.perk.model import format_segments

    perk, data, arr = ref
    ids, mask, labels = perk.encode(format_segments(data["record"]["context"], "<|endoftext|>"))
    with torch.no_grad():
        for s, expected in enumerate(data["inner_losses"]):
            params = perk.lora_init() if s == 0 else _ref_params(perk, arr, f"step{s}")
            got = float(perk.inner_loss(params, ids, mask, labels))
            assert got == pytest.approx(expected, abs=1e-6)


def test_meta_step_equals_upstream(ref) -> None:  # type: ignore[no-untyped-def]
    """θ' after 4 truncated steps, the outer loss and the meta-gradients of the LoRA init,
    the weighter and the LSLRs (upstream's extra (n+1)-th LSLR per tensor gets none)."""
    perk, data, arr = ref
    perk.zero_grad(set_to_none=True)
    rec = data["record"]
    fast = perk.adapt(rec["context"], train=True)
    for name, expected in _ref_params(perk, arr, f"step{perk.inner_steps}").items():
        torch.testing.assert_close(fast[name].detach(), expected, rtol=0, atol=WEIGHT_ATOL)
    loss = perk.outer_loss(
        fast, len(rec["context"]), rec["question"], rec["answer"], rec["support"]
    )
    assert float(loss.detach()) == pytest.approx(data["outer_loss"], abs=1e-5)
    loss.backward()
    params = dict(perk.model.named_parameters())
    for name in perk.lora_names:
        ref_grad = torch.from_numpy(arr[f"grad/{_up(name)}"])
        torch.testing.assert_close(params[name].grad, ref_grad, rtol=0, atol=4e-6)
    for name, p in perk.weighter.named_parameters():
        ref_grad = torch.from_numpy(arr[f"grad/weighting_model.{name}"])
        torch.testing.assert_close(p.grad, ref_grad, rtol=0, atol=4e-6)
    lslr = np.stack([arr[f"lslr_grad/{_lslr_key(n)}"] for n in perk.lora_names], axis=1)
    assert np.abs(lslr[perk.inner_steps :]).max() == 0.0
    torch.testing.assert_close(
        perk.lslr.grad, torch.from_numpy(lslr[: perk.inner_steps]), rtol=0, atol=3e-5
    )
    perk.zero_grad(set_to_none=True)


def test_test_time_adaptation_equals_upstream(ref) -> None:  # type: ignore[no-untyped-def]
    """First-order test-time steps with gradient accumulation over micro-batches of 2 + 1
    segments (each micro-batch's loss / 2), then the outer loss, as upstream's validation."""
    from llm_methods.perk.model import format_segments

    perk, data, arr = ref
    rec = data["test_record"]
    fast = perk.adapt(rec["context"], train=False)
    for name, expected in _ref_params(perk, arr, f"test_step{perk.inner_steps}").items():
        torch.testing.assert_close(fast[name].detach(), expected, rtol=0, atol=WEIGHT_ATOL)
    ids, mask, labels = perk.encode(format_segments(rec["context"], "<|endoftext|>"))
    chunks = torch.arange(ids.shape[0]).chunk(data["test_accumulation"])
    with torch.no_grad():
        loss = perk.outer_loss(
            fast, len(rec["context"]), rec["question"], rec["answer"], rec["support"]
        )
        assert float(loss) == pytest.approx(data["test_outer_loss"], abs=1e-5)
        micro = iter(data["test_micro_losses"])
        for s in range(perk.inner_steps):
            params = perk.lora_init() if s == 0 else _ref_params(perk, arr, f"test_step{s}")
            for idx in chunks:
                got = float(perk.inner_loss(params, ids[idx], mask[idx], labels[idx]))
                assert got / len(chunks) == pytest.approx(next(micro), abs=1e-6)


def test_reference_sidecar_names_the_commit() -> None:
    side = json.loads((REF / "perk_meta_step.source.json").read_text())
    assert side["official_repo"] == "eric11eca/perk" and len(side["commit"]) == 40
