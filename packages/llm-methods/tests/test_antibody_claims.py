"""Antibody's claim judgement (review of issue 27, #8; issue 41): planted per-prompt outcomes
make each claim hold, fail, stay underpowered, or become inconclusive through each of its
preconditions; a null method (SFT in Antibody's place) holds none of the gain claims."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from llm_methods.antibody.experiment import (
    ABLATION,
    CLAIM_A_MIN_HS_REDUCTION,
    CLAIM_B_MAX_FA_DROP,
    MAX_ALIGNED_HS,
    MIN_TASK_FA,
    claim_ratio,
    claims,
)

RATIOS = [0.05, 0.1, 0.2, 0.3]
SEEDS, PROMPTS = 3, 64


def outcomes(pct: float, seeds: int = SEEDS, prompts: int = PROMPTS, shift: int = 0) -> list:
    """``(seeds, prompts)`` 0/1 outcomes, ``round(pct% x prompts)`` ones per seed from prompt
    ``shift + seed`` on (so the seeds differ a little)."""
    k = round(pct / 100 * prompts)
    rows = np.zeros((seeds, prompts), int)
    for s in range(seeds):
        rows[s, (np.arange(k) + shift + s) % prompts] = 1
    return rows.tolist()


def planted(**over: Any) -> dict[str, Any]:
    """A run in which every claim holds: SFT's attack works unsaturated at 0.05, every aligned
    model refuses first, Antibody's HS is far lowest and its FA equal to SFT's."""
    sft_hs = {"0.05": 50.0, "0.1": 60.0, "0.2": 95.0, "0.3": 100.0}
    hs = {"sft": 50.0, "booster": 31.25, "antibody": 6.25}
    fa = {"sft": 56.25, "booster": 40.625, "antibody": 56.25}
    m = {
        "ratios": RATIOS,
        "claim_ratio": claim_ratio({float(k): v for k, v in sft_hs.items()}),
        "ratio": 0.05,
        "hs_sft_by_ratio": sft_hs,
        "hs_after_alignment": {"sft": 0.0, "booster": 2.0, "vaccine": 0.0, "antibody": 4.0},
        "hs": {**hs, "vaccine": 20.0, ABLATION: 0.0},
        "fa": {**fa, "vaccine": 50.0},
        "hs_items": {k: outcomes(v) for k, v in hs.items()},
        "fa_items": {k: outcomes(v) for k, v in fa.items()},
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


def test_planted_run_holds_every_claim_with_paired_intervals() -> None:
    m = planted()
    assert m["claim_ratio"] == 0.05
    a, a2, b = claims(m)
    assert (a.verdict, a2.verdict, b.verdict) == ("held", "held", "held")
    assert a.effect.estimate == pytest.approx(6.25 - 50.0)
    assert a.effect.high <= -CLAIM_A_MIN_HS_REDUCTION and a2.effect.high <= -5
    assert "items" in a.effect.units or "seeds" in a.effect.units
    assert a.measured[f"hs_{ABLATION}"] == 0.0 and a.measured["hs_vaccine"] == 20.0
    assert b.effect.estimate == 0.0 and b.measured["drop"] == 0.0


def test_each_claim_can_fail() -> None:
    # Antibody's HS above SFT's: (a) and (a') not held
    assert verdicts(planted(hs_items__antibody=outcomes(60.0))) == ["not held"] * 2 + ["held"]
    # below SFT's, not below Booster's
    v = verdicts(planted(hs_items__antibody=outcomes(37.5)))
    assert v == ["held", "not held", "held"]
    # FA 12.5 points below SFT's (the same prompts lost in every seed): (b) not held
    m = planted(fa_items__antibody=outcomes(43.75))
    assert verdicts(m)[2] == "not held" and claims(m)[2].effect.high < -CLAIM_B_MAX_FA_DROP


def test_null_method_holds_no_gain_claim() -> None:
    """SFT in Antibody's place: the HS claims (a reduction of >= 5 points) are not held (against
    SFT an exact zero difference); the non-inferiority claim (b) holds at a tie."""
    m = planted(
        hs_items__antibody=planted()["hs_items"]["sft"],
        fa_items__antibody=planted()["fa_items"]["sft"],
    )
    a, a2, b = claims(m)
    assert a.verdict == "not held" and a.effect.method == "exact" and a.effect.estimate == 0.0
    assert a2.verdict == "not held"  # SFT's HS (50) is above Booster's (31.25)
    assert b.verdict == "held"


def test_few_prompts_and_seeds_are_underpowered() -> None:
    """A 1-point FA drop on 2 seeds x 8 prompts with spread: the interval straddles -2."""
    rng = np.random.default_rng(0)
    sft = rng.integers(0, 2, (2, 8))
    ab = sft.copy()
    ab[0, :2] = 1 - ab[0, :2]
    m = planted(fa_items__antibody=ab.tolist(), fa_items__sft=sft.tolist())
    b = claims(m)[2]
    assert b.verdict == "inconclusive" and b.reason == "underpowered"


def test_booster_aligned_hs_of_10_9_makes_a_inconclusive() -> None:
    """The issue-27 run: Booster's aligned HS 10.9 > 10, so (a) is inconclusive although its
    criterion was met; (b) does not depend on that control."""
    m = planted(hs_after_alignment__booster=10.9)
    a, a2, b = claims(m)
    assert (a.verdict, a2.verdict, b.verdict) == ("inconclusive", "inconclusive", "held")
    assert a.criterion_met and [p.name for p in a.failed_preconditions] == [
        "aligned models refuse before the attack"
    ]
    assert verdicts(planted(hs_after_alignment__booster=MAX_ALIGNED_HS)) == ["held"] * 3


def test_untrained_task_makes_b_inconclusive() -> None:
    m = planted(fa__sft=MIN_TASK_FA - 1)
    assert verdicts(m) == ["held", "held", "inconclusive"]
    (failed,) = claims(m)[2].failed_preconditions
    assert failed.name == "the task was learned"


def test_no_unsaturated_ratio_makes_every_claim_inconclusive() -> None:
    saturated = {"0.05": 95.0, "0.1": 100.0, "0.2": 100.0, "0.3": 100.0}
    chosen = claim_ratio({float(k): v for k, v in saturated.items()})
    assert chosen is None
    m = planted(hs_sft_by_ratio=saturated, claim_ratio=chosen, ratio=0.2)
    assert verdicts(m) == ["inconclusive"] * 3
    assert all(
        c.failed_preconditions[0].name == "an unsaturated attack ratio exists" for c in claims(m)
    )


def test_claims_is_pure() -> None:
    m = planted()
    before = copy.deepcopy(m)
    claims(m)
    assert m == before
