from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch

from medimg_gfscreen.io import GFScreenFormatError, load_datalist
from medimg_gfscreen.transforms import (
    hu_window,
    infer_transforms,
    train_transforms,
    val_transforms,
)

ROI = (32, 32, 16)


def test_val_transforms_window_crop_and_labels(synth_dir: Path) -> None:
    item = load_datalist(synth_dir / "datalist.json")[0]
    out = val_transforms("abdomen", ROI)(item)
    image, label = out["image"], out["label"]
    assert image.shape == label.shape and image.shape[0] == 1
    assert float(image.min()) >= 0.0 and float(image.max()) <= 1.0
    # CropForegroundd removed air: the volume is smaller than 64x64 in-plane
    assert image.shape[1] < 64 and image.shape[3] == 32
    raw = nib.load(item["label"]).get_fdata()
    assert int(label.sum()) == int(raw.sum())  # no lesion voxel lost by the crop
    assert set(np.unique(np.asarray(label)).tolist()) <= {0.0, 1.0}


def test_train_transforms_give_num_samples_positive_and_negative_crops(synth_dir: Path) -> None:
    items = load_datalist(synth_dir / "datalist.json")
    item = max(items, key=lambda i: nib.load(i["label"]).get_fdata().sum())
    crops = train_transforms("abdomen", ROI, num_samples=8)(item)
    assert len(crops) == 8
    assert all(tuple(c["image"].shape) == (1, *ROI) for c in crops)
    with_lesion = sum(bool(c["label"].sum() > 0) for c in crops)
    assert 1 <= with_lesion <= 8  # pos=1, neg=1: some crops are centred on lesion voxels


def _one_lesion_case(tmp_path: Path) -> dict[str, str]:
    """A 64 x 64 x 24 body with one 6 x 6 x 2 lesion, as NIfTI image and label files."""
    affine = np.diag([1, 1, 3, 1.0])
    img = np.full((64, 64, 24), -1000, np.int16)
    img[4:60, 4:60, :] = 40  # body
    lab = np.zeros((64, 64, 24), np.uint8)
    lab[20:26, 20:26, 10:12] = 1  # one lesion
    nib.save(nib.Nifti1Image(img, affine), tmp_path / "c_0000.nii.gz")
    nib.save(nib.Nifti1Image(lab, affine), tmp_path / "c.nii.gz")
    return {"image": str(tmp_path / "c_0000.nii.gz"), "label": str(tmp_path / "c.nii.gz")}


def test_lesion_free_negatives_hold_no_lesion_voxel(tmp_path: Path) -> None:
    """negatives="lesion_free": every crop either is centred on a lesion voxel or holds none;
    upstream's negatives (centre outside a lesion) reach the lesion in a small organ, which is
    what the option removes (issue 37: 69 % of the miniature's negatives held lesion voxels)."""
    from monai.utils import set_determinism

    item = _one_lesion_case(tmp_path)

    def lesion_voxels(negatives: str) -> list[int]:
        set_determinism(0)
        crops = train_transforms("abdomen", ROI, num_samples=40, negatives=negatives)(dict(item))
        return [int(c["label"].sum()) for c in crops]

    clean = lesion_voxels("lesion_free")
    assert any(v == 0 for v in clean) and any(v > 0 for v in clean)
    # a crop with a lesion voxel is a positive (centred on the lesion: all 72 voxels inside)
    assert all(v in (0, 6 * 6 * 2) for v in clean)
    upstream = lesion_voxels("upstream")
    assert any(0 < v < 6 * 6 * 2 for v in upstream)  # negatives that graze the lesion
    with pytest.raises(ValueError, match="negatives"):
        train_transforms("abdomen", ROI, negatives="clean")
    set_determinism(None)


def test_tiles_positives_hold_the_lesion_anywhere_in_the_crop(tmp_path: Path) -> None:
    """negatives="tiles": negatives hold no lesion voxel (as lesion_free); positives hold one
    anywhere in the crop, so some hold the lesion only in part (lesion_free's never do)."""
    from monai.utils import set_determinism

    item = _one_lesion_case(tmp_path)
    set_determinism(0)
    crops = train_transforms("abdomen", ROI, num_samples=60, negatives="tiles")(dict(item))
    set_determinism(None)
    voxels = [int(c["label"].sum()) for c in crops]
    assert any(v == 0 for v in voxels)
    assert any(0 < v < 6 * 6 * 2 for v in voxels)  # the lesion cut by the crop border
    assert any(v == 6 * 6 * 2 for v in voxels)


