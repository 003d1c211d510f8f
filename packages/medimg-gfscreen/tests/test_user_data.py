"""What a user's own CTs need (issues 37 and 38), through ``main([...])`` in-process: ``screen``
writes a table of its tiles and prints a summary (not a line per tile), ``predict`` prints each
case and writes a table that an interrupted run keeps and ``--resume`` continues (masks through
temporary names), ``test`` writes its per-case metrics, and the help prints ``%`` as written.
Each test fails on d9942d3 (its docstring says how)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from iclr26_common.outputs import PARTIAL_MARKER
from iclr26_common.testing import assert_one_line_error, run_main
from medimg_gfscreen.cli import main

PROG = "medimg-gfscreen: error: "


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture
def images(synth_dir: Path, tmp_path: Path) -> Path:
    """Two CTs of the synthetic set in a folder of their own (sorted: a_..., b_...)."""
    folder = tmp_path / "images"
    folder.mkdir()
    sources = sorted((synth_dir / "imagesTr").glob("*_0000.nii.gz"))[:2]
    for prefix, source in zip(("a", "b"), sources, strict=True):
        (folder / f"{prefix}_{source.name}").write_bytes(source.read_bytes())
    return folder


def test_screen_writes_a_tile_table_and_prints_a_summary(
    synth_dir: Path, tiny_weights: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """On d9942d3 `screen` printed one line per tile (150 for a 128x128x48 CT) and wrote no
    table."""
    image = sorted((synth_dir / "imagesTr").glob("*_0000.nii.gz"))[0]
    out = tmp_path / "ct.nii.gz"
    run = run_main(
        main, ["screen", str(image), "--ckpt", str(tiny_weights), "--out", str(out)], capsys
    )
    assert run.code == 0, run.err
    table = tmp_path / "ct.tiles.csv"
    rows = _rows(table)
    with table.open(newline="") as handle:
        header = next(csv.reader(handle))
    assert header == [
        "case",
        "tile",
        "voxel_i",
        "voxel_j",
        "voxel_k",
        "world_x_mm",
        "world_y_mm",
        "world_z_mm",
        "glance_p",
        "selected",
        "tile_lesion_voxels",
    ]
    case = image.name.replace("_0000.nii.gz", "")
    assert {r["case"] for r in rows} == {case}
    assert [int(r["tile"]) for r in rows] == list(range(len(rows))) and len(rows) > 4
    assert all(r["selected"] == "1" for r in rows)  # the tiny weights' gate: threshold 0
    assert all(0 <= float(r["glance_p"]) <= 1 and int(r["tile_lesion_voxels"]) >= 0 for r in rows)
    affine = nib.load(image).affine  # the world position is the voxel index through the affine
    for r in rows:
        voxel = np.array([float(r[f"voxel_{a}"]) for a in "ijk"] + [1.0])
        world = [float(r[f"world_{a}_mm"]) for a in "xyz"]
        np.testing.assert_allclose((affine @ voxel)[:3], world, atol=0.2)
    # a summary, not a line per tile
    lines = [line for line in run.out.splitlines() if line.strip()]
    assert len(lines) <= 3 and not any(line.startswith("tile voxel") for line in lines)
    summary = lines[-1]
    assert summary.startswith(f"{case}: selected {len(rows)}/{len(rows)} tiles")
    assert "selection rate 100.0 %" in summary and "lesion voxels" in summary
    mask_voxels = int(np.asarray(nib.load(out).dataobj).sum())
    assert f"{mask_voxels} lesion voxels" in summary and str(table) in summary
    # the table is an output like --out: an existing one is refused before any work
    args = ["screen", str(image), "--ckpt", str(tiny_weights), "--out", str(tmp_path / "b.nii.gz")]
    line = assert_one_line_error(main, [*args, "--table", str(table)], capsys, prog=PROG)
    assert f"--table {table}: exists; pass --overwrite" in line
    assert not (tmp_path / "b.nii.gz").exists()


def test_predict_prints_each_case_and_keeps_a_table_that_resume_continues(
    predict_args, images: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """On d9942d3 `predict` printed nothing per case and wrote no table (masks only), so an
    interrupted run's finished cases had no record beside their masks."""
    first, second = sorted(images.iterdir())
    intact = second.read_bytes()
    second.write_bytes(intact[: len(intact) // 2])  # a truncated .nii.gz, the second case
    masks = tmp_path / "masks"
    run = run_main(
        main,
        predict_args(images, masks, tmp_path / "run", "--model.init_args.inference.threshold=-1"),
        capsys,
    )
    assert run.code == 2 and str(second) in run.err and "Traceback" not in run.err
    a_mask = masks / first.name.replace("_0000", "")
    b_mask = masks / second.name.replace("_0000", "")
    # the finished case: its mask moved in place whole, its row written; nothing of the other
    assert sorted(p.name for p in masks.iterdir()) == [PARTIAL_MARKER, a_mask.name, "cases.csv"]
    (row,) = _rows(masks / "cases.csv")
    a_case = a_mask.name.replace(".nii.gz", "")
    assert row["case"] == a_case and row["mask"] == a_mask.name
    assert Path(row["image"]).name == first.name
    a_voxels = int(np.asarray(nib.load(a_mask).dataobj).sum())
    assert int(row["lesion_voxels"]) == a_voxels
    assert row["selection_rate"] == "1.0000" and row["n_selected"] == row["n_tiles"] != "0"
    assert f"{a_case}: {a_voxels} lesion voxels, selection rate 100.0 %" in run.out

    second.write_bytes(intact)
    run = run_main(
        main,
        predict_args(
            images, masks, tmp_path / "run", "--model.init_args.inference.threshold=-1", "--resume"
        ),
        capsys,
    )
    assert run.code == 0, run.err[-3000:]
    rows = _rows(masks / "cases.csv")
    assert [r["case"] for r in rows] == [a_case, b_mask.name.replace(".nii.gz", "")]
    assert rows[0] == row  # kept from the interrupted run, not screened again
    b_voxels = int(np.asarray(nib.load(b_mask).dataobj).sum())
    assert int(rows[1]["lesion_voxels"]) == b_voxels
    assert f"{rows[1]['case']}: {b_voxels} lesion voxels" in run.out
    assert f"{a_case}:" not in run.out
    assert f"wrote {masks / 'cases.csv'} (2 cases)" in run.out
    assert sorted(p.name for p in masks.iterdir()) == [a_mask.name, b_mask.name, "cases.csv"]


def test_test_writes_per_case_metrics(
    synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """On d9942d3 `test` logged the means over cases only (test/dsc, ...): no per-case
    table."""
    runs = tmp_path / "runs"
    args = ["test", "--config", "tiny", f"--data.init_args.datalist={synth_dir / 'datalist.json'}"]
    args += [f"--trainer.default_root_dir={runs}", "--trainer.enable_progress_bar=false"]
    for version in (0, 1):  # a second run writes its own file, never over the first
        run = run_main(main, args, capsys)
        assert run.code == 0, run.err[-3000:]
        path = runs / "lightning_logs" / f"version_{version}" / "test_cases.csv"
        assert f"wrote {path} (2 cases)" in run.out
    rows = _rows(path)
    cases = json.loads((synth_dir / "datalist.json").read_text())["validation"]
    assert [r["case"] for r in rows] == [
        Path(c["label"]).name.replace(".nii.gz", "") for c in cases
    ]
    assert list(rows[0]) == [
        "case",
        "dsc",
        "nsd",
        "lesions",
        "detected",
        "pred_voxels",
        "healthy",
        "selection_rate",
        "sw_dsc",
        "sw_detected",
    ]
    for r in rows:
        assert 0 <= float(r["dsc"]) <= 1 and 0 <= float(r["selection_rate"]) <= 1
        assert int(r["detected"]) <= int(r["lesions"]) and r["healthy"] == str(
            int(r["lesions"] == "0")
        )


def test_a_mask_whose_write_fails_leaves_the_earlier_file_and_no_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``save_mask`` writes a temporary name and moves it in place: a write that dies half-way
    (a full disk, Ctrl-C inside the NIfTI writer) leaves the mask that was there before, whole,
    and no temporary file; a write that succeeds replaces it with mode 0644."""
    import monai.transforms
    import torch
    from monai.data import MetaTensor

    from medimg_gfscreen.screen import save_mask

    path = tmp_path / "case.nii.gz"
    mask = MetaTensor(torch.ones(1, 4, 4, 2), affine=torch.eye(4))
    save_mask(mask, path)
    before = path.read_bytes()
    assert np.asarray(nib.load(path).dataobj).sum() == 32
    real = monai.transforms.SaveImage

    class DiesHalfWay(real):  # type: ignore[misc, valid-type]
        def __call__(self, img, *args, **kwargs):  # type: ignore[no-untyped-def]
            super().__call__(img, *args, **kwargs)
            written = sorted(p for p in tmp_path.iterdir() if p.name.startswith(".case."))
            assert len(written) == 1  # the temporary name, beside the mask
            written[0].write_bytes(written[0].read_bytes()[:20])
            raise OSError("No space left on device")

    monkeypatch.setattr(monai.transforms, "SaveImage", DiesHalfWay)
    with pytest.raises(OSError, match="No space"):
        save_mask(MetaTensor(torch.zeros(1, 4, 4, 2), affine=torch.eye(4)), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case.nii.gz"]
    assert path.read_bytes() == before
    monkeypatch.setattr(monai.transforms, "SaveImage", real)
    save_mask(MetaTensor(torch.zeros(1, 4, 4, 2), affine=torch.eye(4)), path)
    assert np.asarray(nib.load(path).dataobj).sum() == 0
    assert path.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("command", ["synth", "screen", "datalist", "export"])
def test_help_prints_percent_signs_as_written(command: str, capsys: pytest.CaptureFixture) -> None:
    """On d9942d3 `synth --help` showed `~30%% healthy` (a doubled sign in a description,
    which argparse prints as written)."""
    run = run_main(main, [command, "--help"], capsys)
    assert run.code == 0 and "%%" not in run.out
    if command == "synth":
        assert "~30% healthy" in run.out
