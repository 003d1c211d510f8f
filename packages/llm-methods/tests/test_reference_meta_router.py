"""Meta-Router's official-style learners equal the official code's on the same inputs.

Reference numbers: ``tests/data/reference/meta_router_official.*``, produced once by running the
official ``DRLearner`` / ``RLearner`` (forests of ``create_random_forest_models``, random_state
42), ``train_weighted_*learner`` and ``evaluate_total_efficiency_vs_ratio`` on inputs our
simulator generated (repository, commit and driver in the ``.source.json`` sidecar). The bias
stage is equal to float summation order (same scikit-learn forests, seeds and row order); the
router stage is compared within the official code's own run-to-run spread."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from iclr26_common.testing import assert_mutation_detected, assert_portable_close
from llm_methods.meta_router.model import MetaRouter, estimate_bias
from llm_methods.meta_router.official import efficiency_curve

REF = Path(__file__).parent / "data" / "reference"
SEED = 42  # the official random_state
#: Relative tolerance (``max |ours − official| / max |official|``, iclr26_common.testing) of the
#: bias learners' effects and the efficiency curves. Measured on AMD EPYC (2026-12-06) over
#: ATEN_CPU_CAPABILITY=default (MKL_CBWR=COMPATIBLE; also with ONEDNN_MAX_CPU_ISA=SSE41, oneDNN's
#: oldest kernels), avx2, avx512 and unset (scikit-learn and NumPy in float64, ATen is not
#: involved): 3.3e-16 (effects), 7.0e-16 (curve totals), 0 (ratios), the same under all five. The
#: official effect forest sums its trees in thread order, so the bound is a float64 floor, 1e-12 (>
#: 1000x), not 10x a few ulps. The mutations (t inverted; predictions shifted by a row) move them by
#: >= 1.86 and >= 0.72.
TOL = 1e-12


@pytest.fixture(scope="module")
def ref() -> tuple[dict, dict]:
    want = json.loads((REF / "meta_router_official.json").read_text())
    data = dict(np.load(REF / "meta_router_official.npz"))
    assert json.loads((REF / "meta_router_official.source.json").read_text())["commit"]
    return want, data


@pytest.mark.parametrize("kind", ["dr", "r"])
def test_official_bias_learner(ref: tuple[dict, dict], kind: str) -> None:
    want, d = ref
    est = estimate_bias(d["x_train"], d["y_train"], d["t_train"], f"{kind}_official", SEED)
    for split in ("train", "test"):
        expected = want[f"{kind}_delta_{split}"]
        assert_portable_close(est.effect(d[f"x_{split}"]), expected, tol=TOL, what=split)
    # the treatment indicator inverted (which source is "preference") moves it >= 10x the tol
    flipped = estimate_bias(d["x_train"], d["y_train"], 1 - d["t_train"], f"{kind}_official", SEED)
    mutated = flipped.effect(d["x_test"])
    assert_mutation_detected(mutated, want[f"{kind}_delta_test"], tol=TOL, what="t inverted")


def _spread(runs: np.ndarray) -> float:
    """Largest mean |difference| between two official runs on the test rows."""
    return max(float(np.abs(a - b).mean()) for i, a in enumerate(runs) for b in runs[i + 1 :])


@pytest.mark.parametrize("kind", ["dr", "r"])
def test_official_router_within_the_official_run_to_run_spread(
    ref: tuple[dict, dict], kind: str
) -> None:
    """The router stage (a forest on gold ∪ corrected labels) is not reproducible upstream: the
    official effect forest sums its trees in thread order and last-bit changes in the corrected
    labels move the router forest's splits (five official runs differ by mean |Δ| ≈ 0.004).
    Ours must be as close to the official runs as they are to each other; the cross-fitted
    learners are ≈ 20× further away (last test)."""
    want, d = ref
    runs = np.asarray(want[f"{kind}_eta_test_runs"])
    router = MetaRouter(f"{kind}_official", SEED).fit(d["x_train"], d["y_train"], d["t_train"])
    distance = float(np.abs(runs - router.gain(d["x_test"])).mean())
    assert distance <= 1.5 * _spread(runs)


@pytest.mark.parametrize("kind", ["dr", "r"])
def test_efficiency_curve_equals_official(ref: tuple[dict, dict], kind: str) -> None:
    want, d = ref
    eta = np.asarray(want[f"{kind}_eta_test"])
    ratios, totals = efficiency_curve(eta, d["m_test"])
    expected = want[f"{kind}_efficiency_totals"]
    assert_portable_close(ratios, want[f"{kind}_efficiency_ratios"], tol=TOL, what="ratios")
    assert_portable_close(totals, expected, tol=TOL, what="totals")
    # the predictions paired with the wrong rows (shifted by one) move the totals >= 10x the tol
    _, mutated = efficiency_curve(np.roll(eta, 1), d["m_test"])
    assert len(mutated) == len(expected)
    assert_mutation_detected(mutated, expected, tol=TOL, what="predictions shifted")


@pytest.mark.parametrize("kind", ["dr", "r"])
def test_cross_fitted_default_is_outside_that_spread(ref: tuple[dict, dict], kind: str) -> None:
    """Our default learners (econml, cross-fitted) are different estimators: the spread criterion
    above rejects them, so it can fail."""
    want, d = ref
    runs = np.asarray(want[f"{kind}_eta_test_runs"])
    router = MetaRouter(kind, SEED).fit(d["x_train"], d["y_train"], d["t_train"])
    assert float(np.abs(runs - router.gain(d["x_test"])).mean()) > 5 * _spread(runs)
