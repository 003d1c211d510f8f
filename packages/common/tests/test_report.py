from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from iclr26_common import Claim, Experiment, Result
from iclr26_common.index import ATTEMPTS_DIR, write_attempt, write_index
from iclr26_common.report import atomic_write_text, read_result, write_result


def _run(quick: bool, out_dir: Path) -> Result:
    raise NotImplementedError


EXP = Experiment("demo", "Demo Paper (arXiv:2601.00001)", "Demo models beat baselines.", _run)


def _result(verdict: str = "held") -> Result:
    return Result(
        claims=[Claim("Demo wins.", "acc >= 0.9", {"acc": 0.91}, verdict)],  # type: ignore[arg-type]
        summary="We get 0.91 vs 0.50.",
        metrics={"acc": np.float32(0.91), "per_class": np.array([1, 2]), "cfg": {"lr": 0.1}},
        seeds=[0, 1, 2],
        scale="4 classes × 2 distances, 1 epoch",
        table_markdown="| a | b |\n|---|---|\n| 1 | 2 |",
        plots=["curve.png", "missing.png"],
        details="Extra *markdown*.",
    )


def test_write_result_held(tmp_path: Path) -> None:
    (tmp_path / "curve.png").write_bytes(b"png")
    write_result(tmp_path, EXP, _result(), status="held", duration_s=1.23456, quick=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curve.png", "report.md", "result.json"]

    data = json.loads((tmp_path / "result.json").read_text())
    assert data["name"] == "demo" and data["status"] == data["verdict"] == "held"
    assert data["claim"] == EXP.claim and data["seeds"] == [0, 1, 2] and data["quick"] is True
    assert data["metrics"] == {"acc": pytest.approx(0.91), "per_class": [1, 2], "cfg": {"lr": 0.1}}
    assert data["duration_s"] == 1.235 and data["error"] is None
    assert "iclr26-common" in data["versions"] and data["python"]

    md = (tmp_path / "report.md").read_text()
    for text in [
        "# demo",
        EXP.paper,
        f"> {EXP.claim}",
        "4 classes × 2 distances, 1 epoch (quick mode)",
        "**Seeds:** 0, 1, 2",
        "We get 0.91 vs 0.50.",
        "| 1 | 2 |",
        "| cfg.lr | 0.1 |",
        "![curve.png](curve.png)",
        "plot file missing: `missing.png`",
        "Extra *markdown*.",
    ]:
        assert text in md, text
    verdict = md.split("## Verdict")[1]
    assert verdict.strip().startswith("**Verdict: held at this scale**")
    assert "1 of 1 claims held;" in verdict


def test_write_result_not_held_and_error(tmp_path: Path) -> None:
    write_result(tmp_path, EXP, _result("not held"), status="not held", duration_s=0, quick=False)
    assert "**Verdict: not held at this scale**" in (tmp_path / "report.md").read_text()

    err = "Traceback ...\nValueError: ```fenced``` text"
    write_result(tmp_path, EXP, None, status="error", error=err, duration_s=2, quick=False)
    md = (tmp_path / "report.md").read_text()
    assert "**Error**" in md and "````text\n" + err + "\n````" in md
    assert "Verdict: held" not in md and "Our numbers" not in md
    data = json.loads((tmp_path / "result.json").read_text())
    assert data["status"] == "error" and data["verdict"] is None and data["error"] == err


def test_write_result_rejects_inconsistent_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="status"):
        write_result(tmp_path, EXP, _result(), status="ok", duration_s=0, quick=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="verdict"):
        write_result(tmp_path, EXP, _result(), status="not held", duration_s=0, quick=False)
    bad = Result(
        claims=_result().claims, summary="s", metrics={"obj": object()}, seeds=[0], scale="t"
    )
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        write_result(tmp_path, EXP, bad, status="held", duration_s=0, quick=False)
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_atomic_write_keeps_old_file_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f.txt"
    atomic_write_text(target, "old")

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_write_index_counts_and_corrupt_json(tmp_path: Path) -> None:
    for name, verdict in [("a-held", "held"), ("b-not", "not held")]:
        exp = Experiment(name, "P", f"claim of {name}", _run)
        write_result(
            tmp_path / name,
            exp,
            _result(verdict),
            status=verdict,
            duration_s=70,
            wall_s=75,
            quick=True,
        )  # type: ignore[arg-type]
    exp = Experiment("c-err", "P", "claim of c-err", _run)
    write_result(
        tmp_path / "c-err", exp, None, status="error", error="x | y", duration_s=1, quick=False
    )
    (tmp_path / "d-corrupt").mkdir()
    (tmp_path / "d-corrupt" / "result.json").write_text("{not json")
    (tmp_path / "e-list").mkdir()
    (tmp_path / "e-list" / "result.json").write_text("[1, 2]")

    index = write_index(tmp_path)
    assert index == tmp_path / "index.md"
    md = index.read_text()
    assert (
        "5 experiments: 1 held, 1 not held, 0 inconclusive (control failed), 0 inconclusive (underpowered), 3 error."
        in md
    )
    table = md.split("## Claims")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 6  # header + 5
    assert "[report.md](a-held/report.md)" in md and "1 min 15 s" in md
    assert "No claims judged: x | y" in md
    corrupt = next(r for r in rows if "d-corrupt" in r)
    assert "**error**" in corrupt and "unreadable result.json" in md.split("### d-corrupt")[1]
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


