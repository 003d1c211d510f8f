from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from medimg_gfscreen.io import GFScreenFormatError, load_datalist
from medimg_gfscreen.transforms import hu_window, train_transforms, val_transforms

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


def test_label_map_maps_msd_tumour_and_rejects_unknown_values(tmp_path: Path) -> None:
    affine = np.diag([1, 1, 3, 1.0])
    img = np.full((40, 40, 16), 40, np.int16)
    lab = np.zeros((40, 40, 16), np.uint8)
    lab[5:30, 5:30, 2:14] = 1  # liver
    lab[10:14, 10:14, 5:8] = 2  # tumour
    nib.save(nib.Nifti1Image(img, affine), tmp_path / "liver_0000.nii.gz")
    nib.save(nib.Nifti1Image(lab, affine), tmp_path / "liver.nii.gz")
    item = {"image": str(tmp_path / "liver_0000.nii.gz"), "label": str(tmp_path / "liver.nii.gz"),
            "name": "liver"}  # fmt: skip
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
