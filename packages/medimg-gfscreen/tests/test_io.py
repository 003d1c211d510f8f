from __future__ import annotations

import gzip
import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from iclr26_common.outputs import OutputError
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
        ("missing_file", "no such label file"),
        ("shape", "shape"),
        ("affine", "affine"),
        ("four_channels", "expected a 3-D volume"),
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
    elif problem == "four_channels":
        item["image"] = str(_write(tmp_path / "multi_0000.nii.gz", np.zeros((8, 8, 4, 2))))
    with pytest.raises(GFScreenFormatError, match=message) as info:
        check_case(item)
    assert "case7" in str(info.value)


def test_check_case_accepts_a_good_case(tmp_path: Path) -> None:
    image = _write(tmp_path / "i.nii.gz", np.zeros((4, 4, 4), np.int16))
    label = _write(tmp_path / "l.nii.gz", np.zeros((4, 4, 4), np.uint8))
    check_case({"image": str(image), "label": str(label)})


def test_check_case_accepts_a_trailing_singleton_axis(tmp_path: Path) -> None:
    """(X, Y, Z, 1) is a volume MONAI loads (EnsureChannelFirstd); it was refused before."""
    image = _write(tmp_path / "i_0000.nii.gz", np.zeros((6, 5, 4, 1), np.int16))
    label = _write(tmp_path / "l.nii.gz", np.zeros((6, 5, 4), np.uint8))
    check_case({"image": str(image), "label": str(label)})


def test_check_case_reads_headers_only(tmp_path: Path) -> None:
    """The voxel data are not decompressed: a file whose compressed data are cut off after the
    header passes (it decompressed every volume at each start before)."""
    image = _write(tmp_path / "i_0000.nii.gz", np.random.default_rng(0).normal(size=(64, 64, 32)))
    label = _write(tmp_path / "l.nii.gz", np.zeros((64, 64, 32), np.uint8))
    raw = gzip.decompress(image.read_bytes())
    image.write_bytes(gzip.compress(raw[: len(raw) // 10]))  # header intact, data truncated
    with pytest.raises((OSError, EOFError, ValueError)):
        np.asarray(nib.load(image).dataobj)  # the data really are unreadable
    check_case({"image": str(image), "label": str(label), "name": "cut"})


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


def _cases(tmp_path: Path, n: int) -> list[dict[str, str]]:
    out = []
    for i in range(n):
        image = _write(tmp_path / "imagesTr" / f"c{i}_0000.nii.gz", np.zeros((4, 4, 4), np.int16))
        label = _write(tmp_path / "labelsTr" / f"c{i}.nii.gz", np.zeros((4, 4, 4), np.uint8))
        out.append({"image": str(image), "label": str(label), "name": f"c{i}"})
    return out


def test_write_datalist_folds_partition_the_cases(tmp_path: Path) -> None:
    cases = _cases(tmp_path, 10)
    seen = set()
    for fold in range(5):
        out = write_datalist(cases, tmp_path / f"f{fold}.json", folds=5, fold=fold, seed=1)
        payload = json.loads(out.read_text())
        assert len(payload["validation"]) == 2 and len(payload["training"]) == 8
        names = {e["name"] for e in payload["validation"]}
        assert not names & seen
        assert all(e["fold"] == fold for e in payload["validation"])
        seen |= names
    assert len(seen) == 10
    with pytest.raises(OutputError, match=r"f0\.json: exists; pass --overwrite"):
        write_datalist(cases, tmp_path / "f0.json")


def test_write_datalist_hold_out_is_a_seeded_partition(tmp_path: Path) -> None:
    """The hold-out has the requested size, training and validation are disjoint and together
    every case, the same seed gives the same split and some other seed another one."""
    cases = _cases(tmp_path, 10)

    def split(seed: int, name: str) -> tuple[list[str], list[str]]:
        out = write_datalist(cases, tmp_path / name, val_fraction=0.3, seed=seed)
        payload = json.loads(out.read_text())
        return (
            [e["name"] for e in payload["training"]],
            [e["name"] for e in payload["validation"]],
        )

    train, val = split(0, "a.json")
    assert len(val) == 3 and len(train) == 7
    assert not set(train) & set(val) and set(train) | set(val) == {c["name"] for c in cases}
    assert split(0, "b.json") == (train, val)
    others = {tuple(sorted(split(seed, f"s{seed}.json")[1])) for seed in range(1, 6)}
    assert others - {tuple(sorted(val))}  # not a fixed list whatever the seed


def test_write_datalist_never_leaves_validation_empty(tmp_path: Path) -> None:
    """Two cases with the default 20 % hold-out: round(0.4) = 0 left validation empty before."""
    payload = json.loads(write_datalist(_cases(tmp_path, 2), tmp_path / "d.json").read_text())
    assert len(payload["training"]) == 1 and len(payload["validation"]) == 1
    with pytest.raises(GFScreenFormatError, match="cannot be split"):
        write_datalist(_cases(tmp_path, 1), tmp_path / "one.json")


def test_write_datalist_rejects_missing_label_files(tmp_path: Path) -> None:
    """An MSD dataset.json that lists a label missing on disk: rc 0 with a broken entry before."""
    _cases(tmp_path, 3)
    (tmp_path / "labelsTr" / "c1.nii.gz").unlink()
    meta = {
        "training": [
            {"image": f"./imagesTr/c{i}_0000.nii.gz", "label": f"./labelsTr/c{i}.nii.gz"}
            for i in range(3)
        ]
    }
    (tmp_path / "dataset.json").write_text(json.dumps(meta))
    with pytest.raises(GFScreenFormatError, match=r"c1\.nii\.gz") as info:
        write_datalist(discover_cases(tmp_path), tmp_path / "d.json")
    assert "label" in str(info.value) and not (tmp_path / "d.json").exists()


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
