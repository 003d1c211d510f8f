"""The promises every rf-matid command keeps (issue 36): outputs checked before any work, one
line for a refused output, Ctrl-C as one line and exit 130 with finished benchmark cells kept
and skipped by ``--resume``, progress with ``--quiet``, a checkpoint from ``fit --config tiny``
that ``test``/``predict --ckpt_path`` follow, files written with mode 0644, and the package's
main names importable from ``rf_matid``.

Each test names what it guards; all of them fail on 11b2942 (the commit before issue 36 moved
the commands onto ``iclr26_common.outputs`` / ``progress``), as each docstring says.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from iclr26_common.outputs import PARTIAL_MARKER
from iclr26_common.testing import assert_light_package, assert_one_line_error, run_main
from rf_matid.cli import main

#: ``benchmark_row`` (conftest) and factories like it: keyword fields -> a BenchmarkRow
RowFactory = Callable[..., Any]

PROG = "rf-matid: error: "
BENCH = ["benchmark", "--models", "mlp", "--splits", "S1,S2-mod2,S3-mod1", "--epochs", "1"]


@pytest.fixture
def fake_row(benchmark_row: RowFactory) -> RowFactory:
    """``fake_row(**task)``: the row a fake ``train_and_test`` returns for a cell."""

    def make(
        arch: str = "mlp", protocol: str = "P1", split: str = "S1", seed: int = 0, **_: object
    ) -> Any:
        return benchmark_row(
            arch=arch,
            protocol=protocol,
            split=split,
            seed=seed,
            n_train=8,
            n_test=4,
            accuracy=0.75,
            macro_f1=0.7,
            class_names=["brick01", "wood02"],
            confusion=[[2, 0], [1, 1]],
        )

    return make


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch, fake_row: RowFactory) -> list[tuple[str, str]]:
    """``train_and_test`` replaced by a fake that records its cells (no Lightning run)."""
    import rf_matid.benchmark as bench

    trained: list[tuple[str, str]] = []

    def fake(**task: object):
        trained.append((str(task["arch"]), str(task["split"])))
        return fake_row(**task)  # type: ignore[arg-type]

    monkeypatch.setattr(bench, "train_and_test", fake)
    return trained


def test_benchmark_checks_its_out_before_any_training(
    tmp_path: Path, no_training: list, capsys: pytest.CaptureFixture
) -> None:
    """A file given as --out is refused before anything is trained (on 11b2942 every cell was
    trained first and the run then failed writing benchmark.md, losing the work)."""
    target = tmp_path / "outfile.txt"
    target.write_text("mine\n")
    data = tmp_path / "data"
    data.mkdir()
    line = assert_one_line_error(
        main, [*BENCH, "--data", str(data), "--out", str(target)], capsys, prog=PROG
    )
    assert f"--out {target}: exists and is a file; give a folder" in line
    assert no_training == [] and target.read_text() == "mine\n"


def test_benchmark_refuses_earlier_results_unless_overwrite(
    tmp_path: Path, no_training: list, capsys: pytest.CaptureFixture
) -> None:
    """A folder with complete results is refused without --overwrite (11b2942 replaced them
    silently) and a refused run leaves no empty folder behind."""
    data = tmp_path / "data"
    data.mkdir()
    out = tmp_path / "bench"
    args = [*BENCH, "--data", str(data), "--out", str(out), "--quiet"]
    assert run_main(main, args, capsys).code == 0
    assert not (out / PARTIAL_MARKER).exists()
    assert len(list((out / "cells").glob("*.json"))) == 3 and len(no_training) == 3
    line = assert_one_line_error(main, args, capsys, prog=PROG)
    assert "holds earlier results; pass --overwrite" in line and len(no_training) == 3
    assert run_main(main, [*args, "--overwrite"], capsys).code == 0 and len(no_training) == 6
    # --resume on a complete folder: nothing to resume
    assert "nothing to resume" in assert_one_line_error(main, [*args, "--resume"], capsys)
    # a refused run leaves no folder it created
    fresh = tmp_path / "never"
    assert "nothing to resume" in assert_one_line_error(
        main, [*BENCH, "--data", str(data), "--out", str(fresh), "--resume"], capsys
    )
    assert not fresh.exists()


def test_benchmark_ctrl_c_keeps_finished_cells_and_resume_skips_them(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    fake_row: RowFactory,
) -> None:
    """Ctrl-C during the second cell: one line ``rf-matid: interrupted``, exit 130, no
    traceback; the first cell is on disk and the folder stays marked partial; a rerun is refused
    without --resume and with it trains only the two missing cells (11b2942 lost every
    finished cell and had no --resume)."""
    import rf_matid.benchmark as bench

    data = tmp_path / "data"
    data.mkdir()
    out = tmp_path / "bench"
    args = [*BENCH, "--data", str(data), "--out", str(out), "--quiet"]
    calls: list[str] = []

    def interrupted(**task: object):
        calls.append(str(task["split"]))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return fake_row(**task)  # type: ignore[arg-type]

    monkeypatch.setattr(bench, "train_and_test", interrupted)
    run = run_main(main, args, capsys)
    assert run.code == 130
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert lines == ["rf-matid: interrupted"] and "Traceback" not in run.err
    assert (out / PARTIAL_MARKER).is_file()
    assert [p.name for p in (out / "cells").iterdir()] == ["mlp_P1_S1_seed0.json"]
    assert not (out / "benchmark.md").exists()

    assert "pass --resume" in assert_one_line_error(main, args, capsys, prog=PROG)
    # another setting than the interrupted run's is refused, naming it: the wording every
    # resumable command shares (iclr26_common.outputs.check_resume_settings; atomistic sweep's)
    changed = [*BENCH[:-1], "2", "--data", str(data), "--out", str(out), "--resume"]
    assert (
        f"--resume: the interrupted benchmark in {out} ran with --epochs 1, this one with 2; "
        "rerun with its settings, or pass --overwrite"
    ) in assert_one_line_error(main, changed, capsys, prog=PROG)
    assert [p.name for p in (out / "cells").iterdir()] == ["mlp_P1_S1_seed0.json"]

    resumed: list[str] = []
    monkeypatch.setattr(
        bench,
        "train_and_test",
        lambda **task: resumed.append(str(task["split"])) or fake_row(**task),  # type: ignore[arg-type]
    )
    run = run_main(main, [*args, "--resume"], capsys)
    assert run.code == 0, run.err
    assert resumed == ["S2-mod2", "S3-mod1"]
    assert not (out / PARTIAL_MARKER).exists()
    table = json.loads((out / "benchmark.json").read_text())
    assert [row["split"] for row in table] == ["S1", "S2-mod2", "S3-mod1"]


def test_benchmark_shows_progress_unless_quiet(
    tmp_path: Path, no_training: list, capsys: pytest.CaptureFixture
) -> None:
    """Progress over the cells on stderr; --quiet turns it off (11b2942: no progress, and
    --quiet was an unknown option)."""
    data = tmp_path / "data"
    data.mkdir()
    loud = run_main(main, [*BENCH, "--data", str(data), "--out", str(tmp_path / "a")], capsys)
    assert loud.code == 0 and "benchmark cells (1 at a time): 3/3" in loud.err
    args = [*BENCH, "--data", str(data), "--out", str(tmp_path / "b"), "--quiet"]
    quiet = run_main(main, args, capsys)
    assert quiet.code == 0 and quiet.err.strip() == ""


def test_benchmark_says_it_started_before_the_first_cell_finishes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    fake_row: RowFactory,
) -> None:
    """What stderr holds when the first cell starts training: one start line naming the cells
    and how many train at a time (e21a374: nothing until the first cell finished, minutes into a
    real run; the review of issue 36, 19:08 UTC 2026-12-07: two start lines, the package's own
    and common progress's "0/N"); with --quiet, nothing."""
    import rf_matid.benchmark as bench

    seen: list[str] = []

    def first_cell(**task: object):
        seen.append(capsys.readouterr().err)
        return fake_row(**task)  # type: ignore[arg-type]

    monkeypatch.setattr(bench, "train_and_test", first_cell)
    data = tmp_path / "data"
    data.mkdir()
    run = run_main(main, [*BENCH, "--data", str(data), "--out", str(tmp_path / "a")], capsys)
    assert run.code == 0, run.err
    assert seen[0].splitlines() == ["benchmark cells (1 at a time): 0/3"], seen
    seen.clear()
    args = [*BENCH, "--data", str(data), "--out", str(tmp_path / "b"), "--quiet"]
    assert run_main(main, args, capsys).code == 0
    assert seen[0].strip() == "", seen


def test_outputs_are_written_with_mode_0644(
    tmp_path: Path, no_training: list, capsys: pytest.CaptureFixture
) -> None:
    """Under umask 077 the benchmark's files and synth's CSVs are still 0644 (11b2942 wrote
    them with the process umask: 0600 here)."""
    data = tmp_path / "data"
    data.mkdir()
    previous = os.umask(0o077)
    try:
        args = [*BENCH, "--data", str(data), "--out", str(tmp_path / "bench"), "--quiet"]
        assert run_main(main, args, capsys).code == 0
        synth = ["synth", "--out", str(tmp_path / "syn"), "--classes", "glass01"]
        assert run_main(main, [*synth, "--distances", "200", "--angles", "0"], capsys).code == 0
    finally:
        os.umask(previous)
    files = [p for root in ("bench", "syn") for p in (tmp_path / root).rglob("*") if p.is_file()]
    assert any(p.suffix == ".png" for p in files) and any(p.suffix == ".csv" for p in files)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in files}
    assert set(modes.values()) == {0o644}, modes