@pytest.mark.parametrize("negatives", ["lesion_free", "tiles"])
def test_lesion_free_negatives_survive_the_data_modules_cache(
    tmp_path: Path, negatives: str
) -> None:
    """Through ``GFScreenDataModule`` (whose ``setup`` caches the deterministic chain with the
    validation transforms) the negative crops still hold no lesion voxel. Before the fix the
    crop centres were computed in the cached prefix, so a cache written by ``setup`` skipped
    them and every crop fell back to upstream's centres (negatives grazing the lesion)."""
    import json

    from monai.utils import set_determinism

    from medimg_gfscreen.data import GFScreenDataModule

    item = {**_one_lesion_case(tmp_path), "name": "c"}
    datalist = tmp_path / "datalist.json"
    datalist.write_text(json.dumps({"training": [item], "validation": [item]}))
    dm = GFScreenDataModule(
        str(datalist),
        roi_size=ROI,
        num_samples=40,
        batch_size=1,
        cache_dir=str(tmp_path / "cache"),
        negatives=negatives,
    )
    dm.setup("fit")
    set_determinism(0)
    voxels = [
        int(crop.sum())
        for _ in range(3)
        for batch in dm.train_dataloader()
        for crop in batch["label"]
    ]
    set_determinism(None)
    assert any(v == 0 for v in voxels) and any(v > 0 for v in voxels)
    if negatives == "lesion_free":  # every lesion-bearing crop is a positive, centred on it
        assert all(v in (0, 6 * 6 * 2) for v in voxels)


def test_label_map_maps_msd_tumour_and_rejects_unknown_values(tmp_path: Path) -> None:
    affine = np.diag([1, 1, 3, 1.0])
    img = np.full((40, 40, 16), 40, np.int16)
    img[:2] = -1000  # air: a CT in HU
    lab = np.zeros((40, 40, 16), np.uint8)
    lab[5:30, 5:30, 2:14] = 1  # liver
    lab[10:14, 10:14, 5:8] = 2  # tumour
    nib.save(nib.Nifti1Image(img, affine), tmp_path / "liver_0000.nii.gz")
    nib.save(nib.Nifti1Image(lab, affine), tmp_path / "liver.nii.gz")
    item = {
        "image": str(tmp_path / "liver_0000.nii.gz"),
        "label": str(tmp_path / "liver.nii.gz"),
        "name": "liver",
    }
    out = val_transforms("abdomen", ROI, label_map={1: 0, 2: 1})(item)
    assert int(out["label"].sum()) == 4 * 4 * 3
    with pytest.raises(Exception) as info:  # MONAI wraps it in a RuntimeError
        val_transforms("abdomen", ROI, label_map={2: 1})(item)
    chain = [info.value]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    assert any(
        isinstance(e, GFScreenFormatError)
        and "liver" in str(e)
        and "not in the label map" in str(e)
        for e in chain
    )


def test_hu_windows() -> None:
    assert hu_window("abdomen") == (-175.0, 250.0)
    assert hu_window("chest") == (-900.0, 650.0)
    assert hu_window([-100, 100]) == (-100.0, 100.0)
    with pytest.raises(GFScreenFormatError):
        hu_window("brain")


def _format_error(error: BaseException) -> GFScreenFormatError | None:
    """The GFScreenFormatError a MONAI transform error wraps (raise ... from), if any."""
    node: BaseException | None = error
    while node is not None:
        if isinstance(node, GFScreenFormatError):
            return node
        node = node.__cause__
    return None


def _volume(tmp_path: Path, name: str, data: np.ndarray) -> Path:
    path = tmp_path / f"{name}_0000.nii.gz"
    nib.save(nib.Nifti1Image(data, np.diag([1, 1, 3, 1.0])), path)
    return path


@pytest.mark.parametrize(
    ("kind", "values"),
    [("unit interval", (0.0, 1.0)), ("MR-like", (0.0, 2000.0)), ("no air", (0.0, 300.0))],
)
def test_images_that_are_not_ct_in_hu_are_refused(tmp_path: Path, kind: str, values) -> None:
    """A float [0, 1] image went through silently before (fit rc 0, screen "0 lesion voxels")."""
    data = np.random.default_rng(0).uniform(*values, size=(40, 40, 16)).astype(np.float32)
    path = _volume(tmp_path, "odd", data)
    with pytest.raises(Exception) as info:
        infer_transforms("abdomen", ROI)({"image": str(path), "name": "odd"})
    error = _format_error(info.value)
    assert error is not None, info.value
    assert "odd" in str(error) and "Hounsfield" in str(error) and "prenormalized" in str(error)


