"""Planted-number tests of ``llm_methods.remix.experiment.claims`` (issue 27 review #8): each
claim can hold and fail; GRPO's gain below MIN_GRPO_GAIN makes both inconclusive, and a seed
without replayed groups makes (a) inconclusive."""

from __future__ import annotations

from typing import Any

from llm_methods.remix import experiment as ex


def _measured(**over: Any) -> dict[str, Any]:
    m = {
        "grpo_start": 0.60,
        "grpo_final": 0.70,
        "remix_final": 0.71,
        "grpo_rollouts": 4096.0,
        "remix_rollouts_to_reach": 1920.0,
        "remix_off_policy_groups": [33, 33, 33],
    }
    m.update(over)
    return m


def test_both_claims_hold_on_planted_wins() -> None:
    a, b = ex.claims(_measured())
    assert (a.verdict, b.verdict) == ("held", "held")
    assert a.measured["fraction"] == round(1920 / 4096, 4)
    assert b.measured["difference"] == 0.01


def test_claims_fail_on_planted_losses() -> None:
    # the issue-27 rerun's numbers: ReMix never reached GRPO's final, ended 0.6 points lower
    a, b = ex.claims(
        _measured(
            grpo_start=0.609, grpo_final=0.7125, remix_final=0.706, remix_rollouts_to_reach=None
        )
    )
    assert (a.verdict, b.verdict) == ("not held", "held")
    assert a.measured["fraction"] is None
    a, b = ex.claims(_measured(remix_rollouts_to_reach=2100.0, remix_final=0.67))
    assert (a.verdict, b.verdict) == ("not held", "not held")  # 0.51 > 0.5; -3 points


def test_grpo_not_learning_makes_both_inconclusive() -> None:
    a, b = ex.claims(_measured(grpo_final=0.60 + ex.MIN_GRPO_GAIN / 2))
    assert (a.verdict, b.verdict) == ("inconclusive", "inconclusive")
    assert a.criterion_met is True and b.criterion_met is True  # the criteria alone would hold
    assert {p.name for p in a.failed_preconditions} == {"GRPO learned"}


def test_no_replayed_groups_makes_claim_a_inconclusive() -> None:
    a, b = ex.claims(_measured(remix_off_policy_groups=[33, 0, 33]))
    assert a.verdict == "inconclusive" and b.verdict == "held"
    assert [p.name for p in a.failed_preconditions] == ["ReMix trained on replayed groups"]
    a, _ = ex.claims(_measured(remix_off_policy_groups=[]))
    assert a.verdict == "inconclusive"