def test_synth_refuses_an_earlier_dataset_unless_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """synth into a folder with an earlier dataset: one line naming --out and --overwrite;
    --overwrite replaces the dataset (11b2942 had no --overwrite)."""
    out = tmp_path / "d"
    args = ["synth", "--out", str(out), "--distances", "200", "--angles", "0", "--no-time"]
    assert run_main(main, [*args, "--classes", "glass01"], capsys).code == 0
    line = assert_one_line_error(main, [*args, "--classes", "wood02"], capsys, prog=PROG)
    assert f"--out {out}: holds earlier results; pass --overwrite" in line
    run = run_main(main, [*args, "--classes", "wood02", "--overwrite"], capsys)
    assert run.code == 0, run.err
    classes = sorted(p.name.split("-")[-3] for p in (out / "frequency_domain").iterdir())
    assert classes == ["wood02"]


def test_predict_files_checks_its_out_before_loading_the_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """An existing --out is refused before the inputs are read or the checkpoint is loaded
    (11b2942 loaded the checkpoint first: a missing one was reported instead)."""
    out = tmp_path / "preds.csv"
    out.write_text("keep\n")
    args = ["predict-files", "--ckpt", str(tmp_path / "no.ckpt"), "--out", str(out), "x.csv"]
    line = assert_one_line_error(main, args, capsys, prog=PROG)
    assert f"--out {out}: exists; pass --overwrite" in line
    folder = assert_one_line_error(main, [*args[:4], str(tmp_path), "x.csv"], capsys, prog=PROG)
    assert "is a folder; give a file name" in folder


