"""Planted-signal tests of ``llm_methods.mas2.experiment.claims`` (issue 42): each claim can hold
and fail on planted per-(seed, task) scores, a null method (the baseline in MAS²'s place) is
not held, and the controls turn a verdict inconclusive."""

from __future__ import annotations

import numpy as np
import pytest

from llm_methods.mas2 import experiment as ex

SEEDS, TASKS = 10, 80


def _scores(p: float, seed: int) -> np.ndarray:
    """(seeds, tasks) success averaged over 2 eval runs, Bernoulli(p)."""
    rng = np.random.default_rng(seed)
    return rng.binomial(2, p, size=(SEEDS, TASKS)) / 2


def _costs(usd: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return usd * rng.uniform(0.8, 1.2, size=(SEEDS, TASKS))


def _claims(
    mas2: float, once: float, fixed: float, mas2_cost: float = 0.002, fixed_cost: float = 0.015
):  # type: ignore[no-untyped-def]
    success = {
        "mas2_cto": _scores(mas2, 1),
        "generate_once": _scores(once, 2),
        "fixed": _scores(fixed, 3),
        "mas2_no_cto": _scores(0.5, 4),
    }
    cost = {k: _costs(0.002, 5) for k in success}
    cost["mas2_cto"], cost["fixed"] = _costs(mas2_cost, 6), _costs(fixed_cost, 7)
    return ex.claims(success, cost)


def test_all_claims_hold_on_a_planted_win() -> None:
    a, b, c = _claims(mas2=0.9, once=0.6, fixed=0.6)
    assert [x.verdict for x in (a, b, c)] == ["held", "held", "held"]
    assert a.effect is not None and a.effect.method in ("paired bootstrap", "paired t over seeds")
    assert b.effect is not None and b.effect.paper == ex.PAPER_GAIN_VS_SOTA_PTS


def test_claims_fail_on_a_planted_loss() -> None:
    a, b, c = _claims(mas2=0.6, once=0.9, fixed=0.9)
    assert [x.verdict for x in (a, b, c)] == ["not held", "not held", "not held"]


def test_null_method_is_not_held() -> None:
    """The baseline in MAS²'s place: an exact zero gain is below the 2-pt threshold; for the
    non-inferiority claim (c), a method worse than the fixed MAS by more than the margin."""
    fixed = _scores(0.8, 3)
    success = {"mas2_cto": fixed, "generate_once": fixed, "fixed": fixed}
    cost = {k: _costs(0.002, 5) for k in success}
    cost["fixed"] = _costs(0.015, 7)
    a, b, _ = ex.claims(success, cost)
    assert (a.verdict, b.verdict) == ("not held", "not held")
    assert a.effect is not None and a.effect.method == "exact"
    worse = np.clip(fixed - 0.1, 0, 1)  # 10 pts worse than the fixed MAS, margin 2 pts
    _, _, c = ex.claims({**success, "mas2_cto": worse}, cost)
    assert c.verdict == "not held"


def test_matched_cost_control_makes_c_inconclusive() -> None:
    """MAS² costing more than the fixed MAS is not a matched-cost comparison."""
    _, _, c = _claims(mas2=0.9, once=0.6, fixed=0.6, mas2_cost=0.03, fixed_cost=0.015)
    assert c.verdict == "inconclusive" and c.criterion_met is True
    assert [p.name for p in c.failed_preconditions] == ["MAS² costs no more than the fixed MAS"]


def test_headroom_control() -> None:
    a, b, _ = _claims(mas2=1.0, once=1.0, fixed=0.6)
    assert a.verdict == "inconclusive" and a.failed_preconditions
    assert b.verdict == "held"


def test_evaluate_reports_per_task_scores() -> None:
    """The per-task arrays the paired intervals need come back in task order."""
    from llm_methods.mas2.policy import Team
    from llm_methods.mas2.pool import SimAgent, load_pool
    from llm_methods.mas2.tasks import Grader, generate_arith

    pool = load_pool()
    grader = Grader(allow_unisolated=True)
    tasks = generate_arith(3, 7)
    out = ex.evaluate(
        "fixed", Team.uniform(pool.names), tasks, SimAgent(pool, grader), grader, pool, 2, 0
    )
    assert len(out["task_success"]) == 3 and len(out["task_cost"]) == 3
    assert np.mean(out["task_success"]) == pytest.approx(out["success"])
    assert np.mean(out["task_cost"]) == pytest.approx(out["cost"])


def test_report_names_the_isolation_boundary_that_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """The experiment's report (``sandbox_isolation`` and its summary line) names the boundary
    the grader's programs actually ran behind, "none (hook only)" without an OS boundary; the
    best one available here when no program ran (issue 42)."""
    from types import SimpleNamespace

    from llm_methods.mas2 import isolation

    assert ex._isolation(SimpleNamespace(isolation={"none"})) == "none (hook only)"
    assert ex._isolation(SimpleNamespace(isolation={"userns", "bwrap"})) == "bwrap, userns"
    monkeypatch.setattr(isolation, "available", lambda: ("userns",))
    assert ex._isolation(SimpleNamespace(isolation=set())) == "userns"
    monkeypatch.setattr(isolation, "available", lambda: ())
    assert ex._isolation(SimpleNamespace(isolation=set())) == "none (hook only)"
