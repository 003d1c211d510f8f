from __future__ import annotations

import os
from pathlib import Path

import torch

from medimg_gfscreen.data import GFScreenDataModule, image_folder_items


def _module(synth_dir: Path, cache: Path, **kw) -> GFScreenDataModule:
    return GFScreenDataModule(str(synth_dir / "datalist.json"), roi_size=(32, 32, 16),
                              num_samples=2, batch_size=2, cache_dir=str(cache), **kw)  # fmt: skip


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
    dm = _module(synth_dir, tmp_path / "cache", predict_dir=str(folder),
                 output_dir=str(tmp_path / "out"))  # fmt: skip
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