def test_benchmark_numbers_refuse_nan_inf_and_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Every numeric option is a common argparse type: nan, inf and 0 are one line naming it
    (11b2942 let ``--batch-size 0`` reach the trainer; --epochs and --workers were checked by
    hand)."""
    for option in ("--epochs", "--workers", "--batch-size"):
        for value in ("nan", "inf", "0"):
            args = [*BENCH, "--data", str(tmp_path), option, value]
            assert option in assert_one_line_error(main, args, capsys)


def test_tiny_fit_saves_a_checkpoint_that_test_and_predict_follow(
    tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The README's path: ``fit --config tiny`` saves a logger folder and a checkpoint under the
    run's folder; ``test`` and ``predict --ckpt_path <it>`` run from it (11b2942's tiny.yaml
    turned the logger and checkpointing off, so there was nothing to follow)."""
    data = [f"--data.init_args.data_dir={tiny_dataset}", "--trainer.limit_train_batches=2"]
    fit = run_main(
        main,
        ["fit", "--config", "tiny", *data, f"--trainer.default_root_dir={tmp_path / 'fit'}"],
        capsys,
    )
    assert fit.code == 0, fit.err
    (checkpoint,) = (tmp_path / "fit").glob("lightning_logs/version_0/checkpoints/*.ckpt")
    assert checkpoint.name == "epoch=1-step=4.ckpt"
    assert (checkpoint.parents[1] / "config.yaml").is_file()  # the logger's version folder
    assert (checkpoint.parents[1] / "metrics.csv").is_file()
    outputs = {}
    for command in ("test", "predict"):
        root = tmp_path / command
        run = run_main(
            main,
            [
                command,
                "--config",
                "tiny",
                *data,
                "--trainer.limit_test_batches=2",
                "--trainer.limit_predict_batches=2",
                f"--ckpt_path={checkpoint}",
                f"--trainer.default_root_dir={root}",
            ],
            capsys,
        )
        assert run.code == 0, (command, run.err)
        outputs[command] = run.out
    assert "test/acc" in outputs["test"]
    (predictions,) = (tmp_path / "predict").rglob("predictions.csv")
    assert predictions.read_text().startswith("file,predicted,label,prob_brick01")


