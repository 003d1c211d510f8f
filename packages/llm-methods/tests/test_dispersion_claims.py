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


def _pairs(wins: int, n: int, comparable: bool = True) -> dict:
    rows = {}
    for i in range(n):
        good, bad = 20.0, 22.0
        # the higher-D sub-layer (attention here) has the lower PPL in the first `wins` layers
        ppl_attn, ppl_ffn = (good, bad) if i < wins else (bad, good)
        lm_ppl = 30.0 if comparable else 15.0
        rows[f"m/layer {i}"] = sublayer_outcome(0.6, 0.4, ppl_attn, ppl_ffn, lm_ppl)
    return rows


def test_sublayer_outcome_picks_by_dispersion() -> None:
    row = sublayer_outcome(0.30, 0.42, 25.81, 24.84, lm_ppl=33.0)
    assert row["picked"] == "ffn" and row["won"] and row["comparable"]
    # our first full run: attention disperses more, FFN keys are better
    row = sublayer_outcome(0.56, 0.42, 25.81, 24.84, lm_ppl=33.0)
    assert row["picked"] == "attn" and not row["won"]
    assert not sublayer_outcome(0.56, 0.42, 40.0, 41.0, lm_ppl=33.0)["comparable"]


def test_sublayer_claim_holds_fails_and_is_inconclusive() -> None:
    assert sublayer_claim(_pairs(14, 14)).verdict == "held"
    # null: dispersion picks the other sub-layer every time (carries no signal the right way)
    assert sublayer_claim(_pairs(0, 14)).verdict == "not held"
    # a coin flip's worth of wins cannot be decided
    assert sublayer_claim(_pairs(7, 14)).verdict == "inconclusive"
    # kNN-LM helps nowhere: the keys cannot be compared
    blocked = sublayer_claim(_pairs(14, 14, comparable=False))
    assert blocked.verdict == "inconclusive" and "control failed" in blocked.reason
    few = sublayer_claim(_pairs(MIN_SUBLAYER_PAIRS - 1, MIN_SUBLAYER_PAIRS - 1))
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
