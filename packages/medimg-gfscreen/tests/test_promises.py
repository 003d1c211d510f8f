"""The promises every command keeps (issue 36), through ``main([...])`` in-process: outputs
checked before any work, a truncated ``.nii.gz`` as one line naming it in ``screen`` and
``predict`` with the interrupted prediction folder continued by ``--resume``, Ctrl-C as one line
(exit 130) with the finished masks kept, a checkpoint ``fit --config tiny`` leaves for
``test``/``predict``/``export``, ``--device`` and finite numbers, 0644 files, and the package's
own exports. Each test names what it did on 11b2942 (before the commands moved onto
:mod:`iclr26_common.outputs`)."""

from __future__ import annotations

import os
from pathlib import Path

import nibabel as nib
import pytest
import yaml

import medimg_gfscreen
import medimg_gfscreen.screen
from iclr26_common.outputs import PARTIAL_MARKER
from iclr26_common.testing import (
    assert_light_package,
    assert_one_line_error,
    nonblank_lines,
    run_main,
    shipped_configs,
)
from medimg_gfscreen.cli import main

PROG = "medimg-gfscreen: error: "


def _truncate(path: Path) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


@pytest.fixture
def images(synth_dir: Path, tmp_path: Path) -> Path:
    """Two CTs of the synthetic set in a folder of their own (sorted: a_..., b_...)."""
    folder = tmp_path / "images"
    folder.mkdir()
    sources = sorted((synth_dir / "imagesTr").glob("*_0000.nii.gz"))[:2]
    for prefix, source in zip(("a", "b"), sources, strict=True):
        (folder / f"{prefix}_{source.name}").write_bytes(source.read_bytes())
    return folder


def test_outputs_are_checked_before_anything_is_read(
    predict_args, tmp_path: Path, synth_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    """On 11b2942 `datalist` read the data folder before it looked at --out (a missing folder
    was the error), `synth` into a folder of earlier results said "not empty" with no way to
    write into it, and `predict` into an output_dir holding other results started."""
    a_file = tmp_path / "a_file.json"
    a_file.write_text("{}\n")
    missing = tmp_path / "nothing_here"
    line = assert_one_line_error(
        main, ["datalist", str(missing), "--out", str(a_file)], capsys, prog=PROG
    )
    assert f"--out {a_file}: exists; pass --overwrite to replace it" in line
    line = assert_one_line_error(
        main,
        ["screen", str(missing / "ct.nii.gz"), "--ckpt", "x.pt", "--out", str(tmp_path)],
        capsys,
        prog=PROG,
    )
    assert f"--out {tmp_path}: is a folder; give a file name" in line
    line = assert_one_line_error(
        main, ["export", "--ckpt", str(missing / "x.ckpt"), "--out", str(a_file)], capsys, prog=PROG
    )
    assert f"--out {a_file}: exists; pass --overwrite" in line
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "old.txt").write_text("old\n")
    line = assert_one_line_error(main, ["synth", "--out", str(taken)], capsys, prog=PROG)
    assert f"--out {taken}: holds earlier results; pass --overwrite" in line
    args = ["synth", "--out", str(taken), "--n", "2", "--shape", "32,32,16", "--overwrite"]
    assert run_main(main, args, capsys).code == 0
    assert (taken / "datalist.json").is_file() and not (taken / PARTIAL_MARKER).exists()
    # predict: an output_dir holding earlier results, before any image or model is read
    line = assert_one_line_error(
        main, predict_args(missing, taken, tmp_path / "run"), capsys, prog=PROG
    )
    assert f"--data.init_args.output_dir {taken}: holds earlier results" in line
    assert not missing.exists() and not (tmp_path / "run").exists()


