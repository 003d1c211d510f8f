"""PERK core: BabiLong reader/generator, inner loop (AdamW + LSLR, truncated backprop), outer loss."""

from __future__ import annotations

import json
from pathlib import Path

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
    return PERK(copy.deepcopy(tiny.model), tiny.tokenizer, r=4, alpha=8, lslr_init=1e-2)


def test_weighter_zero_init_and_lora_only(perk) -> None:  # type: ignore[no-untyped-def]
    w = perk.weighter(torch.randn(2, 5, perk.model.config.hidden_size))
    assert torch.allclose(w, torch.full_like(w, float(torch.nn.functional.softplus(
        torch.tensor(0.0), beta=3))))  # fmt: skip
    assert perk.lora_names and all("lora_" in n for n in perk.lora_names)
    assert perk.lslr.shape == (4, len(perk.lora_names))


def test_inner_loop_memorises_and_meta_grads_flow(perk) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.perk.model import format_segments

    segs = ["Mary went to the kitchen.", "The weather was mild.", "John moved to the garden."]
    texts = format_segments(segs, perk.tokenizer.eos_token)
    assert texts[0].startswith("doc_0: Mary") and texts[0].endswith(perk.tokenizer.eos_token)
    ids, mask = perk.encode(texts)
    before = float(perk.inner_loss(perk.lora_init(), ids, mask))
    fast = perk.adapt(segs, train=True)
    assert float(perk.inner_loss(fast, ids, mask)) < before
    loss = perk.outer_loss(fast, 3, "Where is Mary?", "kitchen", ["Mary went to the kitchen."])
    loss.backward()
    init = perk.lora_init()
    assert all(init[n].grad is not None for n in perk.lora_names)
    assert perk.lslr.grad is not None and perk.lslr.grad.abs().sum() > 0
    assert perk.weighter.fc2.weight.grad is not None  # only via the second-order steps
    assert perk.weighter.fc2.weight.grad.abs().sum() > 0


def test_first_order_only_gives_no_weighter_grad(tiny) -> None:  # type: ignore[no-untyped-def]
    import copy

    from llm_methods.perk.model import PERK

    p = PERK(copy.deepcopy(tiny.model), tiny.tokenizer, r=4, first_order_steps=4, lslr_init=1e-2)
    fast = p.adapt(["Mary went to the kitchen.", "Birds sang."], train=True)
    p.outer_loss(fast, 2, "Where is Mary?", "kitchen").backward()
    assert p.weighter.fc2.weight.grad is None and p.lslr.grad.abs().sum() > 0


def test_test_time_adapt_is_detached_and_accumulates(perk) -> None:  # type: ignore[no-untyped-def]
    segs = [f"Fact {i}: Mary went to the kitchen." for i in range(8)]
    fast = perk.adapt(segs, train=False)
    assert all(not p.grad_fn for p in fast.values())
    ids, mask = perk.encode([f"doc_{i}: {s}" for i, s in enumerate(segs)])
    params = {n: p.detach().requires_grad_(True) for n, p in perk.lora_init().items()}
    acc = perk._accumulated_grads(params, ids, mask)
    full = torch.autograd.grad(perk.inner_loss(params, ids, mask), list(params.values()))
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