def test_tiny_configs_usage_names_the_checkpoint_its_fit_saves(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The ``--ckpt_path`` in tiny.yaml's usage comment is the checkpoint its documented
    ``synth`` + ``fit`` lines save: ``epoch={max_epochs - 1}-step={max_epochs x train
    batches}.ckpt`` (34583c8 documented ``epoch=1-step=62.ckpt``; the fit saves
    ``epoch=1-step=60.ckpt``). The synth line runs as documented; the steps are counted from
    the data module the config builds, without training."""
    import re

    import yaml

    from iclr26_common.testing import shipped_configs
    from rf_matid.data import RFMatIDDataModule

    (config,) = [path for path in shipped_configs("rf_matid") if path.stem == "tiny"]
    text = config.read_text()
    usage = " ".join(line.lstrip("# ").rstrip("\\ ") for line in text.splitlines()[1:5])
    synth = re.search(r"rf-matid (synth .*?) rf-matid fit", usage)
    ckpt = re.search(r"--ckpt_path (\S+)", usage)
    assert synth and ckpt, usage
    args = synth.group(1).split()
    out = args[args.index("--out") + 1]
    assert usage.count(f"--data.init_args.data_dir {out}") == 2  # fit and test read synth's out
    args[args.index("--out") + 1] = str(tmp_path / out)
    assert run_main(main, args, capsys).code == 0

    settings = yaml.safe_load(text)
    data = RFMatIDDataModule(**{**settings["data"]["init_args"], "data_dir": tmp_path / out})
    data.setup()
    epochs = settings["trainer"]["max_epochs"]
    steps = epochs * len(data.train_dataloader())
    expected = f"lightning_logs/version_0/checkpoints/epoch={epochs - 1}-step={steps}.ckpt"
    assert ckpt.group(1) == expected


@pytest.mark.parametrize("command", ["fit", "test", "predict"])
def test_a_missing_data_dir_names_the_option(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """``fit --config tiny`` before ``synth`` (the config's default ``rf-matid-data`` does not
    exist) is one line naming the option, and so is a file as the dataset root (34583c8:
    ``rf-matid: error: rf-matid-data: dataset root is not a directory``, no option named)."""
    monkeypatch.chdir(tmp_path)
    line = assert_one_line_error(main, [command, "--config", "tiny"], capsys, prog=PROG)
    assert line == f"{PROG}--data.init_args.data_dir rf-matid-data: no such folder"
    (tmp_path / "data.csv").write_text("freq_hz,real,imag\n")
    args = [command, "--config", "tiny", "--data.data_dir", "data.csv"]
    line = assert_one_line_error(main, args, capsys, prog=PROG)
    assert line == f"{PROG}--data.init_args.data_dir data.csv: is a file; give the dataset folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv"]  # no run folder left


def test_import_is_light_and_exports_the_main_names() -> None:
    """``import rf_matid`` does not import torch, and the README's names come from it
    (11b2942 exported only ``__version__``)."""
    assert_light_package(
        "rf_matid",
        [
            "RFMatIDClassifier",
            "RFMatIDDataModule",
            "generate_dataset",
            "load_dataset",
            "load_predictor",
            "run_benchmark",
            "build_model",
            "make_split",
            "apply_protocol",
        ],
        defined_in={
            "RFMatIDClassifier": "rf_matid.lit_module",
            "load_predictor": "rf_matid.predict",
        },
    )


def test_benchmark_synth_data_is_reused_by_overwrite_and_regenerated_by_resume(
    tmp_path: Path,
    no_training: list,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    """``--synth`` under the folder rule: a rerun needs --overwrite and reuses the complete
    synthetic set; a generation an interrupted run left unfinished is regenerated by --resume
    (11b2942 had neither option and refused the unfinished set for good)."""
    import rf_matid.benchmark_store as bench

    grid = {"distances_mm": [200, 1700], "angles_deg": [0], "samples_per_position": 1}
    monkeypatch.setattr(bench, "MINIATURE_GRID", grid)
    out = tmp_path / "bench"
    args = [*BENCH, "--synth", "--out", str(out), "--quiet"]
    assert run_main(main, args, capsys).code == 0
    assert (out / "data" / bench.SYNTH_MARKER).is_file()
    again = run_main(main, [*args, "--overwrite"], capsys)
    assert again.code == 0 and "reusing the synthetic dataset" in again.out
    # an interrupted generation: no marker, the folder marked partial
    (out / "data" / bench.SYNTH_MARKER).unlink()
    (out / PARTIAL_MARKER).write_text("")
    resumed = run_main(main, [*args, "--resume"], capsys)
    assert resumed.code == 0, resumed.err
    assert "reusing" not in resumed.out and (out / "data" / bench.SYNTH_MARKER).is_file()
