"""PERK core: BabiLong reader/generator, inner loop (AdamW + LSLR, truncated backprop), outer
loss."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from llm_methods.perk.data import read_babilong, synth_babilong, write_babilong


def test_synth_babilong_answers_and_position(tmp_path: Path) -> None:
    recs = synth_babilong(6, n_segments=10, position=0.0, seed=1)
    assert [r.task for r in recs[:3]] == ["qa1", "qa2", "qa3"]
    for r in recs:
        assert all(s in r.context for s in r.support)
        assert r.answer in " ".join(r.support)  # the answer is stated by a supporting fact
        assert r.context.index(r.support[0]) <= 3  # facts start the context at position 0
    late = synth_babilong(3, n_segments=10, position=1.0, seed=1)
    assert all(r.context.index(r.support[-1]) == len(r.context) - 1 for r in late)
    assert len(synth_babilong(1, n_segments=30)[0].context) > 30
    back = read_babilong(write_babilong(recs, tmp_path / "b.jsonl"))
    assert [(b.question, b.answer, b.context) for b in back] == [
        (r.question, r.answer, r.context) for r in recs
    ]


def test_read_babilong_errors(tmp_path: Path) -> None:
    bad = tmp_path / "b.jsonl"
    bad.write_text(json.dumps({"context": ["x"], "question": "q"}) + "\n")
    with pytest.raises(ValueError, match=r"b\.jsonl:1: missing field 'answer'"):
        read_babilong(bad)
    bad.write_text(json.dumps({"context": [], "question": "q", "answer": "a"}) + "\n")
    with pytest.raises(ValueError, match="'context' must be a non-empty list"):
        read_babilong(bad)
    bad.write_text(json.dumps({"context": ["x"], "question": " ", "answer": "a"}) + "\n")
    with pytest.raises(ValueError, match="'question' is empty"):
        read_babilong(bad)


@pytest.fixture
def perk(tiny):  # type: ignore[no-untyped-def]
    import copy

    from llm_methods.perk.model import PERK

    torch.manual_seed(0)
    return PERK(
        copy.deepcopy(tiny.model), tiny.tokenizer, r=4, alpha=8, lslr_init=1e-2, lora_dropout=0.0
    )


def test_weighter_zero_init_and_lora_only(perk) -> None:  # type: ignore[no-untyped-def]
    w = perk.weighter(torch.randn(2, 5, perk.model.config.hidden_size))
    assert torch.allclose(
        w, torch.full_like(w, float(torch.nn.functional.softplus(torch.tensor(0.0), beta=3)))
    )
    assert perk.lora_names and all("lora_" in n for n in perk.lora_names)
    assert perk.lslr.shape == (4, len(perk.lora_names))


def test_inner_loop_memorises_and_meta_grads_flow(perk) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.perk.model import format_segments

    segs = ["Mary went to the kitchen.", "The weather was mild.", "John moved to the garden."]
    pieces = format_segments(segs, perk.tokenizer.eos_token)
    assert pieces[0] == ("doc_0:", f"doc_0: Mary went to the kitchen.{perk.tokenizer.eos_token}")
    ids, mask, labels = perk.encode(pieces)
    before = float(perk.inner_loss(perk.lora_init(), ids, mask, labels))
    fast = perk.adapt(segs, train=True)
    assert float(perk.inner_loss(fast, ids, mask, labels)) < before
    loss = perk.outer_loss(fast, 3, "Where is Mary?", "kitchen", ["Mary went to the kitchen."])
    loss.backward()
    init = perk.lora_init()
    assert all(init[n].grad is not None for n in perk.lora_names)
    assert perk.lslr.grad is not None and perk.lslr.grad.abs().sum() > 0
    assert perk.weighter.fc2.weight.grad is not None  # only via the second-order steps
    assert perk.weighter.fc2.weight.grad.abs().sum() > 0


def test_inner_loss_matches_upstream_alignment_and_masking(perk: Any) -> None:
    """Issue 26: the loss of target token t+1 is weighted by w read at position t+1 (upstream
    ``weights[:, 1:]``; ours read it at t) and the ``doc_{i}:`` prompt is not a target
    (upstream labels -100; ours trained on it). The denominator counts every next-token
    position. Checked against a by-hand computation with a weighter whose weight is the
    position index + 1."""
    from llm_methods.perk.model import format_segments

    class ByPosition(torch.nn.Module):
        def forward(self, h):  # type: ignore[no-untyped-def]
            return torch.arange(1, h.shape[1] + 1, dtype=h.dtype).expand(h.shape[:2])

    perk.weighter = ByPosition()
    pieces = format_segments(["Mary went to the kitchen.", "Birds sang."], perk.tokenizer.eos_token)
    ids, mask, labels = perk.encode(pieces)
    got = perk.inner_loss(perk.lora_init(), ids, mask, labels)
    with torch.no_grad():
        logits = perk.model(input_ids=ids, attention_mask=mask).logits.float()
    total, count = 0.0, 0
    tok = perk.tokenizer
    for r, (prompt, text) in enumerate(pieces):
        row = tok(text, add_special_tokens=False).input_ids
        n_prompt = len(tok(prompt, add_special_tokens=False).input_ids)
        assert labels[r, :n_prompt].eq(-100).all() and labels[r, n_prompt].item() == row[n_prompt]
        lp = logits[r].log_softmax(-1)
        for t in range(len(row) - 1):
            count += 1
            if t + 1 >= n_prompt:  # target t+1 is not in the doc prompt
                total += (t + 2) * float(-lp[t, row[t + 1]])  # w at position t+1 = t+2
    assert float(got) == pytest.approx(total / count, rel=1e-5)


def test_upstream_defaults_dropout_support_and_cached_answer(tiny: Any) -> None:
    """Issue 26: LoRA dropout 0.1 (ours was 0), supporting facts joined by newlines (ours by
    spaces), and answer() decodes on a KV cache (ours re-ran the whole sequence per token)."""
    import copy

    from llm_methods.perk.model import PERK, format_qa

    p = PERK(copy.deepcopy(tiny.model), tiny.tokenizer, r=4, alpha=8)
    drops = [m.p for m in p.model.modules() if isinstance(m, torch.nn.Dropout)]
    assert drops and all(d == pytest.approx(0.1) for d in drops)
    assert format_qa(2, "Where is Mary?", "garden", ["Mary went.", "Mary moved."])[1] == (
        "<support>Mary went.\nMary moved.</support>\n<output>garden</output>"
    )
    assert format_qa(2, "Where is Mary?", "garden")[1] == "garden"
    fast = p.adapt(["Mary went to the kitchen.", "Birds sang."], train=False)
    lengths: list[int] = []
    base = p.model.get_base_model()
    hook = base.register_forward_pre_hook(
        lambda m, a, k: lengths.append(int(k["input_ids"].shape[1])), with_kwargs=True
    )
    try:
        text = p.answer(fast, 2, "Where is Mary?", max_new_tokens=6)
    finally:
        hook.remove()
    assert len(lengths) >= 2 and lengths[1:] == [1] * (len(lengths) - 1)  # one token a step
    from torch.func import functional_call

    prompt, _ = format_qa(2, "Where is Mary?", "")
    ids = tiny.tokenizer(prompt, add_special_tokens=False).input_ids
    p.model.eval()
    with torch.no_grad():
        for _ in range(6):  # the same greedy tokens without a cache
            out = functional_call(
                p.model, fast, args=(), kwargs={"input_ids": torch.tensor([ids])}, strict=False
            )
            ids.append(int(out.logits[0, -1].argmax()))
            if ids[-1] == tiny.tokenizer.eos_token_id:
                break
    n = len(tiny.tokenizer(prompt, add_special_tokens=False).input_ids)
    assert text == tiny.tokenizer.decode(ids[n:], skip_special_tokens=True)


def test_first_order_only_gives_no_weighter_grad(tiny) -> None:  # type: ignore[no-untyped-def]
    import copy

    from llm_methods.perk.model import PERK

    p = PERK(copy.deepcopy(tiny.model), tiny.tokenizer, r=4, first_order_steps=4, lslr_init=1e-2)
    fast = p.adapt(["Mary went to the kitchen.", "Birds sang."], train=True)
    p.outer_loss(fast, 2, "Where is Mary?", "kitchen").backward()
    assert p.weighter.fc2.weight.grad is None and p.lslr.grad.abs().sum() > 0


def test_test_time_adapt_is_detached_and_accumulates(perk) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.perk.model import format_segments

    segs = [f"Fact {i}: Mary went to the kitchen." for i in range(8)]  # equal lengths
    fast = perk.adapt(segs, train=False)
    assert all(not p.grad_fn for p in fast.values())
    ids, mask, labels = perk.encode(format_segments(segs, perk.tokenizer.eos_token))
    params = {n: p.detach().requires_grad_(True) for n, p in perk.lora_init().items()}
    acc = perk._accumulated_grads(params, ids, mask, labels)
    full = torch.autograd.grad(perk.inner_loss(params, ids, mask, labels), list(params.values()))
    assert all(torch.allclose(a, f, atol=1e-5) for a, f in zip(acc, full, strict=True))


def test_bad_input(perk) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.lm import LMError

    with pytest.raises(LMError, match="context has no segments"):
        perk.adapt([])
    with pytest.raises(LMError, match="segment 1 is empty"):
        perk.adapt(["a", " "])
    with pytest.raises(LMError, match="split the context"):
        perk.adapt(["word " * 600])
    with pytest.raises(LMError, match="question is empty"):
        perk.outer_loss(perk.lora_init(), 1, "", "a")
