from __future__ import annotations

import json
import os
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch

from medimg_gfscreen.data import GFScreenDataModule, image_folder_items
from medimg_gfscreen.io import GFScreenFormatError


def _module(synth_dir: Path, cache: Path, **kw) -> GFScreenDataModule:
    return GFScreenDataModule(
        str(synth_dir / "datalist.json"),
        roi_size=(32, 32, 16),
        num_samples=2,
        batch_size=2,
        cache_dir=str(cache),
        **kw,
    )


def test_volumes_are_cached_on_disk_without_voxel_indices(synth_dir: Path, tmp_path: Path) -> None:
    """PersistentDataset as upstream (CacheDataset kept every volume in memory, with its
    foreground / background voxel indices: ~0.18 GB per CT at paper scale)."""
    from monai.data import PersistentDataset

    dm = _module(synth_dir, tmp_path / "cache")
    dm.setup("fit")
    loader = dm.train_dataloader()
    assert isinstance(loader.dataset, PersistentDataset)
    batch = next(iter(loader))
    assert batch["image"].shape == (4, 1, 32, 32, 16)  # 2 volumes x 2 sub-volumes
    files = sorted(dm.cache_folder().glob("*.pt"))
    assert files and dm.cache_folder().is_relative_to(tmp_path / "cache")
    cached = torch.load(files[0], weights_only=True)  # readable as the dataset reads it
    assert not any("indices" in key for key in cached)
    before = {p.name: p.stat().st_mtime_ns for p in files}
    next(iter(dm.train_dataloader()))  # a second pass reads, does not rewrite
    after = {p.name: p.stat().st_mtime_ns for p in dm.cache_folder().glob("*.pt")}
    assert {k: after[k] for k in before} == before


def test_cache_follows_files_and_settings(synth_dir: Path, tmp_path: Path) -> None:
    """A changed file is preprocessed again (the entry is keyed by size and mtime), and other
    preprocessing settings use another folder."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(synth_dir, data)
    dm = _module(data, tmp_path / "cache")
    dm.setup("validate")
    next(iter(dm.val_dataloader()))
    first = set(dm.cache_folder().glob("*.pt"))
    image = Path(dm.items["validation"][0]["image"])
    stat = image.stat()
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    next(iter(dm.val_dataloader()))
    assert len(set(dm.cache_folder().glob("*.pt")) - first) == 1
    chest = _module(data, tmp_path / "cache", region="chest")
    assert chest.cache_folder() != dm.cache_folder()


def test_predict_items_need_no_labels(synth_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "images"
    folder.mkdir()
    for image in sorted((synth_dir / "imagesTr").glob("*.nii.gz"))[:2]:
        (folder / image.name).write_bytes(image.read_bytes())
    (folder / "notes.txt").write_text("not an image")
    items = image_folder_items(folder)
    assert [set(i) for i in items] == [{"image", "name"}] * 2
    dm = _module(
        synth_dir, tmp_path / "cache", predict_dir=str(folder), output_dir=str(tmp_path / "out")
    )
    dm.setup("predict")
    batch = next(iter(dm.predict_dataloader()))
    assert "label" not in batch and batch["image"].shape[:2] == (1, 1)
    assert [p.name for p in dm.mask_paths()] == [f"{i['name']}.nii.gz" for i in items]


def test_training_crops_repeat_under_one_seed(synth_dir: Path, tmp_path: Path) -> None:
    """Under one seed the random crops repeat (MONAI's DataLoader seeds the random transforms
    from torch's generator, and per worker when num_workers > 0, where torch's own DataLoader
    gives every worker the same transform state)."""
    from iclr26_common import seed_everything

    def first_batch() -> torch.Tensor:
        seed_everything(7)
        dm = _module(synth_dir, tmp_path / "cache")
        return next(iter(dm.train_dataloader()))["image"]

    assert torch.equal(first_batch(), first_batch())


def _unit_interval_case(synth_dir: Path, tmp_path: Path) -> tuple[Path, str]:
    """The synthetic datalist (absolute paths) with training case 0's image replaced by a float
    [0, 1] image of the same grid; returns the datalist and that case's name."""
    payload = json.loads((synth_dir / "datalist.json").read_text())
    for key in ("training", "validation"):
        for entry in payload[key]:
            entry["image"] = str(synth_dir / entry["image"])
            entry["label"] = str(synth_dir / entry["label"])
    entry = payload["training"][0]
    source = nib.load(entry["image"])
    data = np.random.default_rng(0).uniform(0, 1, size=source.shape).astype(np.float32)
    image = tmp_path / "unit_0000.nii.gz"
    nib.save(nib.Nifti1Image(data, source.affine), image)
    entry["image"] = str(image)
    path = tmp_path / "datalist.json"
    path.write_text(json.dumps(payload))
    return path, entry["name"]


def test_setup_checks_voxel_values_in_this_process(synth_dir: Path, tmp_path: Path) -> None:
    """The voxel checks ran inside the DataLoader (its workers with num_workers > 0, where the
    error lost its cause); now setup runs them, and fills the cache the loaders read."""
    datalist, name = _unit_interval_case(synth_dir, tmp_path)
    dm = GFScreenDataModule(
        str(datalist),
        roi_size=(32, 32, 16),
        num_samples=2,
        batch_size=2,
        cache_dir=str(tmp_path / "cache"),
        num_workers=2,
    )
    with pytest.raises(Exception) as info:
        dm.setup("fit")
    error = info.value
    while not isinstance(error, GFScreenFormatError) and error.__cause__ is not None:
        error = error.__cause__
    assert isinstance(error, GFScreenFormatError) and name in str(error)
    good = _module(synth_dir, tmp_path / "cache2")
    good.setup("validate")
    assert len(list(good.cache_folder().glob("*.pt"))) == len(good.items["validation"])


def test_predict_folder_with_two_files_of_one_case_is_refused(tmp_path: Path) -> None:
    """x.nii and x_0000.nii.gz both map to mask x.nii.gz: the second write failed mid-run after
    the first mask was written."""
    folder = tmp_path / "images"
    folder.mkdir()
    data = np.zeros((8, 8, 4), np.int16)
    for name in ("x.nii", "x_0000.nii.gz", "y_0000.nii.gz"):
        nib.save(nib.Nifti1Image(data, np.eye(4)), folder / name)
    with pytest.raises(GFScreenFormatError) as info:
        image_folder_items(folder)
    message = str(info.value)
    assert "x.nii " in message and "x_0000.nii.gz" in message and "\n" not in message


def test_predict_with_workers_checks_voxel_values_in_this_process(tmp_path: Path) -> None:
    """predict reads its images uncached; with workers the checks would run there only."""
    folder = tmp_path / "images"
    folder.mkdir()
    data = np.random.default_rng(0).uniform(0, 1, size=(40, 40, 16)).astype(np.float32)
    nib.save(nib.Nifti1Image(data, np.diag([1, 1, 3, 1.0])), folder / "unit_0000.nii.gz")
    dm = GFScreenDataModule(
        "unused.json",
        roi_size=(32, 32, 16),
        predict_dir=str(folder),
        output_dir=str(tmp_path / "out"),
        num_workers=2,
    )
    with pytest.raises(Exception) as info:
        dm.setup("predict")
    error = info.value
    while not isinstance(error, GFScreenFormatError) and error.__cause__ is not None:
        error = error.__cause__
    assert isinstance(error, GFScreenFormatError) and "unit" in str(error)
