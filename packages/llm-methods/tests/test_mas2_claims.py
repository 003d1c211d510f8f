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
    mas2: float,
    once: float,
    fixed: float,
    budget: float | None = None,
    mas2_cost: float = 0.0015,
    budget_cost: float = 0.0009,
):  # type: ignore[no-untyped-def]
    """Planted successes; ``budget``: the matched-cost baseline (default: ``fixed``'s)."""
    success = {
        "mas2_cto": _scores(mas2, 1),
        "generate_once": _scores(once, 2),
        "fixed": _scores(fixed, 3),
        "mas2_no_cto": _scores(0.5, 4),
        "fixed_budget": _scores(fixed if budget is None else budget, 8),
    }
    cost = {k: _costs(0.002, 5) for k in success}
    cost["fixed"] = _costs(0.015, 7)
    cost["mas2_cto"], cost["fixed_budget"] = _costs(mas2_cost, 6), _costs(budget_cost, 9)
    return ex.claims(success, cost)


def test_all_claims_hold_on_a_planted_win() -> None:
    a, b, c = _claims(mas2=0.9, once=0.6, fixed=0.6)
    assert (
        c.effect is not None and c.effect.name == "success gain over the fixed MAS at MAS²'s cost"
    )
    assert [x.verdict for x in (a, b, c)] == ["held", "held", "held"]
    assert a.effect is not None and a.effect.method in ("paired bootstrap", "paired t over seeds")
    assert b.effect is not None and b.effect.paper == ex.PAPER_GAIN_VS_SOTA_PTS


def test_claims_fail_on_a_planted_loss() -> None:
    a, b, c = _claims(mas2=0.6, once=0.9, fixed=0.9)
    assert [x.verdict for x in (a, b, c)] == ["not held", "not held", "not held"]


def test_null_method_is_not_held() -> None:
    """The baseline in MAS²'s place: an exact zero gain is below the 2-pt threshold, for each
    baseline (generate-once, the fixed MAS, the fixed MAS at MAS²'s cost)."""
    same = _scores(0.8, 3)
    success = {"mas2_cto": same, "generate_once": same, "fixed": same, "fixed_budget": same}
    cost = {k: _costs(0.002, 5) for k in success}
    cost["fixed"], cost["fixed_budget"] = _costs(0.015, 7), _costs(0.001, 9)
    verdicts = ex.claims(success, cost)
    assert [x.verdict for x in verdicts] == ["not held"] * 3
    assert all(x.effect is not None and x.effect.method == "exact" for x in verdicts)


def test_matched_cost_claim_compares_with_the_budget_baseline_not_the_fixed_mas() -> None:
    """(c) is its own comparison (review of issue 42: it repeated (b)'s effect): MAS² losing to
    the expensive fixed MAS and beating the fixed workflow at its own cost gives (b) not held
    and (c) held, and the reverse gives (b) held and (c) not held."""
    _, b, c = _claims(mas2=0.85, once=0.6, fixed=0.95, budget=0.6)
    assert (b.verdict, c.verdict) == ("not held", "held")
    assert b.effect is not None and c.effect is not None and b.effect.estimate < 0 < c.effect.low
    _, b, c = _claims(mas2=0.85, once=0.6, fixed=0.6, budget=0.95)
    assert (b.verdict, c.verdict) == ("held", "not held")


def test_matched_cost_control_makes_c_inconclusive() -> None:
    """A baseline that costs more than MAS² is not a matched-cost comparison."""
    _, _, c = _claims(mas2=0.9, once=0.6, fixed=0.6, mas2_cost=0.0009, budget_cost=0.0015)
    assert c.verdict == "inconclusive" and c.criterion_met is True
    assert [p.name for p in c.failed_preconditions] == [
        "the matched-cost baseline costs no more than MAS²"
    ]


def test_budget_baseline_is_the_registered_workflow_and_models() -> None:
    """The matched-cost system runs the fixed MAS's workflow with mathy on arithmetic and coder
    on code, and stays below MAS²'s cost of the registered run ($1.47 per 1k tasks)."""
    from llm_methods.mas2.policy import Team
    from llm_methods.mas2.pool import SimAgent, load_pool
    from llm_methods.mas2.tasks import Grader, generate_arith, generate_code

    pool = load_pool()
    grader = Grader(allow_unisolated=True)
    agent = SimAgent(pool, grader)
    team = Team.uniform(pool.names)
    tasks = generate_arith(4, 7) + generate_code(4, 7)
    budget = ex.evaluate("fixed_budget", team, tasks, agent, grader, pool, 2, 0)
    fixed = ex.evaluate("fixed", team, tasks, agent, grader, pool, 2, 0)
    assert budget["cost"] * 1000 < 1.47 < fixed["cost"] * 1000
    from llm_methods.mas2.pool import BASE_TOKENS

    tokens = 2 * BASE_TOKENS["AnswerGenerate"] + BASE_TOKENS["Programmer"] + 120 + 3 * 40
    affordable = [m for m in pool.models.values() if tokens * m.verbosity * m.price / 1e3 <= 1.47]
    assert sorted(pool.models.keys() - {m.name for m in affordable}) == [ex.FIXED_MODEL]
    for kind, skill in (("arith", "reason"), ("code", "code")):
        assert ex.BUDGET_MODEL[kind] == max(affordable, key=lambda m: m.skill[skill]).name


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
