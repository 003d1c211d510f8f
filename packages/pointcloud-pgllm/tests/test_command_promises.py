"""The promises every pointcloud-pgllm command keeps (issue 36): outputs checked before any
work (one line naming the option), earlier results kept unless ``--overwrite``, Ctrl-C as one
line and exit 130 with no half-written folder, progress with ``--quiet``, finite numbers, a
checkpoint from ``fit --config tiny`` that ``test``/``predict --ckpt_path`` and ``--encoder``
follow, files written with mode 0644, and the package's main names importable from
``pointcloud_pgllm``.

All of them fail on 11b2942 (before issue 36 moved the commands onto ``iclr26_common.outputs``
/ ``progress``), as each docstring says.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from iclr26_common.outputs import PARTIAL_MARKER
from iclr26_common.testing import assert_light_package, assert_one_line_error, run_main
from pointcloud_pgllm.cli import main

PROG = "pointcloud-pgllm: error: "
# --graph-k 2: below the 3 test clouds per class of small_tree (4 would warn, issue 39)
SMALL = ["--n-points", "128", "--graph-k", "2"]


def test_classify_checks_its_out_before_reading_data(
    small_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A file as --out is refused before the data is read (11b2942 read, captioned and encoded
    every cloud first and failed on the first write)."""
    import pointcloud_pgllm.io as io

    monkeypatch.setattr(io, "load_dataset", lambda *a, **k: pytest.fail("data read first"))
    target = tmp_path / "outfile.txt"
    target.write_text("mine\n")
    for command in ("classify", "embed"):
        args = [command, "--data", str(small_tree), "--out", str(target)]
        line = assert_one_line_error(main, args, capsys, prog=PROG)
        assert f"--out {target}: exists and is a file; give a folder" in line
    caption = ["caption", "--data", str(small_tree), "--out", str(tmp_path)]
    assert "is a folder; give a file name" in assert_one_line_error(main, caption, capsys)
    assert target.read_text() == "mine\n"


def test_classify_refuses_earlier_results_unless_overwrite(
    small_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A folder with earlier results (any file) is refused without --overwrite (11b2942 wrote
    next to foreign files and refused only a same-named file); --overwrite replaces the other
    mode's CSV too."""
    out = tmp_path / "run"
    ood = ["ood", "--data", str(small_tree), *SMALL, "--id-classes", "chair,cup", "--quiet"]
    assert run_main(main, [*ood, "--out", str(out)], capsys).code == 0
    cls = ["classify", "--data", str(small_tree), *SMALL, "--out", str(out), "--quiet"]
    line = assert_one_line_error(main, cls, capsys, prog=PROG)
    assert f"--out {out}: holds earlier results; pass --overwrite" in line
    assert run_main(main, [*cls, "--overwrite"], capsys).code == 0
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "predictions.csv"]


