"""Planted-signal tests of the Meta-Router claims (issue 42): (a_k) and (b) can hold and fail, a
null method (gold-only in DR's place) is not held, and the oracle controls make a claim
inconclusive, never "not held"."""

from __future__ import annotations

import numpy as np
import pytest

from llm_methods.meta_router import experiment as ex

SEEDS, QUERIES = 5, 400


def _sqerr(dr: float, oracle: float, gold: float = 0.03, seed: int = 0) -> dict[str, np.ndarray]:
    """(seeds, queries) squared errors with the given means (chi-square with 1 df, scaled)."""
    rng = np.random.default_rng(seed)
    base = rng.chisquare(1, size=(SEEDS, QUERIES))
    noise = lambda: rng.chisquare(1, size=(SEEDS, QUERIES))  # noqa: E731
    return {
        "gold_only": gold * base,
        "dr_corrected": dr * (0.7 * base + 0.3 * noise()),
        "oracle_corrected": oracle * (0.7 * base + 0.3 * noise()),
        "pooled": 0.05 * noise(),
        "perfect": np.zeros((SEEDS, QUERIES)),
    }


def test_mse_claim_holds_and_fails() -> None:
    held = ex.mse_claim(400, _sqerr(dr=0.02, oracle=0.015))
    assert held.verdict == "held"
    assert held.effect is not None and held.effect.estimate == pytest.approx(100 / 3, rel=0.15)
    assert ex.mse_claim(100, _sqerr(dr=0.06, oracle=0.015)).verdict == "not held"


def test_mse_claim_null_method_is_not_held() -> None:
    sq = _sqerr(dr=0.02, oracle=0.015)
    sq["dr_corrected"] = sq["gold_only"].copy()
    claim = ex.mse_claim(100, sq)
    assert claim.verdict == "not held"
    assert claim.effect is not None and claim.effect.method == "exact"


def test_mse_claim_inconclusive_when_the_oracle_cannot_beat_gold_only() -> None:
    claim = ex.mse_claim(100, _sqerr(dr=0.02, oracle=0.029))
    assert claim.verdict == "inconclusive" and claim.criterion_met is True
    assert [p.name for p in claim.failed_preconditions] == ["oracle correction beats gold-only"]


def _curves(dr_share: float, oracle_share: float, seed: int = 0) -> dict[str, np.ndarray]:
    """(seeds, len(SHARES)) curves: DR and the oracle close the given share of the gap between
    the best baseline (gold-only) and the perfect router, plus seed noise."""
    rng = np.random.default_rng(seed)
    base = np.linspace(0.5, 0.6, len(ex.SHARES)) + rng.normal(0, 0.001, (SEEDS, 1))
    gap = 0.04
    jitter = lambda: rng.normal(0, 0.002, (SEEDS, 1))  # noqa: E731
    return {
        "gold_only": base,
        "preference_only": base - 0.05,
        "pooled": base - 0.02,
        "perfect": base + gap,
        "dr_corrected": base + dr_share * gap + jitter(),
        "oracle_corrected": base + oracle_share * gap + jitter(),
    }


def test_curve_claim_holds_fails_and_null() -> None:
    assert ex.curve_claim(_curves(0.5, 0.6)).verdict == "held"
    assert ex.curve_claim(_curves(-0.3, 0.6)).verdict == "not held"
    null = _curves(0.5, 0.6)
    null["dr_corrected"] = null["gold_only"].copy()
    claim = ex.curve_claim(null)
    assert claim.verdict == "not held" and claim.measured["best_baseline"] == "gold_only"


def test_curve_claim_inconclusive_when_the_oracle_curve_is_not_above() -> None:
    claim = ex.curve_claim(_curves(0.5, 0.1))
    assert claim.verdict == "inconclusive"
    assert [p.name for p in claim.failed_preconditions] == ["oracle curve above the best baseline"]


def test_claims_cover_the_preregistered_gold_curve() -> None:
    sq = {k: _sqerr(dr=0.02, oracle=0.015, seed=k) for k in ex.GOLD_COUNTS}
    judged = ex.claims(sq, _curves(0.5, 0.6))
    assert len(judged) == len(ex.GOLD_COUNTS) + 1
    assert all(f"{k} gold labels" in c.text for c, k in zip(judged, ex.GOLD_COUNTS, strict=False))
    assert ex.GOLD_COUNTS == (100, 200, 400, 800) and ex.ESTIMATOR == "dr_official"
