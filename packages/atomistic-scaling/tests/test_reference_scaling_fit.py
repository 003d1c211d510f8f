"""The L(N, D) fitter against ANOTHER paper's published fit, hand-copied, with no generator.

What this checks: our Huber / L-BFGS fitter (Chinchilla Approach 3) on the Chinchilla loss table
gives the parameters that Besiroglu et al. (2024), *Chinchilla Scaling: A replication attempt*,
published for their own Approach-3 fit of that table. The expected numbers were copied by hand
from that paper's repository (the stored output of a notebook cell; provenance in
tests/data/reference/chinchilla_besiroglu2024.md); no script here produced them and none can
regenerate them. What it does not check: anything about the atomistic paper's own code
(nnkhang19/scaling-laws-and-symmetry, unread), its data or its fits."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from atomistic_scaling.scaling import HUBER_DELTA, _objective, fit_nd_law, fit_sum_of_powers
from iclr26_common.testing import assert_mutation_detected, assert_portable_close

DATA = Path(__file__).parent / "data" / "reference" / "chinchilla_besiroglu2024.json"
PUBLISHED = {
    "alpha": 0.34731265761033453,
    "beta": 0.3671826173946711,
    "E": 1.817235504463726,
    "A": 477.84171252965143,
    "B": 2143.8637880335505,
    "objective": 0.001018274034615,
}
EXCLUDED_HIGHEST = 5  # the published fit drops the 5 points with the highest loss
FIT_PARAMETERS = ("alpha", "beta", "E", "A", "B")
# Tolerances: relative errors (iclr26_common.testing), measured on an AMD EPYC, 2026-12-06, over
# ATEN_CPU_CAPABILITY=default (+ MKL_CBWR=COMPATIBLE), avx2, avx512, nothing set, one thread, and
# NumPy's baseline kernels (NPY_DISABLE_CPU_FEATURES=X86_V3,X86_V4,AVX512_ICL,
# OPENBLAS_CORETYPE=Prescott; the fit is NumPy / SciPy only, torch plays no part):
# - the fit, each parameter relative to the published one: alpha 6.2e-6, beta 2.8e-5, E 9.6e-6,
#   A 3.3e-5, B 2.1e-4, from where our L-BFGS-B starts stop, not from the CPU (NumPy's baseline
#   kernels move it by <= 3.3e-8). Tolerances 3x those (rounded; B 2.9x). Issue 39: HEAD
#   d9942d3 had one tolerance of 2e-3 for all five (10-320x the differences) and no check of
#   the Huber delta: a fit with the delta doubled stayed within it in beta and E, halved in
#   alpha, beta and E;
# - the Huber delta doubled (2e-3) moves alpha by 3.8e-3, beta 1.9e-3, E 1.3e-3, A 2.2e-2,
#   B 1.5e-2: 19x (beta) to 220x (A) these tolerances; halved (5e-4): 1.6e-3, 1.8e-3, 9.7e-4,
#   8.7e-3, 1.3e-2 (18x to 87x);
# - the objective at the published parameters: 4.2e-13 (the published value has 13 digits), the
#   same bits under every setting. Tolerance 5e-12, ~10x.
FIT_TOL = {"alpha": 2e-5, "beta": 1e-4, "E": 3e-5, "A": 1e-4, "B": 6e-4}
OBJECTIVE_TOL = 5e-12


def _table(excluded: int = EXCLUDED_HIGHEST) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """N, tokens D = C / (6 N) and loss, without the ``excluded`` points of highest loss."""
    raw = json.loads(DATA.read_text())
    n = np.asarray(raw["model_size_N"])
    d = np.asarray(raw["training_flop_C"]) / (6.0 * n)
    loss = np.asarray(raw["loss"])
    keep = loss < np.sort(loss)[-excluded] if excluded else np.ones(len(loss), bool)
    return n[keep], d[keep], loss[keep]


def _fit_ratios(
    n: np.ndarray, d: np.ndarray, loss: np.ndarray, delta: float = HUBER_DELTA
) -> tuple[np.ndarray, float]:
    """The fitted alpha, beta, E, A, B divided by the published ones (the relative error of
    entry k against 1 is parameter k's relative error) and the fit's objective; ``delta``: the
    Huber delta (fit_nd_law's is HUBER_DELTA, the published 1e-3)."""
    x = np.stack([np.log(n), np.log(d)], 1)
    fit = (
        fit_sum_of_powers(x, loss, delta=delta) if delta != HUBER_DELTA else fit_nd_law(n, d, loss)
    )
    a, b = np.exp(fit.log_amplitudes)
    ours = (*fit.exponents, fit.loss_floor, a, b)
    return np.array(ours) / np.array([PUBLISHED[k] for k in FIT_PARAMETERS]), fit.objective


def _assert_each_parameter(ratios: np.ndarray, what: str) -> None:
    for name, ratio in zip(FIT_PARAMETERS, ratios, strict=True):
        assert_portable_close(ratio, 1.0, tol=FIT_TOL[name], what=f"{what} {name}")


def _mutation_detected(ratios: np.ndarray) -> list[str]:
    """The parameters that a mutated fit moves by >= 10x their tolerance."""
    return [
        name
        for name, ratio in zip(FIT_PARAMETERS, ratios, strict=True)
        if abs(ratio - 1.0) >= 10 * FIT_TOL[name]
    ]


def test_fitter_matches_besiroglu2024_published_chinchilla_fit_hand_copied_no_generator() -> None:
    """Another paper's published fit (Besiroglu et al. 2024, Chinchilla Approach 3), copied by
    hand, no generator: each of alpha, beta, E, A, B within its own tolerance (3x the measured
    difference), and the defects it guards against fail in every parameter (HEAD d9942d3's
    single 2e-3 tolerance let a fit with the Huber delta doubled match beta and E, halved
    alpha, beta and E)."""
    assert HUBER_DELTA == 1e-3  # the published fit's delta
    n, d, loss = _table()
    assert len(loss) == 240
    ratios, objective = _fit_ratios(n, d, loss)
    _assert_each_parameter(ratios, "published fit")
    # an optimum at least as good as the published one, on the same objective
    assert objective <= PUBLISHED["objective"] * (1 + 1e-6)
    # not the published method (the 5 points of highest loss kept): B moves by 5.0, beta by
    # 0.23, alpha by 5.8e-3
    kept, _ = _fit_ratios(*_table(excluded=0))
    assert _mutation_detected(kept) == list(FIT_PARAMETERS), kept - 1
    # the Huber delta doubled or halved: every parameter moves by >= 10x its tolerance
    for factor in (2.0, 0.5):
        mutated, _ = _fit_ratios(n, d, loss, delta=factor * HUBER_DELTA)
        assert _mutation_detected(mutated) == list(FIT_PARAMETERS), (factor, mutated - 1)
        with pytest.raises(AssertionError, match="relative error"):
            _assert_each_parameter(mutated, f"Huber delta x {factor:g}")


def test_objective_at_besiroglu2024_published_parameters_hand_copied() -> None:
    """Our objective is the one of the hand-copied published fit (Besiroglu et al. 2024): at the
    published parameters it gives the published minimum (to the 13 digits it was published
    with)."""
    n, d, loss = _table()
    theta = np.array(
        [
            np.log(PUBLISHED["A"]),
            np.log(PUBLISHED["B"]),
            PUBLISHED["alpha"],
            PUBLISHED["beta"],
            np.log(PUBLISHED["E"]),
        ]
    )
    value = _objective(theta, np.stack([np.log(n), np.log(d)], 1), np.log(loss), 1e-3)
    assert_portable_close(value, PUBLISHED["objective"], tol=OBJECTIVE_TOL, what="objective")
    # one formula changed: tokens D = C / N (the 6 of C = 6 N D left out) gives 18x the objective
    tokens = np.stack([np.log(n), np.log(6.0 * d)], 1)
    mutated = _objective(theta, tokens, np.log(loss), 1e-3)
    assert_mutation_detected(mutated, PUBLISHED["objective"], tol=OBJECTIVE_TOL, what="D = C / N")
