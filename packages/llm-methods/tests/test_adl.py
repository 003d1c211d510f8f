from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import torch

from llm_methods.adl.agent import ADLEvidence, VocabularyOverlapAgent
from llm_methods.adl.diff import (
    activation_difference,
    base_residuals,
    coherence,
    enriched_tokens,
    max_coherent_alpha,
    patchscope,
    projection_loss_change,
    relative_layer,
    token_counts,
    token_relevance,
)
from llm_methods.lm import LMError, capture_residual, encode_texts, wrap

TEXTS = [
    "The quick brown fox jumps over it.",
    "A list is a mutable sequence of items.",
    "Functions are defined with def and return.",
]


@pytest.fixture
def pair(tiny):  # type: ignore[no-untyped-def]
    model = copy.deepcopy(tiny.model)
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.add_(0.05)
    return tiny, wrap(tiny.tokenizer, model, "ft")


def test_delta_is_mean_difference_at_first_positions(pair) -> None:  # type: ignore[no-untyped-def]
    base, ft = pair
    diff = activation_difference(base, ft, TEXTS, layer=0, n_positions=4)
    assert diff.delta.shape == (4, 64) and diff.layer == 0 and diff.n_texts == 3
    ids = torch.tensor([row[:4] for row in encode_texts(base, TEXTS)])
    with torch.no_grad():
        with capture_residual(base, [0]) as hb:
            base.model(input_ids=ids)
        with capture_residual(ft, [0]) as hf:
            ft.model(input_ids=ids)
    torch.testing.assert_close(diff.delta, (hf[0] - hb[0]).mean(0))
    torch.testing.assert_close(diff.mean_base, hb[0].mean(0))
    same = activation_difference(base, base, TEXTS, n_positions=4)
    assert float(same.delta.abs().max()) == 0.0
    with pytest.raises(LMError, match="fewer than 50 tokens"):
        activation_difference(base, ft, TEXTS, n_positions=50)


def test_relative_layer(tiny) -> None:  # type: ignore[no-untyped-def]
    from types import SimpleNamespace

    assert relative_layer(tiny, 0.5) == 0 and relative_layer(tiny, 1.0) == 1
    with pytest.raises(LMError, match="depth"):
        relative_layer(tiny, 1.5)
    # diffing-toolkit: int(depth * (L - 1)); L = 5 (L = 1 mod 4) was one layer too shallow
    assert relative_layer(SimpleNamespace(n_layers=5), 0.5) == 2
    assert relative_layer(SimpleNamespace(n_layers=30), 0.5) == 14
    assert relative_layer(SimpleNamespace(n_layers=9), 0.5) == 4
    assert relative_layer(SimpleNamespace(n_layers=4), 0.5) == 1


def test_projection_change_is_zero_for_identical_models(pair: Any) -> None:
    base, ft = pair
    direction = torch.randn(64, generator=torch.Generator().manual_seed(0))
    assert projection_loss_change(base, base, direction, 0, TEXTS[:2]) == pytest.approx(0, abs=1e-6)
    assert projection_loss_change(base, ft, direction, 0, TEXTS[:2]) != 0.0


def test_projection_change_with_precomputed_base_states(pair: Any) -> None:
    """The experiment computes the frozen base's residuals once for every finetune: the same
    number as computing them inside, bit for bit; states of other texts are refused."""
    base, ft = pair
    direction = torch.randn(64, generator=torch.Generator().manual_seed(0))
    states = base_residuals(base, 0, TEXTS[:2])
    inside = projection_loss_change(base, ft, direction, 0, TEXTS[:2])
    assert projection_loss_change(base, ft, direction, 0, TEXTS[:2], states) == inside
    with pytest.raises(LMError, match="base states"):
        projection_loss_change(base, ft, direction, 0, TEXTS[:2], states[:1])
    with pytest.raises(LMError, match="base state of shape"):
        projection_loss_change(base, ft, direction, 0, TEXTS[:2], states[::-1])


def test_enriched_tokens_and_relevance(tiny) -> None:  # type: ignore[no-untyped-def]
    tok = tiny.tokenizer
    dom, bg = ["fox fox fox dog dog dog"] * 3, ["list tuple set"] * 3
    vocab = enriched_tokens(tok, dom, bg, top_n=100, min_count=2)
    dom_ids = set(tok(dom[0], add_special_tokens=False).input_ids)
    bg_ids = set(tok(bg[0], add_special_tokens=False).input_ids)
    assert dom_ids - bg_ids <= vocab <= dom_ids
    top1 = enriched_tokens(tok, dom, bg, top_n=1, min_count=2)
    assert len(top1) == 1 and top1 <= dom_ids - bg_ids
    (one,) = top1
    assert token_relevance([one, 999_999], vocab) == 0.5
    with pytest.raises(LMError, match="no tokens"):
        token_relevance([], vocab)
    # precomputed background counts (the experiment's five domains read one background once)
    bg_counts = token_counts(tok, bg)
    assert bg_counts[next(iter(bg_ids))] == 3
    assert enriched_tokens(tok, dom, ["unused"], 100, 2, background_counts=bg_counts) == vocab
    assert enriched_tokens(tok, dom, ["unused"], 1, 2, background_counts=bg_counts) == top1


def test_patchscope_scale_zero_is_the_plain_prediction(tiny: Any) -> None:
    vec = torch.randn(64)
    out = patchscope(tiny, vec, 1, [0.0, 4.0], k=5)
    ids = torch.tensor(encode_texts(tiny, ["cat -> cat\n1135 -> 1135\nhello -> hello\n?"]))
    with torch.no_grad():
        plain = torch.topk(tiny.model(input_ids=ids).logits[0, -1], 5).indices.tolist()
    assert out[0.0] == plain and len(out[4.0]) == 5


def test_max_coherent_alpha_bounds(tiny) -> None:  # type: ignore[no-untyped-def]
    vec = torch.randn(64)
    alpha, texts = max_coherent_alpha(
        tiny, vec, 0, ["The"], tiny, -math.inf, alpha_max=8.0, steps=2, max_new_tokens=3
    )
    assert alpha == 8.0 and len(texts) == 1
    alpha, _ = max_coherent_alpha(
        tiny, vec, 0, ["The"], tiny, math.inf, alpha_max=8.0, steps=2, max_new_tokens=3
    )
    assert alpha == 0.0
    assert coherence(tiny, ["", "x"]) == -math.inf


def test_agent_names_the_overlapping_domain() -> None:
    agent = VocabularyOverlapAgent()
    candidates = {"email": {1, 2, 3}, "http": {7, 8, 9}}
    evidence = ADLEvidence(lens=[[5, 1, 2], [9, 6]], patchscope=[[3]], steered=[1, 1, 7])
    assert agent.name_domain(evidence, candidates) == "email"
    scores = agent.scores(evidence, candidates)
    assert scores["email"] == pytest.approx(1 / 2 + 1 / 3 + 1 + 2 / 3)
    with pytest.raises(ValueError, match="no candidate"):
        agent.name_domain(evidence, {})