def _claims_result() -> Result:
    return Result(
        summary="Two claims.",
        metrics={},
        seeds=[0],
        scale="tiny",
        claims=[
            Claim("A | beats B.", "gap >= 0.05", {"gap": 0.1, "per": {"s1": 0.9}}, True),
            Claim("C is robust.", "drop <= 0.02", {"drop": 0.3}, False),
        ],
    )


def test_claims_in_result_report_and_index(tmp_path: Path) -> None:
    write_result(
        tmp_path / "demo",
        EXP,
        _claims_result(),
        status="not held",
        duration_s=5,
        wall_s=70,
        devices=["cpu"],
        threads=2,
        quick=True,
        run_id="r1",
    )
    data = json.loads((tmp_path / "demo" / "result.json").read_text())
    assert data["schema"] == 4 and data["verdict"] == "not held"
    assert [c["verdict"] for c in data["claims"]] == ["held", "not held"]
    assert data["claims"][0]["measured"] == {"gap": 0.1, "per": {"s1": 0.9}}
    assert data["wall_s"] == 70 and data["budget_s"] == 60 and data["within_budget"] is False
    assert data["device"] == "cpu" and data["threads"] == [2] and data["run_id"] == "r1"
    md = (tmp_path / "demo" / "report.md").read_text()
    assert "## Claims and verdicts" in md and "| 2 | C is robust. | drop <= 0.02 |" in md
    assert "gap = 0.1; per.s1 = 0.9" in md and "A \\| beats B." in md
    assert "over budget" in md and "1 of 2 claims held" in md

    index = write_index(tmp_path, run_id="r1").read_text()
    assert "Claims (2): 1 held, 1 not held, 0 inconclusive (control failed)" in index
    row = next(line for line in index.splitlines() if line.startswith("| demo"))
    assert "| not held | 1/2 | quick | 1 min 10 s ⚠ over budget | cpu | this run |" in row
    assert "| 1 | A \\| beats B. | — (point estimate: gap >= 0.05) | held |" in index
    assert "| 2 | C is robust. | — (point estimate: drop <= 0.02) | not held |" in index
    later = write_index(tmp_path, run_id="r2").read_text()
    assert (
        f"earlier run ({data['timestamp'].replace('T', ' ').removesuffix('+00:00')} UTC)" in later
    )


def test_schema_1_results_stay_readable(tmp_path: Path) -> None:
    old = {
        "schema": 1,
        "name": "old",
        "paper": "Old Paper",
        "claim": "An old single-verdict claim.",
        "status": "held",
        "verdict": "held",
        "duration_s": 12.0,
        "quick": False,
        "timestamp": "2026-11-30T10:00:00+00:00",
        "distribution": "old-dist",
        "versions": {"old-dist": "0.1.0"},
    }
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "result.json").write_text(json.dumps(old))
    data = read_result(tmp_path / "old" / "result.json")
    assert data["claims"] == [] and data["wall_s"] is None and data["run_id"] is None
    assert data["distribution_version"] == "0.1.0"
    index = write_index(tmp_path, run_id="now").read_text()
    assert (
        "1 experiment: 1 held, 0 not held, 0 inconclusive (control failed), 0 inconclusive (underpowered), 0 error."
        in index
    )
    assert "— (single verdict)" in index and "earlier run (2026-11-30 10:00:00 UTC)" in index
    assert "Single verdict (no per-claim breakdown): An old single-verdict claim." in index


def test_index_skips_bookkeeping_folders_and_notes_failed_attempts(tmp_path: Path) -> None:
    write_result(tmp_path / "demo", EXP, _result(), status="held", duration_s=1, quick=False)
    for hidden in (".demo.partial-x", "_attempts"):
        (tmp_path / hidden).mkdir(exist_ok=True)
        (tmp_path / hidden / "result.json").write_text("{}")
    write_attempt(
        tmp_path, "demo", run_id="r9", problem="worker was killed by signal SIGABRT", log_text="x"
    )
    index = write_index(tmp_path, run_id="r9").read_text()
    assert "1 experiment:" in index
    assert "this run's attempt failed (worker was killed by signal SIGABRT" in index
    assert (tmp_path / ATTEMPTS_DIR / "demo.log").read_text() == "x"