def test_prenormalized_opts_out_of_the_hu_check_and_window(tmp_path: Path) -> None:
    data = np.full((40, 40, 16), 0.25, np.float32)
    data[10:30, 10:30, 4:12] = 0.75
    path = _volume(tmp_path, "scaled", data)
    out = infer_transforms("abdomen", ROI, prenormalized=True)({"image": str(path)})["image"]
    values = sorted(np.unique(np.round(np.asarray(out), 4)).tolist())
    assert 0.25 in values and 0.75 in values  # used as they are: no HU window
    bad = _volume(tmp_path, "hu", np.full((40, 40, 16), -1000.0, np.float32))
    with pytest.raises(Exception) as info:
        infer_transforms("abdomen", ROI, prenormalized=True)({"image": str(bad)})
    assert "[0, 1]" in str(_format_error(info.value))


def test_ct_in_hu_passes_and_labels_must_be_integers(synth_dir: Path, tmp_path: Path) -> None:
    item = load_datalist(synth_dir / "datalist.json")[0]
    val_transforms("abdomen", ROI)(item)  # int16 HU synthetic CT: accepted
    label = nib.load(item["label"])
    odd = tmp_path / "half.nii.gz"
    nib.save(nib.Nifti1Image(np.asarray(label.dataobj).astype(np.float32) * 0.5, label.affine), odd)
    with pytest.raises(Exception) as info:
        val_transforms("abdomen", ROI)({**item, "label": str(odd)})
    error = _format_error(info.value)
    assert error is not None and "non-integer" in str(error)


def test_inference_applies_the_training_crop(synth_dir: Path) -> None:
    """screen / predict see the volume validation sees (CropForegroundd included); without the
    crop the tile grid, and so the selection rate, differed from `test` for the same weights."""
    item = load_datalist(synth_dir / "datalist.json")[0]
    val = val_transforms("abdomen", ROI)(item)["image"]
    inf = infer_transforms("abdomen", ROI)({"image": item["image"]})["image"]
    assert inf.shape == val.shape and torch.equal(inf.as_tensor(), val.as_tensor())
    assert inf.shape[1] < nib.load(item["image"]).shape[0]  # air was cropped


def test_training_pipeline_accepts_a_trailing_singleton_axis(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    data = np.full((40, 40, 16, 1), -1000, np.int16)
    data[5:35, 5:35, :, 0] = rng.normal(40, 10, size=(30, 30, 16)).astype(np.int16)
    lab = np.zeros((40, 40, 16), np.uint8)
    lab[18:22, 18:22, 6:9] = 1
    image = _volume(tmp_path, "x4", data)
    label = tmp_path / "x4.nii.gz"
    nib.save(nib.Nifti1Image(lab, np.diag([1, 1, 3, 1.0])), label)
    crops = train_transforms("abdomen", ROI, num_samples=2)(
        {"image": str(image), "label": str(label)}
    )
    assert [tuple(c["image"].shape) for c in crops] == [(1, *ROI)] * 2


def test_check_hu_off_accepts_ct_without_air_and_keeps_the_window(tmp_path: Path) -> None:
    """A genuine CT in HU cropped inside the body (no voxel <= -200 HU) was refused, and the only
    opt-out (prenormalized) also dropped the HU window; check_hu=False keeps the window."""
    data = np.full((40, 40, 16), 40.0, np.float32)  # soft tissue
    data[10:30, 10:30, 4:12] = -100.0  # fat: about -100 HU, above the air/lung limit
    path = _volume(tmp_path, "inside", data)
    with pytest.raises(Exception) as info:
        infer_transforms("abdomen", ROI)({"image": str(path), "name": "inside"})
    assert "check_hu" in str(_format_error(info.value))
    out = infer_transforms("abdomen", ROI, check_hu=False)({"image": str(path)})["image"]
    values = sorted(np.unique(np.round(np.asarray(out), 4)).tolist())
    # abdomen window [-175, 250] -> [0, 1]: 40 HU -> 0.5059, -100 HU -> 0.1765
    assert values == pytest.approx([round(75 / 425, 4), round(215 / 425, 4)], abs=1e-4)


def test_pos_neg_ratio_sets_the_share_of_lesion_crops(tmp_path: Path) -> None:
    """pos / neg: RandCropByPosNegLabeld's ratio (upstream 1 / 1); pos only gives lesion crops
    only, and the data module refuses pos = neg = 0 in one line."""
    from monai.utils import set_determinism

    from medimg_gfscreen.data import GFScreenDataModule

    item = _one_lesion_case(tmp_path)
    set_determinism(0)
    crops = train_transforms("abdomen", ROI, num_samples=20, negatives="lesion_free", pos=1, neg=0)(
        dict(item)
    )
    set_determinism(None)
    assert all(int(c["label"].sum()) > 0 for c in crops)
    with pytest.raises(GFScreenFormatError, match="pos and neg"):
        GFScreenDataModule(str(tmp_path / "d.json"), pos=0, neg=0)
