"""Planted-signal tests of ``llm_methods.seekbench.experiment.claims`` (issue 42): each claim
holds and fails on planted per-seed values, a null method (an agent compared with itself, or a
metric that orders nothing) is not held, and the controls (accuracy separates the pair, the
judge's labels disagree with gold) make a claim inconclusive."""

from __future__ import annotations

from llm_methods.seekbench import experiment as ex


def _per_seed(**over: list[float]) -> dict[str, list[float]]:
    values = {
        "tau_ce": [1.0, 1.0, 2 / 3, 1.0, 1.0],
        "ce_gap": [0.06, 0.05, 0.07, 0.06, 0.055],
        "premature_gap": [0.5, 0.52, 0.48, 0.55, 0.5],
        "accuracy_gap": [0.01, -0.01, 0.0, 0.005, -0.005],
        "kappa_information_quality": [0.6, 0.58, 0.62, 0.6, 0.61],
    }
    values.update(over)
    return values


def test_claims_hold_on_planted_separation() -> None:
    assert [c.verdict for c in ex.claims(_per_seed())] == ["held", "held", "held"]


def test_claims_fail_on_planted_reversal() -> None:
    judged = ex.claims(
        _per_seed(
            tau_ce=[-1.0, -2 / 3, -1.0, -1.0, -2 / 3],
            ce_gap=[-0.05, -0.06, -0.04, -0.05, -0.06],
            premature_gap=[-0.3, -0.35, -0.3, -0.32, -0.31],
        )
    )
    assert [c.verdict for c in judged] == ["not held", "not held", "not held"]


def test_null_method_is_not_held() -> None:
    """The calibrated agent in the premature agent's place: every gap is exactly 0; a CE that
    orders nothing: tau 0."""
    judged = ex.claims(
        _per_seed(
            tau_ce=[0.0] * 5, ce_gap=[0.0] * 5, premature_gap=[0.0] * 5, accuracy_gap=[0.0] * 5
        )
    )
    assert [c.verdict for c in judged] == ["not held", "not held", "not held"]
    assert all(c.effect is not None and c.effect.method == "exact" for c in judged)


def test_controls_make_claims_inconclusive() -> None:
    _, b, c = ex.claims(_per_seed(accuracy_gap=[0.10, 0.12, 0.09, 0.11, 0.1]))
    assert (b.verdict, c.verdict) == ("inconclusive", "inconclusive")
    assert [p.name for p in b.failed_preconditions] == ["accuracy does not separate the pair"]
    a, b, _ = ex.claims(_per_seed(kappa_information_quality=[0.6, 0.2, 0.6, 0.6, 0.6]))
    assert a.verdict == b.verdict == "inconclusive"
    assert "judge labels carry information quality" in [p.name for p in a.failed_preconditions]
