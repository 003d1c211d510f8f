from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from medimg_gfscreen.io import (
    GFScreenFormatError,
    case_name,
    check_case,
    discover_cases,
    load_datalist,
    parse_label_map,
    write_datalist,
)


def _write(path: Path, data: np.ndarray, affine: np.ndarray | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(data, np.diag([1, 1, 3, 1.0]) if affine is None else affine), path)
    return path


def test_case_name_drops_the_channel_suffix() -> None:
    assert case_name(Path("a/liver_3_0000.nii.gz")) == "liver_3"
    assert case_name(Path("liver_3.nii")) == "liver_3"


@pytest.mark.parametrize(
    ("problem", "message"),
    [
        ("not_nifti", "not a NIfTI"),
        ("missing_label", "no label"),
        ("missing_file", "does not exist"),
        ("shape", "shape"),
        ("affine", "affine"),
        ("nan", "NaN"),
    ],
)
def test_check_case_names_the_case(tmp_path: Path, problem: str, message: str) -> None:
    img = np.zeros((8, 8, 4), np.float32)
    lab = np.zeros((8, 8, 4), np.uint8)
    image = _write(tmp_path / "img_0000.nii.gz", img)
    label = _write(tmp_path / "lab.nii.gz", lab)
    item: dict = {"image": str(image), "label": str(label), "name": "case7"}
    if problem == "not_nifti":
        (tmp_path / "img.png").write_bytes(b"x")
        item["image"] = str(tmp_path / "img.png")
    elif problem == "missing_label":
        del item["label"]
    elif problem == "missing_file":
        item["label"] = str(tmp_path / "gone.nii.gz")
    elif problem == "shape":
        item["label"] = str(_write(tmp_path / "lab2.nii.gz", np.zeros((8, 8, 5), np.uint8)))
    elif problem == "affine":
        item["label"] = str(_write(tmp_path / "lab3.nii.gz", lab, np.diag([1, 1, 2.0, 1])))
    elif problem == "nan":
        bad = img.copy()
        bad[1, 1, 1] = np.nan
        item["image"] = str(_write(tmp_path / "nan_0000.nii.gz", bad))
    with pytest.raises(GFScreenFormatError, match=message) as info:
        check_case(item)
    assert "case7" in str(info.value)


def test_check_case_accepts_a_good_case(tmp_path: Path) -> None:
    image = _write(tmp_path / "i.nii.gz", np.zeros((4, 4, 4), np.int16))
    label = _write(tmp_path / "l.nii.gz", np.zeros((4, 4, 4), np.uint8))
    check_case({"image": str(image), "label": str(label)})


def test_parse_label_map() -> None:
    assert parse_label_map(None) == {1: 1}
    assert parse_label_map("1:0,2:1") == {1: 0, 2: 1}
    assert parse_label_map({0: 0, 2: 1}) == {2: 1}
    with pytest.raises(GFScreenFormatError):
        parse_label_map("2:3")
    with pytest.raises(GFScreenFormatError):
        parse_label_map("a:b")


def test_discover_flare_folder_and_unpaired_images(tmp_path: Path) -> None:
    for case in ("FLARE_001", "FLARE_002"):
        _write(tmp_path / "imagesTr" / f"{case}_0000.nii.gz", np.zeros((4, 4, 4), np.int16))
        _write(tmp_path / "labelsTr" / f"{case}.nii.gz", np.zeros((4, 4, 4), np.uint8))
    cases = discover_cases(tmp_path)
    assert [c["name"] for c in cases] == ["FLARE_001", "FLARE_002"]
    _write(tmp_path / "imagesTr" / "FLARE_003_0000.nii.gz", np.zeros((4, 4, 4), np.int16))
    with pytest.raises(GFScreenFormatError, match="FLARE_003"):
        discover_cases(tmp_path)


def test_discover_msd_dataset_json(tmp_path: Path) -> None:
    _write(tmp_path / "imagesTr" / "liver_0.nii.gz", np.zeros((4, 4, 4), np.int16))
    _write(tmp_path / "labelsTr" / "liver_0.nii.gz", np.zeros((4, 4, 4), np.uint8))
    meta = {
        "training": [{"image": "./imagesTr/liver_0.nii.gz", "label": "./labelsTr/liver_0.nii.gz"}]
    }
    (tmp_path / "dataset.json").write_text(json.dumps(meta))
    cases = discover_cases(tmp_path)
    assert cases[0]["name"] == "liver_0" and cases[0]["image"].endswith("liver_0.nii.gz")


def test_write_datalist_folds_partition_the_cases(tmp_path: Path) -> None:
    cases = [{"image": f"/x/{i}_0000.nii.gz", "label": f"/y/{i}.nii.gz", "name": str(i)}
             for i in range(10)]  # fmt: skip
    seen = set()
    for fold in range(5):
        out = write_datalist(cases, tmp_path / f"f{fold}.json", folds=5, fold=fold, seed=1)
        payload = json.loads(out.read_text())
        assert len(payload["validation"]) == 2 and len(payload["training"]) == 8
        names = {e["name"] for e in payload["validation"]}
        assert not names & seen
        seen |= names
    assert len(seen) == 10
    with pytest.raises(FileExistsError):
        write_datalist(cases, tmp_path / "f0.json")


def test_load_datalist_resolves_paths_and_errors(synth_dir: Path, tmp_path: Path) -> None:
    items = load_datalist(synth_dir / "datalist.json")
    assert all(Path(i["image"]).is_file() and Path(i["label"]).is_file() for i in items)
    assert all(i["name"].startswith("synth_") for i in items)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"training": [{"label": "x.nii.gz"}]}))
    with pytest.raises(GFScreenFormatError, match=r"training\[0\]"):
        load_datalist(bad)
    with pytest.raises(GFScreenFormatError, match="no 'validation'"):
        load_datalist(bad, "validation")
