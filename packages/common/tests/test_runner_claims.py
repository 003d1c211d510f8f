"""Preconditions and the third verdict, "inconclusive"; old result.json files stay readable."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from iclr26_common import Claim, Precondition, Result, derive_verdict
from iclr26_common.index import write_index
from iclr26_common.report import read_result

LEARNED = Precondition("baseline learned", "acc(base) - acc(trivial) >= 0.1", 0.2, True)
FLAT = Precondition("baseline learned", "acc(base) - acc(trivial) >= 0.1", 0.0, False)
CHANGED = Precondition("the method changed something", "weights flipped >= 1", 12, True)


def _judge(holds: bool, *preconditions: Precondition) -> Claim:
    return Claim.judge(
        text="Ours beats the baseline.",
        criterion="acc(ours) - acc(base) >= 0.05",
        measured={"gap": 0.07},
        holds=holds,
        preconditions=list(preconditions),
    )


@pytest.mark.parametrize("holds", [True, False])
def test_a_failed_precondition_makes_the_claim_inconclusive(holds: bool) -> None:
    claim = _judge(holds, CHANGED, FLAT)
    assert claim.verdict == "inconclusive" and not claim.held
    assert claim.criterion_met is holds  # what the criterion alone said is kept
    assert [p.name for p in claim.failed_preconditions] == ["baseline learned"]


@pytest.mark.parametrize(("holds", "verdict"), [(True, "held"), (False, "not held")])
def test_passed_preconditions_follow_the_criterion(holds: bool, verdict: str) -> None:
    assert _judge(holds, LEARNED, CHANGED).verdict == verdict
    assert _judge(holds).verdict == verdict  # none at all: as before
    old_style = Claim("Ours beats the baseline.", "gap >= 0.05", {"gap": 0.07}, verdict)
    assert old_style.verdict == verdict and old_style.preconditions == []


def test_preconditions_as_tuples_and_numpy_bools() -> None:
    claim = _judge(True, ("data loaded", "rows >= 1", 10, np.bool_(False)))  # type: ignore[arg-type]
    assert claim.verdict == "inconclusive"
    assert claim.preconditions[0] == Precondition("data loaded", "rows >= 1", 10, False)
    assert type(claim.preconditions[0].passed) is bool
    with pytest.raises(TypeError, match="Precondition"):
        _judge(True, ("too", "short"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name"):
        Precondition(" ", "rule", 1, True)


def test_inconclusive_needs_a_failed_control() -> None:
    with pytest.raises(ValueError, match="failed precondition"):
        Claim("X.", "rule", {}, "inconclusive")
    with pytest.raises(ValueError, match="failed precondition"):
        Claim("X.", "rule", {}, "inconclusive", [LEARNED])
    with pytest.raises(ValueError, match="contradicts"):
        Claim("X.", "rule", {}, True, criterion_met=False)
    claim = _judge(True, FLAT)
    copy = dataclasses.replace(claim)  # round-trips through __init__
    assert copy.verdict == "inconclusive" and copy.criterion_met is True


def test_an_untested_claim_is_inconclusive_without_an_effect(
    recwarn: pytest.WarningsRecorder,
) -> None:
    claim = Claim.untested(
        text="Ours beats the baseline.", criterion="gap >= 0.05", preconditions=[LEARNED, FLAT]
    )
    assert claim.verdict == "inconclusive" and claim.reason == "control failed: baseline learned"
    assert claim.criterion_met is None and claim.effect is None  # undecided, not "not met"
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
    copy = dataclasses.replace(claim)
    assert copy.verdict == "inconclusive" and copy.criterion_met is None
    from iclr26_common.report import _render_claims

    text = "\n".join(_render_claims([claim.to_dict()]))
    assert "— (not measured: a control failed)" in text and "(it was not measured)" in text
    assert "point estimate" not in text and "criterion alone" not in text
    with pytest.raises(ValueError, match="needs a failed precondition"):
        Claim.untested(text="X.", criterion="rule", preconditions=[LEARNED])


def test_to_dict_records_preconditions_and_criterion() -> None:
    data = _judge(False, FLAT).to_dict()
    assert data["verdict"] == "inconclusive" and data["criterion_met"] is False
    assert data["preconditions"] == [
        {
            "name": "baseline learned",
            "criterion": "acc(base) - acc(trivial) >= 0.1",
            "measured": 0.0,
            "passed": False,
        }
    ]


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        (["held", "held"], "held"),
        (["held", "inconclusive"], "inconclusive"),
        (["inconclusive", "inconclusive"], "inconclusive"),
        (["not held", "inconclusive"], "not held"),  # a failed test outweighs an untestable one
        (["held", "not held"], "not held"),
    ],
)
def test_experiment_verdict(claims: list[str], expected: str) -> None:
    built = [
        _judge(True, FLAT) if v == "inconclusive" else _judge(v == "held", LEARNED) for v in claims
    ]
    assert derive_verdict(built) == expected
    result = Result(claims=built, summary="s", metrics={}, seeds=[0], scale="t")
    assert result.verdict == expected


def test_schema_2_results_stay_readable(tmp_path: Path) -> None:
    old = {
        "schema": 2,
        "name": "old2",
        "paper": "Old Paper",
        "claim": "Two claims.",
        "status": "not held",
        "verdict": "not held",
        "claims": [
            {"text": "A.", "criterion": "a", "measured": {"a": 1}, "verdict": "held"},
            {"text": "B.", "criterion": "b", "measured": {"b": 0}, "verdict": "not held"},
        ],
        "device": "cuda (NVIDIA H200)",
        "threads": 2,
        "quick": True,
        "timestamp": "2026-12-01T10:00:00+00:00",
        "distribution": "old-dist",
        "distribution_version": "0.3.0",
        "versions": {"old-dist": "0.3.0"},
    }
    (tmp_path / "old2").mkdir()
    (tmp_path / "old2" / "result.json").write_text(json.dumps(old))
    data = read_result(tmp_path / "old2" / "result.json")
    assert data["devices"] == ["cuda (NVIDIA H200)"] and data["threads"] == [2]
    assert data["source"] is None and data["nonfinite_metrics"] == []
    index = write_index(tmp_path, registered=["old2"], mode="quick").read_text()
    assert (
        "1 of 1 registered experiments (quick mode): 0 held, 1 not held, 0 inconclusive (control failed)"
        in index
    )
    assert "| 2 | B. | — (point estimate: b) | not held |" in index


def test_a_control_failed_claim_gives_no_advice_on_units() -> None:
    from iclr26_common.effects import t_effect
    from iclr26_common.report import effect_text

    effect = t_effect([0.1, 0.5, 0.9], name="gap", threshold=0.3)  # straddles: underpowered
    decided = Claim.test(text="X.", effect=effect).to_dict()
    gated = Claim.test(text="X.", effect=effect, preconditions=[FLAT]).to_dict()
    assert "needs ~" in effect_text(decided) or "no number of units" in effect_text(decided)
    assert "needs ~" not in effect_text(gated) and "no number of units" not in effect_text(gated)
    assert effect_text(gated).startswith("0.5 [")