def test_ctrl_c_is_one_line_and_leaves_no_half_written_folder(
    small_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Ctrl-C while encoding: one line ``pointcloud-pgllm: interrupted``, exit 130, no
    traceback; the folder it created is gone, and an empty folder the user made is left
    without a partial marker, so the rerun runs (11b2942: a KeyboardInterrupt traceback)."""
    import pointcloud_pgllm.api as api

    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "encode_clouds", interrupted)
    made = tmp_path / "made"
    made.mkdir()
    for out in (tmp_path / "new", made):
        args = ["classify", "--data", str(small_tree), *SMALL, "--out", str(out), "--quiet"]
        run = run_main(main, args, capsys)
        assert run.code == 130
        lines = [line for line in run.err.splitlines() if line.strip()]
        assert lines == ["pointcloud-pgllm: interrupted"] and "Traceback" not in run.err
    assert not (tmp_path / "new").exists()
    assert list(made.iterdir()) == []
    monkeypatch.undo()
    args = ["classify", "--data", str(small_tree), *SMALL, "--out", str(made), "--quiet"]
    assert run_main(main, args, capsys).code == 0


def test_an_interrupted_synth_is_marked_partial_and_overwrite_restarts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Ctrl-C after the first mesh of synth: exit 130, one line, the folder marked partial (it
    holds an incomplete tree that must not look like a dataset); the rerun is refused until
    --overwrite, which regenerates it (11b2942: a traceback, no marker, no --overwrite)."""
    import pointcloud_pgllm.synth as synth

    real = synth.write_off
    calls: list[Path] = []

    def interrupted(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(Path(path))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(path, *args, **kwargs)

    monkeypatch.setattr(synth, "write_off", interrupted)
    out = tmp_path / "shapes"
    args = ["synth", "--out", str(out), "--classes", "chair,cup", "--n-train", "2", "--n-test", "1"]
    run = run_main(main, args, capsys)
    assert run.code == 130 and run.err.strip() == "pointcloud-pgllm: interrupted"
    assert (out / PARTIAL_MARKER).is_file()
    monkeypatch.setattr(synth, "write_off", real)
    line = assert_one_line_error(main, args, capsys, prog=PROG)  # synth has no --resume
    assert line.endswith("partial results of an interrupted run; pass --overwrite to start again")
    assert run_main(main, [*args, "--overwrite"], capsys).code == 0
    assert not (out / PARTIAL_MARKER).exists()
    assert len(list(out.rglob("*.off"))) == 6
    (out / "notes.txt").write_text("mine\n")
    line = assert_one_line_error(main, [*args, "--overwrite"], capsys, prog=PROG)
    assert "notes.txt, which synth did not write" in line


def test_long_stages_show_progress_unless_quiet(
    small_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Reading, captioning and encoding report progress on stderr; --quiet turns it off
    (11b2942: no progress, and --quiet was an unknown option)."""
    args = ["classify", "--data", str(small_tree), *SMALL]
    loud = run_main(main, [*args, "--out", str(tmp_path / "a")], capsys)
    assert loud.code == 0, loud.err
    for stage in ("reading test clouds: 18/18", "captioning: 18/18", "encoding: 2/2"):
        assert stage in loud.err, loud.err
    quiet = run_main(main, [*args, "--out", str(tmp_path / "b"), "--quiet"], capsys)
    assert quiet.code == 0 and quiet.err.strip() == ""


def test_numbers_must_be_finite_and_in_range(
    small_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """nan/inf and out-of-range counts are the subcommand's one usage line naming the option,
    before any work (11b2942: ``--glued-fraction nan`` wrote a dataset, and ``--alpha nan``
    got past argparse to the pipeline's own check)."""
    data = ["--data", str(small_tree)]
    for args in (
        ["classify", *data, "--alpha", "nan"],
        ["classify", *data, "--alpha", "inf"],
        ["classify", *data, "--n-points", "inf"],
        ["classify", *data, "--graph-k", "0"],
        ["classify", *data, "--steps", "-1"],
        ["synth", "--glued-fraction", "nan"],
        ["synth", "--n-train", "-1"],
    ):
        run = run_main(main, [*args, "--out", str(tmp_path / "o")], capsys)
        lines = [line for line in run.err.splitlines() if line.strip()]
        assert run.code == 2 and len(lines) == 1, (args, run.err)
        assert lines[0].startswith(f"pointcloud-pgllm {args[0]}: error:"), lines
        assert args[-2] in lines[0] and not (tmp_path / "o").exists(), lines


def test_outputs_are_written_with_mode_0644(
    small_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Under umask 077 every command's files are 0644 (11b2942: 0600)."""
    previous = os.umask(0o077)
    try:
        for args in (
            ["classify", "--data", str(small_tree), *SMALL, "--out", str(tmp_path / "cls")],
            ["embed", "--data", str(small_tree), "--n-points", "128", "--out", str(tmp_path / "e")],
            ["caption", "--data", str(small_tree), "--out", str(tmp_path / "c.csv")],
            ["synth", "--out", str(tmp_path / "s"), "--classes", "cup", "--n-test", "1"],
        ):
            assert (
                run_main(main, [*args, "--quiet"] if args[0] != "synth" else args, capsys).code == 0
            )
    finally:
        os.umask(previous)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {p.suffix for p in files} >= {".csv", ".json", ".npy", ".off"}
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in files}
    assert set(modes.values()) == {0o644}, modes


def test_tiny_fit_saves_a_checkpoint_that_test_predict_and_embed_follow(
    small_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The README's path: ``fit --config tiny`` saves a logger folder and a checkpoint;
    ``test``/``predict --ckpt_path`` and ``embed --encoder`` run from it (11b2942's tiny.yaml
    turned the logger and checkpointing off)."""
    fit = run_main(
        main, ["fit", "--config", "tiny", f"--trainer.default_root_dir={tmp_path / 'fit'}"], capsys
    )
    assert fit.code == 0, fit.err
    version = tmp_path / "fit" / "lightning_logs" / "version_0"
    (checkpoint,) = (version / "checkpoints").glob("*.ckpt")
    assert checkpoint.name == "epoch=0-step=4.ckpt"
    assert (version / "config.yaml").is_file() and (version / "metrics.csv").is_file()
    for command in ("test", "predict"):
        root = f"--trainer.default_root_dir={tmp_path / command}"
        run = run_main(
            main, [command, "--config", "tiny", f"--ckpt_path={checkpoint}", root], capsys
        )
        assert run.code == 0, (command, run.err)
    embed = [
        "embed",
        "--data",
        str(small_tree),
        "--n-points",
        "128",
        "--encoder",
        str(checkpoint),
        "--out",
        str(tmp_path / "feats"),
        "--quiet",
    ]
    assert run_main(main, embed, capsys).code == 0
    import numpy as np

    assert np.load(tmp_path / "feats" / "features.npy").shape == (18, 32)


def test_import_is_light_and_exports_the_main_names() -> None:
    """``import pointcloud_pgllm`` does not import torch, and the main names come from it
    (11b2942 exported only ``__version__``)."""
    assert_light_package(
        "pointcloud_pgllm",
        [
            "classify",
            "detect_ood",
            "PipelineOptions",
            "write_results",
            "load_dataset",
            "generate_dataset",
            "PointNN",
            "GeometricCaptioner",
            "TfidfScorer",
            "pgllm_scores",
        ],
        defined_in={"classify": "pointcloud_pgllm.api"},
    )