def test_screen_on_a_truncated_image_is_one_line_naming_it(
    tmp_path: Path, images: Path, tiny_weights: Path, capsys: pytest.CaptureFixture
) -> None:
    """On 11b2942 a truncated .nii.gz gave a ~100-line traceback (EOFError through MONAI)."""
    broken = _truncate(sorted(images.iterdir())[0])
    out = tmp_path / "mask.nii.gz"
    args = ["screen", str(broken), "--ckpt", str(tiny_weights), "--out", str(out), "--quiet"]
    line = assert_one_line_error(main, args, capsys, prog=PROG)
    assert str(broken) in line and "cannot be read" in line and "EOFError" in line
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["images"]


def test_predict_on_a_truncated_image_keeps_the_finished_masks_and_resumes(
    predict_args, tmp_path: Path, images: Path, capsys: pytest.CaptureFixture
) -> None:
    """On 11b2942 `predict` on a folder with a truncated .nii.gz ended in a 99-line traceback
    after writing the masks before it, and the rerun was refused because those masks existed.
    Now: one error line naming the file, the folder marked partial with the finished mask, and
    `--resume` (after the file is replaced) screens only the rest."""
    _, bad = sorted(images.iterdir())
    intact = bad.read_bytes()
    _truncate(bad)
    masks = tmp_path / "masks"
    run = run_main(main, predict_args(images, masks, tmp_path / "run"), capsys)
    assert run.code == 2 and "Traceback" not in run.err
    errors = [line for line in nonblank_lines(run.err) if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith(PROG), run.err
    assert str(bad) in errors[0] and "cannot be read" in errors[0]
    first = masks / "a_synth_000.nii.gz"
    assert sorted(p.name for p in masks.iterdir()) == [PARTIAL_MARKER, first.name, "cases.csv"]
    before = first.stat().st_mtime_ns

    line = assert_one_line_error(
        main, predict_args(images, masks, tmp_path / "run"), capsys, prog=PROG, drop_earlier=True
    )
    assert "partial results of an interrupted run; pass --resume" in line

    bad.write_bytes(intact)
    run = run_main(main, predict_args(images, masks, tmp_path / "run", "--resume"), capsys)
    assert run.code == 0, run.err[-3000:]
    names = sorted(p.name for p in masks.glob("*.nii.gz"))
    assert names == [first.name, bad.name.replace("_0000", "")]
    assert first.stat().st_mtime_ns == before  # kept, not screened again
    mask = nib.load(masks / names[1])
    assert mask.shape == nib.load(bad).shape


def test_predict_ctrl_c_is_one_line_and_keeps_the_finished_masks(
    predict_args,
    tmp_path: Path,
    images: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    """On 11b2942 Ctrl-C in `predict` ended with exit 1 (Lightning's graceful shutdown) and a
    folder of masks that looked complete; now `medimg-gfscreen: interrupted`, exit 130, the
    folder marked partial with the masks written before."""
    real = medimg_gfscreen.screen.save_mask
    calls: list[Path] = []

    def interrupted(mask, path):  # type: ignore[no-untyped-def]
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(mask, path)

    monkeypatch.setattr(medimg_gfscreen.screen, "save_mask", interrupted)
    masks = tmp_path / "masks"
    run = run_main(main, predict_args(images, masks, tmp_path / "run"), capsys)
    assert run.code == 130 and "Traceback" not in run.err
    assert nonblank_lines(run.err)[-1] == "medimg-gfscreen: interrupted"
    names = sorted(p.name for p in masks.iterdir())
    assert names == [PARTIAL_MARKER, "a_synth_000.nii.gz", "cases.csv"]


def test_screen_ctrl_c_is_one_line_and_leaves_no_mask(
    tmp_path: Path,
    images: Path,
    tiny_weights: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    """On 11b2942 Ctrl-C in `screen` was a KeyboardInterrupt traceback (common had no Ctrl-C
    line yet); the package must not catch it, and no half-written mask may stay."""
    import medimg_gfscreen.inference

    def interrupted(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(medimg_gfscreen.inference, "glance_focus_inference", interrupted)
    out = tmp_path / "mask.nii.gz"
    image = sorted(images.iterdir())[0]
    run = run_main(
        main, ["screen", str(image), "--ckpt", str(tiny_weights), "--out", str(out)], capsys
    )
    assert run.code == 130 and nonblank_lines(run.err) == ["medimg-gfscreen: interrupted"]
    assert not out.exists()


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--threshold", "nan", "(finite)"),
        ("--overlap", "inf", "(finite)"),
        ("--device", "gpu0", "--device gpu0: not a device"),
        ("--device", "cuda:7", "--device cuda:7: PyTorch sees"),
    ],
)
def test_numbers_are_finite_and_devices_are_checked(
    tmp_path: Path, images: Path, tiny_weights: Path, capsys, option, value, expected
) -> None:
    """On 11b2942 `--threshold nan` screened with a NaN gate and `--device gpu0` reached torch
    (a RuntimeError traceback)."""
    image = sorted(images.iterdir())[0]
    out = tmp_path / "mask.nii.gz"
    args = ["screen", str(image), "--ckpt", str(tiny_weights), "--out", str(out), option, value]
    line = assert_one_line_error(main, args, capsys, prog="medimg-gfscreen")
    assert expected in line and not out.exists()


def test_tiny_fit_leaves_a_checkpoint_that_test_predict_and_export_follow(
    predict_args, tmp_path: Path, synth_dir: Path, images: Path, capsys: pytest.CaptureFixture
) -> None:
    """On 11b2942 tiny.yaml set `logger: false`, `enable_checkpointing: false` and no progress
    bar: `fit --config tiny` saved no checkpoint to follow. Now the one it leaves in the run's
    folder is what `test`/`predict --ckpt_path` and `export --ckpt` take; files are 0644."""
    (tiny,) = [p for p in shipped_configs("medimg_gfscreen") if p.stem == "tiny"]
    trainer = yaml.safe_load(tiny.read_text())["trainer"]
    for key in ("enable_progress_bar", "enable_checkpointing", "logger"):
        assert trainer.get(key, True) is not False, key
    runs = tmp_path / "runs"
    common = ["--config", "tiny", f"--data.init_args.datalist={synth_dir / 'datalist.json'}"]
    fit = ["fit", *common, f"--trainer.default_root_dir={runs}", "--trainer.limit_train_batches=1"]
    run = run_main(main, [*fit, "--trainer.limit_val_batches=1"], capsys)
    assert run.code == 0, run.err[-3000:]
    (ckpt,) = sorted(runs.rglob("*.ckpt"))
    assert ckpt.parent.name == "checkpoints" and (ckpt.parent.parent / "config.yaml").is_file()
    test = ["test", *common, f"--trainer.default_root_dir={runs}", "--trainer.limit_test_batches=1"]
    run = run_main(main, [*test, f"--ckpt_path={ckpt}"], capsys)
    assert run.code == 0 and "test/sw_dsc" in run.out, run.err[-3000:]
    masks = tmp_path / "masks"
    old = os.umask(0o077)
    try:
        run = run_main(main, [*predict_args(images, masks, runs), f"--ckpt_path={ckpt}"], capsys)
        assert run.code == 0, run.err[-3000:]
        exported = tmp_path / "gfscreen.pt"
        args = ["export", "--ckpt", str(ckpt), "--out", str(exported)]
        assert run_main(main, args, capsys).code == 0
    finally:
        os.umask(old)
    written = [*masks.iterdir(), exported]
    assert len(written) == 4 and not (masks / PARTIAL_MARKER).exists()  # 2 masks, cases.csv
    for path in written:
        assert path.stat().st_mode & 0o777 == 0o644, path


def test_the_package_exports_its_api_and_imports_cheaply() -> None:
    """On 11b2942 `medimg_gfscreen` exported only `__version__`; the exports load on first use,
    so the import itself needs no torch."""
    assert_light_package(
        "medimg_gfscreen",
        ["GFScreenModule", "load_screen_module", "FocusSettings"],
        defined_in={
            "screen_file": "medimg_gfscreen.screen",
            "generate_dataset": "medimg_gfscreen.synth",
        },
    )
