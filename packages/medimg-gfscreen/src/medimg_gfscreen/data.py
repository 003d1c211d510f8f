"""``GFScreenDataModule``: Decathlon datalists of NIfTI CT volumes through the MONAI pipeline.

Training batches are MONAI ``list_data_collate`` of ``batch_size`` volumes x ``num_samples``
sub-volumes (upstream: 4 x 4 = 16), consecutive per volume, so sub-volume ``i`` belongs to case
``i // num_samples``. Validation / test / predict batches are single whole volumes.
Every case is checked before loading (:func:`medimg_gfscreen.io.check_case`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
from torch.utils.data import DataLoader

from medimg_gfscreen.constants import PAPER_ROI, SPACING_MM
from medimg_gfscreen.io import GFScreenFormatError, check_case, load_datalist, parse_label_map
from medimg_gfscreen.transforms import hu_window, train_transforms, val_transforms

__all__ = ["GFScreenDataModule"]


class GFScreenDataModule(L.LightningDataModule):
    """Args:
    datalist: Decathlon datalist JSON (``training`` / ``validation`` lists of
        ``{image, label, name}``); relative paths are resolved against ``base_dir`` (default: the
        JSON's folder).
    region: HU window, ``abdomen`` ([-175, 250]) or ``chest`` ([-900, 650]).
    roi_size: Focus / Glance sub-volume (paper 96x96x64 at 1x1x3 mm).
    num_samples: sub-volumes per volume (RandCropByPosNegLabeld, pos=1, neg=1).
    batch_size: volumes per training batch (sub-volumes per step = batch_size * num_samples).
    label_map: source label -> {0, 1}, e.g. ``{1: 0, 2: 1}`` for MSD liver / pancreas tumours,
        or the string ``"1:0,2:1"``. Default ``{1: 1}``.
    test_key: datalist key of the test set (default: the validation key).
    check_cases: validate every file (NIfTI, label present, shapes, affines, NaN) first.
    """

    def __init__(
        self,
        datalist: str = "datalist.json",
        base_dir: str | None = None,
        train_key: str = "training",
        val_key: str = "validation",
        test_key: str | None = None,
        region: str = "abdomen",
        roi_size: Sequence[int] = PAPER_ROI,
        num_samples: int = 4,
        batch_size: int = 4,
        label_map: Mapping[int, int] | str | None = None,
        spacing: Sequence[float] = SPACING_MM,
        cache_rate: float = 1.0,
        num_workers: int = 0,
        check_cases: bool = True,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        hu_window(region)  # fail early on an unknown region
        if num_samples < 1 or batch_size < 1:
            raise GFScreenFormatError("num_samples and batch_size must be >= 1")
        self.datalist = Path(datalist)
        self.base_dir = Path(base_dir) if base_dir else None
        self.region = region
        self.roi_size = tuple(int(v) for v in roi_size)
        self.num_samples = int(num_samples)
        self.batch_size = int(batch_size)
        self.label_map = parse_label_map(label_map)
        self.spacing = tuple(float(v) for v in spacing)
        self.cache_rate = cache_rate
        self.num_workers = num_workers
        self.check_cases = check_cases
        self.train_key, self.val_key = train_key, val_key
        self.test_key = test_key or val_key
        self.items: dict[str, list[dict[str, Any]]] = {}

    def _items(self, key: str) -> list[dict[str, Any]]:
        if key not in self.items:
            items = load_datalist(self.datalist, key, self.base_dir)
            if not items:
                raise GFScreenFormatError(f"datalist {self.datalist}: {key!r} list is empty")
            if self.check_cases:
                for item in items:
                    check_case(item)
            self.items[key] = items
        return self.items[key]

    def setup(self, stage: str | None = None) -> None:
        if stage in (None, "fit"):
            self._items(self.train_key)
        if stage in (None, "fit", "validate"):
            self._items(self.val_key)
        if stage in (None, "test", "predict"):
            self._items(self.test_key)

    def train_dataloader(self) -> DataLoader:
        from monai.data import CacheDataset, list_data_collate

        dataset = CacheDataset(
            self._items(self.train_key),
            train_transforms(
                self.region, self.roi_size, self.num_samples, self.label_map, self.spacing
            ),
            cache_rate=self.cache_rate,
            progress=False,
        )
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            shuffle=True,
            num_workers=self.num_workers,
            collate_fn=list_data_collate,
            drop_last=False,
        )

    def _whole_volumes(self, key: str) -> DataLoader:
        from monai.data import CacheDataset, list_data_collate

        dataset = CacheDataset(
            self._items(key),
            val_transforms(self.region, self.roi_size, self.label_map, self.spacing),
            cache_rate=self.cache_rate,
            progress=False,
        )
        return DataLoader(
            dataset, batch_size=1, num_workers=self.num_workers, collate_fn=list_data_collate
        )

    def val_dataloader(self) -> DataLoader:
        return self._whole_volumes(self.val_key)

    def test_dataloader(self) -> DataLoader:
        return self._whole_volumes(self.test_key)

    def predict_dataloader(self) -> DataLoader:
        return self._whole_volumes(self.test_key)
