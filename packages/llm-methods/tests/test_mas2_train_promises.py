"""``llm-methods mas2 train`` keeps the promises of every command (issue 36): progress on
stderr that ``--quiet`` turns off, and the ``--overwrite``/``--resume`` rule of
:mod:`iclr26_common.outputs` with the finished CTO rounds kept. Both tests fail on e21a374
(``train`` had neither ``--quiet`` nor ``--resume``, printed nothing on stderr and kept nothing
of an interrupted run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iclr26_common.outputs import PARTIAL_MARKER
from iclr26_common.testing import assert_one_line_error, run_main
from llm_methods.cli import main

#: two arithmetic tasks, two CTO rounds of small trees: a run takes about a second
TRAIN = ["mas2", "train", "--tasks", "synth-arith", "--limit", "2", "--rounds", "2", "--k", "2"]


def test_train_shows_progress_over_each_rounds_trees_unless_quiet(
    tmp_path: Path, capsys: Any
) -> None:
    loud = run_main(main, [*TRAIN, "--out", str(tmp_path / "a")], capsys)
    assert loud.code == 0, loud.err
    assert "CTO round 1/2: 2/2" in loud.err and "CTO round 2/2: 2/2" in loud.err
    quiet = run_main(main, [*TRAIN, "--out", str(tmp_path / "b"), "--quiet"], capsys)
    assert quiet.code == 0 and quiet.err.strip() == "", quiet.err
    assert (tmp_path / "b" / "team.json").read_bytes() == (
        tmp_path / "a" / "team.json"
    ).read_bytes()


def test_train_keeps_finished_rounds_and_resumes_to_the_uninterrupted_result(
    tmp_path: Path, capsys: Any, ctrl_c_at: Any
) -> None:
    """Ctrl-C in the second round's DPO: one line, exit 130, the folder marked partial with the
    first round's state; a rerun is refused without ``--resume`` (or ``--overwrite``), and with
    other settings, naming them; ``--resume`` trains only the second round and writes what an
    uninterrupted run writes, the state file gone; a complete folder is refused unless
    ``--overwrite``."""
    from llm_methods.mas2 import cto

    dpo = ctrl_c_at(cto, "dpo_step")  # one DPO step per CTO round
    args = [*TRAIN, "--quiet"]
    whole = tmp_path / "whole"
    assert run_main(main, [*args, "--out", str(whole)], capsys).code == 0
    dpo.reset(at=2)
    out = tmp_path / "run"
    run = run_main(main, [*args, "--out", str(out)], capsys)
    assert run.code == 130 and run.err.strip() == "llm-methods: interrupted", run.err
    assert sorted(p.name for p in out.iterdir()) == [PARTIAL_MARKER, "cto-state.json"]
    line = assert_one_line_error(main, [*args, "--out", str(out)], capsys)
    assert "pass --resume" in line, line
    line = assert_one_line_error(main, [*args, "--out", str(out), "--resume", "--k", "3"], capsys)
    assert "ran with --k 2, this one with 3; rerun with its settings" in line, line
    dpo.reset()
    resumed = run_main(main, [*args, "--out", str(out), "--resume"], capsys)
    assert resumed.code == 0, resumed.err
    assert dpo.calls == 1  # the second round only
    assert sorted(p.name for p in out.iterdir()) == ["history.json", "team.json"]
    for name in ("history.json", "team.json"):
        assert (out / name).read_bytes() == (whole / name).read_bytes(), name
    line = assert_one_line_error(main, [*args, "--out", str(out)], capsys)
    assert "holds earlier results; pass --overwrite" in line, line
    assert run_main(main, [*args, "--out", str(out), "--overwrite"], capsys).code == 0
