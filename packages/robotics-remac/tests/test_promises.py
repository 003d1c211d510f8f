"""The promises every command keeps (issue 36), through ``main([...])`` in-process: outputs
checked before any work, Ctrl-C in ``eval`` as one line with the finished cells kept and
``--resume``, progress with ``--quiet``, a checkpoint ``fit --config tiny`` leaves for
``test``/``predict``/``eval``, finite numbers, 0644 files, and the package's own exports. Each
test names what it did on 11b2942 (before the commands moved onto :mod:`iclr26_common.outputs`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import yaml

import robotics_remac
import robotics_remac.rollout
from iclr26_common.outputs import PARTIAL_MARKER
from iclr26_common.testing import (
    assert_light_package,
    assert_one_line_error,
    nonblank_lines,
    run_main,
    shipped_configs,
)
from robotics_remac.cli import main

PROG = "robotics-remac: error: "


@pytest.fixture
def base_policy(tmp_path: Path) -> Path:
    from robotics_remac.checkpoint import save_policy
    from robotics_remac.model import FlowPolicy

    torch.manual_seed(0)
    return save_policy(tmp_path / "b.pt", FlowPolicy(channels=8, hidden=8, token_hidden=4), "base")


def _eval(policy: Path, out: Path, *extra: str) -> list[str]:
    return [
        "eval",
        "--policy",
        str(policy),
        "--method",
        "naive,planner",
        "--delays",
        "1,2",
        "--episodes",
        "6",
        "--out",
        str(out),
        *extra,
    ]


def test_outputs_are_checked_before_anything_is_loaded(
    tmp_path: Path, demo_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    """On 11b2942 `eval` loaded the policies before it looked at --out (a missing policy was
    the error), `collect` said "exists and is not empty", and `predict` had no --overwrite."""
    a_file = tmp_path / "a_file.txt"
    a_file.write_text("x\n")
    line = assert_one_line_error(main, _eval(tmp_path / "nope.ckpt", a_file), capsys, prog=PROG)
    assert f"--out {a_file}: exists and is a file; give a folder" in line
    line = assert_one_line_error(main, ["collect", "--out", str(a_file)], capsys, prog=PROG)
    assert "exists and is a file; give a folder" in line
    # collect: a folder holding earlier results needs --overwrite, which replaces the dataset
    demos = tmp_path / "demos"
    assert run_main(main, ["collect", "--out", str(demos), "--episodes", "3"], capsys).code == 0
    line = assert_one_line_error(main, ["collect", "--out", str(demos)], capsys, prog=PROG)
    assert "holds earlier results; pass --overwrite" in line
    args = ["collect", "--out", str(demos), "--episodes", "2", "--overwrite"]
    assert run_main(main, args, capsys).code == 0
    assert len(list((demos / "data").rglob("*.parquet"))) == 2
    assert not (demos / PARTIAL_MARKER).exists()
    # predict: an existing predictions.pt is refused before the data is read, unless --overwrite
    root = tmp_path / "pred"
    root.mkdir()
    (root / "predictions.pt").write_bytes(b"earlier")
    predict = ["predict", "--config", "tiny", f"--trainer.default_root_dir={root}"]
    missing = f"--data.init_args.data_dir={tmp_path / 'no_such_demos'}"
    line = assert_one_line_error(main, [*predict, missing], capsys, prog=PROG)
    # the workspace rule's line (iclr26_common.lightning.check_prediction_file); at 43a8cc5
    # remac's own: "--trainer.default_root_dir ROOT/predictions.pt: exists; pass --overwrite ..."
    assert (
        line == f"{PROG}predict: {root / 'predictions.pt'}: exists; pass --overwrite to replace it"
    )
    run = run_main(main, [*predict, f"--data.init_args.data_dir={demo_dir}", "--overwrite"], capsys)
    assert run.code == 0, run.err[-2000:]
    chunks = torch.load(root / "predictions.pt", weights_only=True)["chunks"]
    assert chunks.shape[1:] == (8, 2)


def test_eval_ctrl_c_keeps_finished_cells_and_resume_skips_them(
    tmp_path: Path,
    base_policy: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    """On 11b2942 Ctrl-C in `eval` was a KeyboardInterrupt traceback and lost every finished
    cell (results.csv was written at the end only); now one line, exit 130, the folder marked
    partial with the finished cell in cells.jsonl, and `--resume` runs only the others and
    writes what an uninterrupted run writes."""
    real = robotics_remac.rollout.rollout
    calls: list[int] = []

    def interrupted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    out = tmp_path / "ev"
    monkeypatch.setattr(robotics_remac.rollout, "rollout", interrupted)
    run = run_main(main, _eval(base_policy, out, "--quiet"), capsys)
    assert run.code == 130 and "Traceback" not in run.err
    assert nonblank_lines(run.err) == ["robotics-remac: interrupted"]
    assert (out / PARTIAL_MARKER).is_file()
    assert len((out / "cells.jsonl").read_text().splitlines()) == 1
    assert not (out / "results.csv").exists()

    line = assert_one_line_error(main, _eval(base_policy, out), capsys, prog=PROG)
    assert "partial results of an interrupted run; pass --resume" in line

    calls.clear()

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(robotics_remac.rollout, "rollout", counted)
    run = run_main(main, _eval(base_policy, out, "--quiet", "--resume"), capsys)
    assert run.code == 0, run.err
    assert len(calls) == 3  # 4 cells, the first read back
    assert not (out / PARTIAL_MARKER).exists()
    fresh = tmp_path / "fresh"
    assert run_main(main, _eval(base_policy, fresh, "--quiet"), capsys).code == 0
    assert (out / "results.csv").read_text() == (fresh / "results.csv").read_text()
    assert (out / "success_vs_delay.png").stat().st_size > 0


def test_eval_shows_progress_unless_quiet(
    tmp_path: Path, base_policy: Path, capsys: pytest.CaptureFixture
) -> None:
    """On 11b2942 `eval` drew a rich bar even off a terminal and had no --quiet (exit 2)."""
    run = run_main(main, _eval(base_policy, tmp_path / "a"), capsys)
    assert run.code == 0 and "eval cells: 4/4" in run.err, run.err
    run = run_main(main, _eval(base_policy, tmp_path / "b", "--quiet"), capsys)
    assert run.code == 0 and run.err.strip() == "", run.err


def test_output_files_are_0644_whatever_the_umask(
    tmp_path: Path, base_policy: Path, capsys: pytest.CaptureFixture
) -> None:
    """On 11b2942 files were written with the process umask (0600 under `umask 077`)."""
    old = os.umask(0o077)
    try:
        args = ["collect", "--out", str(tmp_path / "d"), "--episodes", "2"]
        assert run_main(main, args, capsys).code == 0
        assert run_main(main, _eval(base_policy, tmp_path / "ev", "--quiet"), capsys).code == 0
    finally:
        os.umask(old)
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p != base_policy]
    assert len(files) > 5
    for path in files:
        assert path.stat().st_mode & 0o777 == 0o644, path


@pytest.mark.parametrize(
    ("option", "value"),
    [("--control-period", "inf"), ("--control-period", "nan"), ("--episodes", "0")],
)
def test_numbers_refuse_nan_inf_and_non_positive(
    tmp_path: Path, base_policy: Path, capsys, option: str, value: str
) -> None:
    """On 11b2942 `--control-period inf` was accepted (every latency rounds to d = 0)."""
    args = [*_eval(base_policy, tmp_path / "o"), "--measured-delay", "2", option, value]
    line = assert_one_line_error(main, args, capsys, prog="robotics-remac eval: error: ")
    assert option in line and repr(value) in line
    assert not (tmp_path / "o").exists()


def test_tiny_fit_leaves_a_checkpoint_that_test_predict_and_eval_follow(
    tmp_path: Path, demo_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    """On 11b2942 tiny.yaml set `logger: false`, `enable_checkpointing: false` and no progress
    bar: `fit --config tiny` saved nothing to follow. Now the checkpoint it leaves in the run's
    folder is what `test`/`predict --ckpt_path` and `eval --policy` take."""
    (tiny,) = [p for p in shipped_configs("robotics_remac") if p.stem == "tiny"]
    trainer = yaml.safe_load(tiny.read_text())["trainer"]
    for key in ("enable_progress_bar", "enable_checkpointing", "logger"):
        assert trainer.get(key, True) is not False, key
    runs = tmp_path / "runs"
    common = ["--config", "tiny", f"--data.init_args.data_dir={demo_dir}"]
    run = run_main(main, ["fit", *common, f"--trainer.default_root_dir={runs}"], capsys)
    assert run.code == 0, run.err[-2000:]
    (ckpt,) = sorted(runs.rglob("*.ckpt"))
    assert ckpt.parent.name == "checkpoints" and (ckpt.parent.parent / "config.yaml").is_file()
    for command in ("test", "predict"):
        args = [command, *common, f"--trainer.default_root_dir={tmp_path / command}"]
        run = run_main(main, [*args, f"--ckpt_path={ckpt}"], capsys)
        assert run.code == 0, f"{command}: {run.err[-2000:]}"
    assert (tmp_path / "predict" / "predictions.pt").is_file()
    args = ["eval", "--policy", str(ckpt), "--method", "naive", "--delays", "1"]
    args += ["--episodes", "2", "--out", str(tmp_path / "ev"), "--quiet"]
    assert run_main(main, args, capsys).code == 0
    assert (tmp_path / "ev" / "results.csv").is_file()


def test_the_package_exports_its_api_and_imports_cheaply() -> None:
    """On 11b2942 `robotics_remac` exported only `__version__`; the exports load on first use,
    so the import itself needs no torch."""
    assert_light_package(
        "robotics_remac",
        ["DemoDataModule", "FlowPolicy", "evaluate_async"],
        defined_in={
            "make_chunker": "robotics_remac.rollout",
            "fit_base": "robotics_remac.training",
        },
    )


def test_a_checkpoint_of_another_package_is_named_with_the_option(
    tmp_path: Path, demo_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    """``test --ckpt_path <an rf-matid checkpoint>`` is the workspace's one line naming the
    option and both packages (issue 36 review). At 43a8cc5 remac's own check ran first and its
    line lacked the option: ``robotics-remac: error: PATH: a checkpoint of rf-matid (...), not of
    robotics-remac``. A 0.3.x checkpoint (flat hyperparameters, no model named) keeps remac's
    message, after the option."""
    from iclr26_common.checkpoints import MODEL_KEY

    foreign = tmp_path / "rf.ckpt"
    torch.save({"state_dict": {}, MODEL_KEY: "rf_matid.lit_module.RFMatIDModule"}, foreign)
    args = ["test", "--config", "tiny", f"--data.init_args.data_dir={demo_dir}"]
    line = assert_one_line_error(main, [*args, f"--ckpt_path={foreign}"], capsys, prog=PROG)
    assert line == (
        f"{PROG}--ckpt_path {foreign}: a checkpoint of rf-matid "
        "(rf_matid.lit_module.RFMatIDModule), not of robotics-remac"
    )
    old = Path(__file__).parent / "data" / "checkpoints_0_3" / "base_0.3.0.ckpt"
    line = assert_one_line_error(main, [*args, f"--ckpt_path={old}"], capsys, prog=PROG)
    assert line.startswith(f"{PROG}--ckpt_path {old}: written by robotics-remac 0.3.x")
    plain = tmp_path / "plain.ckpt"  # a Lightning checkpoint naming no model: common's line
    torch.save({"state_dict": {}, "hyper_parameters": {"lr": 1.0}}, plain)
    line = assert_one_line_error(main, [*args, f"--ckpt_path={plain}"], capsys, prog=PROG)
    assert line.startswith(f"{PROG}--ckpt_path {plain}: not a checkpoint of robotics-remac")
