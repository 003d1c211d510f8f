"""Dataset and LightningDataModule for training the PointNet++-style encoder.

``data_dir`` is anything :func:`pointcloud_pgllm.io.load_dataset` reads (a ModelNet40 OFF tree, a
PointNet HDF5 folder, a ScanObjectNN ``.h5`` file); without it the module draws in-memory
synthetic clouds of the 13 ID classes. The ``train`` split is divided into train / validation
(``val_fraction``, stratified, fixed seed); the ``test`` split is the test set.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from pointcloud_pgllm.constants import DEFAULT_N_POINTS
from pointcloud_pgllm.io import PointCloudSet, load_dataset

__all__ = ["CloudDataset", "PointCloudDataModule"]


class CloudDataset(Dataset):
    """``(points [P, 3] float32, label int64)`` pairs of a :class:`PointCloudSet`."""

    def __init__(self, clouds: PointCloudSet) -> None:
        self.points = torch.as_tensor(clouds.points, dtype=torch.float32)
        self.labels = torch.as_tensor(clouds.labels, dtype=torch.long)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.points[index], self.labels[index]


def _stratified_split(
    labels: np.ndarray, fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    val: list[int] = []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        val.extend(idx[: round(fraction * len(idx))].tolist())
    mask = np.zeros(len(labels), dtype=bool)
    mask[val] = True
    return np.flatnonzero(~mask), np.flatnonzero(mask)


class PointCloudDataModule(L.LightningDataModule):
    """Clouds for classification training; ``num_classes`` / ``class_names`` are linked into the
    model by the CLI."""

    def __init__(
        self,
        data_dir: str | None = None,
        n_points: int = DEFAULT_N_POINTS,
        batch_size: int = 16,
        val_fraction: float = 0.2,
        num_workers: int = 0,
        seed: int = 0,
        synthetic_per_class: int = 24,
        classes: list[str] | None = None,
    ) -> None:
        super().__init__()
        if not 0.0 <= val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
        if data_dir is not None and not Path(data_dir).exists():
            raise FileNotFoundError(f"{data_dir}: data_dir does not exist")
        self.data_dir, self.n_points, self.batch_size = data_dir, n_points, batch_size
        self.val_fraction, self.num_workers, self.seed = val_fraction, num_workers, seed
        self.synthetic_per_class, self.classes = synthetic_per_class, classes
        self._train_all: PointCloudSet | None = None
        self._test: PointCloudSet | None = None
        self.class_names = self._load_class_names()
        self.num_classes = len(self.class_names)

    def _load_class_names(self) -> list[str]:
        if self.data_dir is None:
            from pointcloud_pgllm.synth import SYNTH_ID_CLASSES

            return list(self.classes or SYNTH_ID_CLASSES)
        self._train_all = load_dataset(
            self.data_dir, "train", n_points=self.n_points, seed=self.seed, classes=self.classes
        )
        return list(self._train_all.class_names)

    def setup(self, stage: str | None = None) -> None:
        if hasattr(self, "train_set"):
            return
        if self.data_dir is None:
            from pointcloud_pgllm.synth import synthetic_clouds

            self._train_all = synthetic_clouds(
                self.class_names, self.synthetic_per_class, self.n_points, self.seed
            )
            self._test = synthetic_clouds(
                self.class_names,
                max(2, self.synthetic_per_class // 3),
                self.n_points,
                self.seed + 1,
            )
        else:
            assert self._train_all is not None
            self._test = load_dataset(
                self.data_dir,
                "test",
                n_points=self.n_points,
                seed=self.seed,
                classes=self.class_names,
            )
        assert self._train_all is not None
        train_idx, val_idx = _stratified_split(self._train_all.labels, self.val_fraction, self.seed)
        self.train_set = CloudDataset(self._train_all.subset(train_idx))
        self.val_set = CloudDataset(self._train_all.subset(val_idx if len(val_idx) else train_idx))
        self.test_set = CloudDataset(self._test)

    def _loader(self, dataset: CloudDataset, shuffle: bool) -> DataLoader:
        return DataLoader(
            dataset, batch_size=self.batch_size, shuffle=shuffle, num_workers=self.num_workers
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_set, False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader(self.test_set, False)
