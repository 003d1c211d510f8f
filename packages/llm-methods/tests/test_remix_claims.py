"""Planted-number tests of ``llm_methods.remix.experiment.claims`` (issue 27 review #8, issue
41): each claim can hold, fail, or stay underpowered on per-seed numbers; a null method (GRPO
in ReMix's place) fails (a); GRPO's gain below MIN_GRPO_GAIN makes both inconclusive, and a
seed without replayed groups or in which GRPO never reached the target makes (a) inconclusive."""

from __future__ import annotations

from typing import Any

import pytest

from llm_methods.remix import experiment as ex


def _measured(**over: Any) -> dict[str, Any]:
    m = {
        "grpo_start": 0.60,
        "grpo_final": [0.72, 0.70, 0.73, 0.71, 0.72],
        "remix_final": [0.73, 0.71, 0.72, 0.72, 0.73],
        "grpo_reach": [9000.0, 10000.0, 9500.0, 11000.0, 10500.0],
        "remix_reach": [3000.0, 3500.0, 3200.0, 3800.0, 3400.0],
        "remix_rollouts": [13000] * 5,
        "remix_off_policy_groups": [33] * 5,
    }
    m.update(over)
    return m


def test_both_claims_hold_on_planted_wins() -> None:
    a, b = ex.claims(_measured())
    assert (a.verdict, b.verdict) == ("held", "held")
    assert a.effect.method == "t" and a.effect.n == 5 and a.effect.high <= 0.5
    assert a.measured["fraction_per_seed"][0] == round(3000 / 9000, 4)
    assert b.effect.estimate == pytest.approx(0.6) and b.effect.low >= -2.0


def test_claims_fail_on_planted_losses() -> None:
    # ReMix never reaches the target in two seeds (lower bound 13000 / GRPO's) and ends 4-5
    # points below GRPO in every seed
    a, b = ex.claims(
        _measured(
            remix_reach=[None, None, 8000.0, 9000.0, 9500.0],
            remix_final=[0.68, 0.65, 0.69, 0.66, 0.67],
        )
    )
    assert (a.verdict, b.verdict) == ("not held", "not held")
    assert a.measured["seeds_where_remix_never_reached"] == 2
    assert b.effect.high < -2.0


def test_null_method_fails_a_and_ties_b() -> None:
    """GRPO in ReMix's place: the fraction is exactly 1 in every seed (not held); (b), a
    non-inferiority claim, holds at an exact tie."""
    m = _measured()
    a, b = ex.claims(_measured(remix_reach=m["grpo_reach"], remix_final=m["grpo_final"]))
    assert (a.verdict, b.verdict) == ("not held", "held")
    assert a.effect.method == "exact" and a.effect.estimate == 1.0
    assert b.effect.method == "exact" and b.effect.estimate == 0.0


def test_two_seeds_with_spread_are_underpowered() -> None:
    a, b = ex.claims(
        _measured(
            grpo_final=[0.70, 0.72],
            remix_final=[0.66, 0.73],
            grpo_reach=[9000.0, 9000.0],
            remix_reach=[3000.0, 6000.0],
            remix_rollouts=[13000, 13000],
            remix_off_policy_groups=[33, 33],
        )
    )
    assert (a.verdict, b.verdict) == ("inconclusive", "inconclusive")
    assert a.reason == b.reason == "underpowered"


def test_grpo_not_learning_makes_both_inconclusive() -> None:
    a, b = ex.claims(_measured(grpo_start=0.72 - ex.MIN_GRPO_GAIN / 2))
    assert (a.verdict, b.verdict) == ("inconclusive", "inconclusive")
    assert a.criterion_met is True and b.criterion_met is True  # the criteria alone would hold
    assert {p.name for p in a.failed_preconditions} == {"GRPO learned"}


def test_no_replayed_groups_or_unreached_target_makes_claim_a_inconclusive() -> None:
    a, b = ex.claims(_measured(remix_off_policy_groups=[33, 0, 33, 33, 33]))
    assert a.verdict == "inconclusive" and b.verdict == "held"
    assert [p.name for p in a.failed_preconditions] == ["ReMix trained on replayed groups"]
    a, _ = ex.claims(_measured(grpo_reach=[9000.0, None, 9500.0, 11000.0, 10500.0]))
    assert a.verdict == "inconclusive"
    assert [p.name for p in a.failed_preconditions] == ["GRPO reached the target"]
