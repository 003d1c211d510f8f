"""Dispersion claims on 95 % intervals (issue 40): each criterion can hold and fail on planted
data, a null method gives "not held", and a failed precondition makes the claim inconclusive."""

from __future__ import annotations

import numpy as np

from llm_methods.dispersion.claims import (
    MIN_SUBLAYER_PAIRS,
    correlation_claim,
    pushaway_claim,
    sublayer_claim,
    sublayer_outcome,
)
from llm_methods.dispersion.measure import binned_correlation


def _chunks(slope: float, n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    log_ppl = rng.normal(3.0, 0.5, n)
    d = 0.8 + slope * (log_ppl - 3.0) + rng.normal(0, 0.02, n)
    return np.exp(log_ppl), d


def test_correlation_claim_holds_fails_and_null_is_not_held() -> None:
    ppl, d = _chunks(slope=-0.1)  # planted: D falls with PPL
    held = correlation_claim(ppl, d, 10, binned_correlation, model="planted")
    assert held.verdict == "held" and held.effect.high <= -0.5
    ppl, d = _chunks(slope=+0.1)  # planted the other way
    assert correlation_claim(ppl, d, 10, binned_correlation, model="x").verdict == "not held"
    ppl, d = _chunks(slope=0.0, n=1000)  # null: D carries nothing about PPL (100 bins)
    null = correlation_claim(ppl, d, 10, binned_correlation, model="null")
    assert null.verdict == "not held" and null.effect.low > -0.5
    # too few bins: the control fails whatever r says
    ppl, d = _chunks(slope=-0.1, n=60)
    assert correlation_claim(ppl, d, 10, binned_correlation, model="x").verdict == "inconclusive"


def _pair_rows(ppl_attn, ppl_ffn, d_attn, d_ffn, lm_ppl: float = 30.0) -> dict:  # type: ignore[no-untyped-def]
    return {
        f"m/layer {i}": sublayer_outcome(da, df, pa, pf, lm_ppl)
        for i, (pa, pf, da, df) in enumerate(zip(ppl_attn, ppl_ffn, d_attn, d_ffn, strict=True))
    }


def _quality(n: int = 14, seed: int = 0, ffn_always_better: bool = False) -> tuple:  # type: ignore[type-arg]
    """Per-pair kNN-LM PPL of attention and FFN keys: either sub-layer better, by 3-10 %, at
    random (or FFN better everywhere)."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(8.0, 12.0, n)
    gap = rng.uniform(0.03, 0.10, n)
    ffn_better = np.ones(n, bool) if ffn_always_better else rng.random(n) < 0.5
    ppl_ffn = np.where(ffn_better, base, base * (1 + gap))
    ppl_attn = np.where(ffn_better, base * (1 + gap), base)
    return ppl_attn, ppl_ffn, ffn_better


def test_sublayer_outcome_picks_by_dispersion() -> None:
    row = sublayer_outcome(0.30, 0.42, 25.81, 24.84, lm_ppl=33.0)
    assert row["picked"] == "ffn" and row["won"] and row["comparable"]
    # our first full run: attention disperses more, FFN keys are better
    row = sublayer_outcome(0.56, 0.42, 25.81, 24.84, lm_ppl=33.0)
    assert row["picked"] == "attn" and not row["won"]
    assert not sublayer_outcome(0.56, 0.42, 40.0, 41.0, lm_ppl=33.0)["comparable"]


def test_sublayer_claim_holds_for_informative_dispersion() -> None:
    """Planted: the better sub-layer varies over pairs and has the higher D: D's pick beats
    any fixed sub-layer by several %."""
    ppl_attn, ppl_ffn, ffn_better = _quality()
    d_ffn = np.where(ffn_better, 0.6, 0.4)
    claim = sublayer_claim(_pair_rows(ppl_attn, ppl_ffn, 1.0 - d_ffn, d_ffn))
    assert claim.verdict == "held" and claim.effect.high <= -1.0
    assert claim.measured["wins"] == 14


def test_sublayer_claim_rejects_uninformative_dispersion() -> None:
    """The review's reproduction: FFN better on all 14 pairs, the higher D assigned at random.
    The old rate criterion gave "held" 0.79 [0.52, 0.92]; against the best fixed choice
    (always FFN) such a D can only lose."""
    for seed in range(5):
        ppl_attn, ppl_ffn, _ = _quality(seed=seed, ffn_always_better=True)
        d_ffn = np.random.default_rng(100 + seed).uniform(0.3, 0.5, 14)
        d_attn = np.random.default_rng(200 + seed).uniform(0.3, 0.5, 14)
        claim = sublayer_claim(_pair_rows(ppl_attn, ppl_ffn, d_attn, d_ffn))
        assert claim.measured["best_fixed"] == "ffn"
        assert claim.verdict in ("not held", "inconclusive") and claim.effect.estimate >= 0
    # and where the better sub-layer varies, a D random with respect to it does not hold either
    ppl_attn, ppl_ffn, _ = _quality(seed=3)
    d = np.random.default_rng(7).uniform(0.3, 0.5, (2, 14))
    assert sublayer_claim(_pair_rows(ppl_attn, ppl_ffn, d[0], d[1])).verdict != "held"


def test_sublayer_claim_null_method_and_a_perfect_fixed_rule_are_not_held() -> None:
    """Null method: D always picks the same sub-layer (here the one that is always better):
    every paired difference 0, exactly, above the -1 % margin."""
    ppl_attn, ppl_ffn, _ = _quality(ffn_always_better=True)
    claim = sublayer_claim(_pair_rows(ppl_attn, ppl_ffn, [0.3] * 14, [0.5] * 14))
    assert claim.verdict == "not held" and claim.effect.estimate == 0.0
    assert claim.effect.low == claim.effect.high == 0.0
    # D pointing to the worse sub-layer every time
    ppl_attn, ppl_ffn, ffn_better = _quality()
    d_ffn = np.where(ffn_better, 0.4, 0.6)
    assert sublayer_claim(_pair_rows(ppl_attn, ppl_ffn, 1.0 - d_ffn, d_ffn)).verdict == "not held"


def test_sublayer_claim_precondition_blocks_when_knnlm_does_not_help() -> None:
    ppl_attn, ppl_ffn, ffn_better = _quality()
    d_ffn = np.where(ffn_better, 0.6, 0.4)
    blocked = sublayer_claim(_pair_rows(ppl_attn, ppl_ffn, 1.0 - d_ffn, d_ffn, lm_ppl=5.0))
    assert blocked.verdict == "inconclusive" and "control failed" in blocked.reason
    k = MIN_SUBLAYER_PAIRS - 1
    few = sublayer_claim(_pair_rows(ppl_attn[:k], ppl_ffn[:k], 1.0 - d_ffn[:k], d_ffn[:k]))
    assert few.verdict == "inconclusive"


def _log_ppl(shift: float, seeds: int = 6, chunks: int = 200) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    base = rng.normal(2.7, 0.3, (seeds, chunks)) + rng.normal(0, 0.01, (seeds, 1))
    return base + shift + rng.normal(0, 0.005, base.shape), base


def test_pushaway_claim_holds_fails_and_null_is_not_held() -> None:
    d_up, d0 = [0.90] * 6, [0.88] * 6
    method, zero = _log_ppl(-0.03)  # planted: 3 % lower perplexity
    assert pushaway_claim(0.1, method, zero, d_up, d0).verdict == "held"
    method, zero = _log_ppl(+0.02)  # planted: higher perplexity
    assert pushaway_claim(0.1, method, zero, d_up, d0).verdict == "not held"
    # null: lambda = 0 in push-away's place (every paired difference 0)
    null = pushaway_claim(0.1, zero, zero, d0, d0)
    assert null.effect.decide() == "not held"
    # the sanity check (D rises) failed: inconclusive whatever the PPL says
    method, zero = _log_ppl(-0.03)
    assert pushaway_claim(0.1, method, zero, d0, d_up).verdict == "inconclusive"
