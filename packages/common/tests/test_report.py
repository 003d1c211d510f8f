from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from iclr26_common import Experiment, Result
from iclr26_common.report import atomic_write_text, write_index, write_result


def _run(quick: bool, out_dir: Path) -> Result:
    raise NotImplementedError


EXP = Experiment("demo", "Demo Paper (arXiv:2601.00001)", "Demo models beat baselines.", _run)


def _result(verdict: str = "held") -> Result:
    return Result(
        verdict=verdict,  # type: ignore[arg-type]
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
    assert md.rstrip().endswith("**Verdict: held at this scale**")


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
    bad = Result("held", "s", {"obj": object()}, [0], "tiny")
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
            tmp_path / name, exp, _result(verdict), status=verdict, duration_s=75, quick=True
        )  # type: ignore[arg-type]
    exp = Experiment("c-err", "P", "claim | with pipe", _run)
    write_result(
        tmp_path / "c-err", exp, None, status="error", error="x", duration_s=1, quick=False
    )
    (tmp_path / "d-corrupt").mkdir()
    (tmp_path / "d-corrupt" / "result.json").write_text("{not json")
    (tmp_path / "e-list").mkdir()
    (tmp_path / "e-list" / "result.json").write_text("[1, 2]")

    index = write_index(tmp_path)
    assert index == tmp_path / "index.md"
    md = index.read_text()
    assert "5 experiments: 1 held, 1 not held, 3 error." in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 6  # header + 5
    assert "[report.md](a-held/report.md)" in md and "1 min 15 s" in md
    assert "claim \\| with pipe" in md
    corrupt = next(r for r in rows if "d-corrupt" in r)
    assert "unreadable result.json" in corrupt and "**error**" in corrupt
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())
