"""Antibody's claim judgement (review of issue 27, #8): planted numbers make each claim hold,
fail, or become inconclusive through each of its preconditions."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from llm_methods.antibody.experiment import (
    ABLATION,
    MAX_ALIGNED_HS,
    MIN_TASK_FA,
    claim_ratio,
    claims,
)

RATIOS = [0.05, 0.1, 0.2, 0.3]


def planted(**over: Any) -> dict[str, Any]:
    """A run in which both claims hold: SFT's attack works unsaturated at 0.05, every aligned
    model refuses first, Antibody's HS is lowest and its FA is 1 point below SFT's."""
    sft_hs = {"0.05": 50.0, "0.1": 60.0, "0.2": 95.0, "0.3": 100.0}
    m = {
        "ratios": RATIOS,
        "claim_ratio": claim_ratio({float(k): v for k, v in sft_hs.items()}),
        "ratio": 0.05,
        "hs_sft_by_ratio": sft_hs,
        "hs_after_alignment": {"sft": 0.0, "booster": 2.0, "vaccine": 0.0, "antibody": 4.0},
        "hs": {"sft": 50.0, "booster": 30.0, "vaccine": 20.0, "antibody": 6.0, ABLATION: 0.0},
        "fa": {"sft": 56.0, "booster": 40.0, "vaccine": 50.0, "antibody": 55.0},
    }
    for path, value in over.items():
        *head, last = path.split("__")
        node = m
        for k in head:
            node = node[k]
        node[last] = value
    return m


def verdicts(m: dict[str, Any]) -> list[str]:
    return [c.verdict for c in claims(m)]


def test_planted_run_holds_both_and_reports_the_control() -> None:
    m = planted()
    assert m["claim_ratio"] == 0.05
    a, b = claims(m)
    assert (a.verdict, b.verdict) == ("held", "held")
    assert a.measured[f"hs_{ABLATION}"] == 0.0 and a.measured["hs_vaccine"] == 20.0
    assert b.measured["drop"] == pytest.approx(1.0)


def test_each_claim_can_fail() -> None:
    assert verdicts(planted(hs__antibody=55.0)) == ["not held", "held"]  # above SFT
    assert verdicts(planted(hs__antibody=35.0)) == ["not held", "held"]  # below SFT, not Booster
    assert verdicts(planted(hs__antibody=30.0)) == ["not held", "held"]  # a tie is not below
    assert verdicts(planted(fa__antibody=53.5)) == ["held", "not held"]  # 2.5 points lower
    assert verdicts(planted(fa__antibody=54.0)) == ["held", "held"]  # exactly 2: within


def test_booster_aligned_hs_of_10_9_makes_a_inconclusive() -> None:
    """The issue-27 run: Booster's aligned HS 10.9 > 10, so (a) is inconclusive although its
    criterion was met; (b) does not depend on that control."""
    m = planted(hs_after_alignment__booster=10.9)
    a, b = claims(m)
    assert (a.verdict, b.verdict) == ("inconclusive", "held")
    assert a.criterion_met and [p.name for p in a.failed_preconditions] == [
        "aligned models refuse before the attack"
    ]
    assert verdicts(planted(hs_after_alignment__booster=MAX_ALIGNED_HS)) == ["held", "held"]


def test_untrained_task_makes_b_inconclusive() -> None:
    m = planted(fa__sft=MIN_TASK_FA - 1, fa__antibody=MIN_TASK_FA - 10)
    assert verdicts(m) == ["held", "inconclusive"]
    (failed,) = claims(m)[1].failed_preconditions
    assert failed.name == "the task was learned"


def test_no_unsaturated_ratio_makes_both_inconclusive() -> None:
    saturated = {"0.05": 95.0, "0.1": 100.0, "0.2": 100.0, "0.3": 100.0}
    chosen = claim_ratio({float(k): v for k, v in saturated.items()})
    assert chosen is None
    m = planted(hs_sft_by_ratio=saturated, claim_ratio=chosen, ratio=0.2)
    assert verdicts(m) == ["inconclusive", "inconclusive"]
    assert all(
        c.failed_preconditions[0].name == "an unsaturated attack ratio exists" for c in claims(m)
    )


def test_claims_is_pure() -> None:
    m = planted()
    before = copy.deepcopy(m)
    claims(m)
    assert m == before
