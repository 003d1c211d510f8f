"""LightningDataModule for RF-MatID: protocol (frequency allocation), split and label mode."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from rf_matid.classes import APPLICATION_MODES, label_indices
from rf_matid.io import (
    RFMatIDData,
    frequency_csvs,
    load_dataset,
    position_folders,
    read_frequency_csv,
)
from rf_matid.model import complex_whiten
from rf_matid.protocols import PROTOCOLS, protocol_mask
from rf_matid.splits import make_split

DOMAINS = ("frequency", "time")


def parse_split_name(name: str) -> tuple[str, int]:
    """'S1' -> ('S1', 0); 'S2-mod2' -> ('S2', 2)."""
    split, _, mod = name.partition("-mod")
    if split not in ("S1", "S2", "S3") or (split == "S1") != (mod == ""):
        raise ValueError(f"split must be 'S1', 'S2-mod1..3' or 'S3-mod1..3', got {name!r}")
    mod_number = int(mod) if mod else 0
    if split != "S1" and mod_number not in (1, 2, 3):
        raise ValueError(f"split {name!r}: mod must be 1, 2 or 3")
    return split, mod_number


class RFMatIDSubset(Dataset):
    """Indexes one split of a loaded dataset; items are raw model inputs before whitening.

    Frequency domain items are complex64 [F] (protocol-cropped); time domain items float32 [1, T].
    """

    def __init__(
        self, x: np.ndarray, labels: np.ndarray, indices: np.ndarray, mask: np.ndarray | None
    ):
        self.x = x
        self.labels = labels
        self.indices = indices
        self.mask = mask

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> tuple[np.ndarray, int]:
        row = self.x[self.indices[i]]
        if self.mask is not None:
            row = row[self.mask]
        return np.asarray(row), int(self.labels[self.indices[i]])


def collate_frequency(batch: list[tuple[np.ndarray, int]]) -> dict[str, torch.Tensor]:
    """Stacks complex samples and applies per-sample complex whitening -> x float [B, 2, F]."""
    x = torch.from_numpy(np.stack([item[0] for item in batch]))
    y = torch.tensor([item[1] for item in batch], dtype=torch.long)
    return {"x": complex_whiten(x), "y": y}


def collate_time(batch: list[tuple[np.ndarray, int]]) -> dict[str, torch.Tensor]:
    """Stacks z-scored time-domain samples -> x float [B, 1, T]."""
    x = torch.from_numpy(np.stack([item[0] for item in batch])).float().unsqueeze(1)
    y = torch.tensor([item[1] for item in batch], dtype=torch.long)
    return {"x": x, "y": y}


@dataclass(frozen=True)
class DatasetSummary:
    class_names: tuple[str, ...]
    seq_len: int
    in_channels: int


class RFMatIDDataModule(L.LightningDataModule):
    """RF-MatID data: a dataset root in the upstream folder/CSV format.

    Args:
        data_dir: root holding ``ms46131a-4To43.5GHz-2048-{class}-{dist}mm-{deg}deg/`` folders.
        domain: 'frequency' (S11, 2 whitened channels) or 'time' (1 channel).
        protocol: frequency allocation protocol 'P1'..'P5' (frequency domain only).
        split: 'S1' (random), 'S2-mod1..3' (cross-distance), 'S3-mod1..3' (cross-angle).
        application_mode: 'all_classes' (fine-grained) or 'super_classes' (5 superclasses).
    """

    def __init__(
        self,
        data_dir: str,
        domain: str = "frequency",
        protocol: str = "P1",
        split: str = "S1",
        application_mode: str = "all_classes",
        batch_size: int = 64,
        num_workers: int = 0,
        seed: int = 42,
        cache_dir: str | None = None,
        skip_bad: bool = False,
    ) -> None:
        super().__init__()
        if domain not in DOMAINS:
            raise ValueError(f"domain must be one of {DOMAINS}, got {domain!r}")
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {tuple(PROTOCOLS)}, got {protocol!r}")
        if application_mode not in APPLICATION_MODES:
            raise ValueError(
                f"application_mode must be one of {APPLICATION_MODES}, got {application_mode!r}"
            )
        if domain == "time" and protocol != "P1":
            raise ValueError("frequency protocols apply to the frequency domain only; use P1")
        self.split_name, self.mod = parse_split_name(split)
        self.save_hyperparameters()
        self.data_dir = Path(data_dir)
        self._summary: DatasetSummary | None = None
        self._data: RFMatIDData | None = None
        self._datasets: dict[str, RFMatIDSubset] = {}

    # Attributes linked into the model by the CLI before setup() runs: they only scan folder
    # names and one file, never the whole dataset.
    def summarize(self) -> DatasetSummary:
        if self._summary is None:
            folders = position_folders(self.data_dir, self.hparams.domain)
            if not folders:
                raise FileNotFoundError(f"{self.data_dir}: no position folders found")
            names = [position.class_name for _, position in folders]
            _, vocabulary = label_indices(names, self.hparams.application_mode)
            if self.hparams.domain == "frequency":
                csvs = frequency_csvs(folders[0][0])
                if not csvs:
                    raise FileNotFoundError(f"{folders[0][0]}: no frequency CSV files")
                freq_hz, _ = read_frequency_csv(csvs[0])
                seq_len = int(protocol_mask(freq_hz, self.hparams.protocol).sum())
                in_channels = 2
            else:
                seq_len = int(self._load().x.shape[1])
                in_channels = 1
            self._summary = DatasetSummary(vocabulary, seq_len, in_channels)
        return self._summary

    @property
    def class_names(self) -> list[str]:
        return list(self.summarize().class_names)

    @property
    def num_classes(self) -> int:
        return len(self.summarize().class_names)

    @property
    def seq_len(self) -> int:
        return self.summarize().seq_len

    @property
    def in_channels(self) -> int:
        return self.summarize().in_channels

    def _load(self) -> RFMatIDData:
        if self._data is None:
            self._data = load_dataset(
                self.data_dir,
                domain=self.hparams.domain,
                cache_dir=self.hparams.cache_dir,
                skip_bad=self.hparams.skip_bad,
            )
        return self._data

    def setup(self, stage: str | None = None) -> None:
        if self._datasets:
            return
        data = self._load()
        labels, vocabulary = label_indices(list(data.class_names), self.hparams.application_mode)
        if tuple(vocabulary) != self.summarize().class_names:
            raise ValueError(
                f"{self.data_dir}: classes in the CSV files {vocabulary} differ from the folder "
                f"names {self.summarize().class_names}"
            )
        mask = None
        if self.hparams.domain == "frequency":
            mask = protocol_mask(np.asarray(data.axis), self.hparams.protocol)
        indices = make_split(
            np.asarray(data.distance_mm),
            np.asarray(data.angle_deg),
            self.split_name,
            self.mod,
            seed=self.hparams.seed,
        )
        label_array = np.asarray(labels, dtype=np.int64)
        for part in ("train", "val", "test"):
            if len(indices[part]) == 0:
                raise ValueError(
                    f"{self.data_dir}: split {self.hparams.split} has no {part} samples "
                    "(the dataset lacks the distances/angles this split needs)"
                )
            self._datasets[part] = RFMatIDSubset(data.x, label_array, indices[part], mask)

    def split_sizes(self) -> dict[str, int]:
        self.setup()
        return {part: len(dataset) for part, dataset in self._datasets.items()}

    def _loader(self, part: str, shuffle: bool) -> DataLoader:
        self.setup()
        collate = collate_frequency if self.hparams.domain == "frequency" else collate_time
        generator = torch.Generator().manual_seed(self.hparams.seed) if shuffle else None
        return DataLoader(
            self._datasets[part],
            batch_size=self.hparams.batch_size,
            shuffle=shuffle,
            num_workers=self.hparams.num_workers,
            collate_fn=collate,
            generator=generator,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)
