"""LightningDataModule for RF-MatID: protocol (frequency allocation), split and label mode."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from rf_matid.classes import APPLICATION_MODES, class_vocabulary, label_indices, superclass_of
from rf_matid.io import (
    Position,
    RFMatIDData,
    RFMatIDFormatError,
    frequency_csvs,
    load_dataset,
    read_frequency_csv,
    scan_position_folders,
)
from rf_matid.model import complex_whiten
from rf_matid.protocols import PROTOCOLS, protocol_mask
from rf_matid.splits import make_split, parse_split_name

__all__ = [
    "DOMAINS",
    "FREQ_DATA_TYPES",
    "DatasetSummary",
    "RFMatIDDataModule",
    "RFMatIDSubset",
    "ThreeChannelCollate",
    "collate_frequency",
    "collate_time",
    "frequency_channel",
    "parse_split_name",
    "three_channel",
]

logger = logging.getLogger("rf_matid")

DOMAINS = ("frequency", "time")
FREQ_DATA_TYPES = ("dual_channel", "three_channel")


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


def frequency_channel(freq_hz: np.ndarray) -> np.ndarray:
    """Upstream's three-channel frequency row: ``float32(freq_hz) / 1e9`` in float32 (GHz),
    as ``torch.FloatTensor(hz) / 1e9`` of ``load_thz_data``. ``[F]`` -> float32 ``[F]``."""
    return np.asarray(freq_hz, dtype=np.float32) / np.float32(1e9)


def three_channel(whitened: torch.Tensor, freq_ghz: np.ndarray) -> torch.Tensor:
    """Prepend the frequency row: whitened ``[B, 2, F]`` -> ``[B, 3, F]`` (f GHz, Re, Im),
    upstream ``freq_data_type: three_channel`` (channels-first here)."""
    row = torch.from_numpy(np.ascontiguousarray(freq_ghz, dtype=np.float32))
    return torch.cat((row.expand(whitened.shape[0], 1, -1), whitened), dim=1)


class ThreeChannelCollate:
    """Collate for ``three_channel``: :func:`collate_frequency`, then the frequency row of the
    cropped axis ``freq_hz`` [F] in front -> x float [B, 3, F]."""

    def __init__(self, freq_hz: np.ndarray) -> None:
        self.freq_ghz = frequency_channel(freq_hz)

    def __call__(self, batch: list[tuple[np.ndarray, int]]) -> dict[str, torch.Tensor]:
        out = collate_frequency(batch)
        return {"x": three_channel(out["x"], self.freq_ghz), "y": out["y"]}


def collate_time(batch: list[tuple[np.ndarray, int]]) -> dict[str, torch.Tensor]:
    """Stacks z-scored time-domain samples -> x float [B, 1, T]."""
    x = torch.from_numpy(np.stack([item[0] for item in batch])).float().unsqueeze(1)
    y = torch.tensor([item[1] for item in batch], dtype=torch.long)
    return {"x": x, "y": y}


@dataclass(frozen=True)
class DatasetSummary:
    """What the model needs before setup(): label vocabulary, input length and channels.

    ``skipped`` lists ``(folder, reason)`` of the malformed position folders passed over with
    ``skip_bad``.
    """

    class_names: tuple[str, ...]
    seq_len: int
    in_channels: int
    skipped: tuple[tuple[str, str], ...] = ()


class RFMatIDDataModule(L.LightningDataModule):
    """RF-MatID data: a dataset root in the upstream folder/CSV format.

    Args:
        data_dir: root holding ``ms46131a-4To43.5GHz-2048-{class}-{dist}mm-{deg}deg/`` folders.
        domain: 'frequency' (S11, 2 whitened channels) or 'time' (1 channel).
        freq_data_type: 'dual_channel' (whitened Re, Im: the baselines) or 'three_channel'
            (frequency in GHz, Re, Im: the paper's RF_MatID), upstream's names.
        protocol: frequency allocation protocol 'P1'..'P5' (frequency domain only).
        split: 'S1' (random), 'S2-mod1..3' (cross-distance), 'S3-mod1..3' (cross-angle).
        application_mode: 'all_classes' (fine-grained) or 'super_classes' (5 superclasses).
        seed: training-loader shuffling seed (varies with the training seed).
        split_seed: seed of the S1 permutation and the S2/S3 validation hold-out; upstream fixes
            it at 42 whatever the training seed, so that every seed sees the same split.
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
        split_seed: int = 42,
        cache_dir: str | None = None,
        skip_bad: bool = False,
        freq_data_type: str = "dual_channel",
    ) -> None:
        super().__init__()
        if domain not in DOMAINS:
            raise ValueError(f"domain must be one of {DOMAINS}, got {domain!r}")
        if freq_data_type not in FREQ_DATA_TYPES:
            raise ValueError(
                f"freq_data_type must be one of {FREQ_DATA_TYPES}, got {freq_data_type!r}"
            )
        if domain == "time" and freq_data_type != "dual_channel":
            raise ValueError("freq_data_type applies to the frequency domain only")
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
        """Vocabulary, input length and channels from the folder names and one sample.

        Honours ``skip_bad`` (malformed folders are logged and recorded in ``skipped``). In
        ``super_classes`` mode a class without a known superclass prefix raises
        ``RFMatIDFormatError`` naming its folder, with or without ``skip_bad``: it is a labelling
        error, not a damaged file.
        """
        if self._summary is None:
            skip_bad = self.hparams.skip_bad
            folders, skipped = scan_position_folders(
                self.data_dir, self.hparams.domain, skip_bad=skip_bad
            )
            if not folders:
                raise FileNotFoundError(
                    f"{self.data_dir}: no position folders found"
                    + (f" ({len(skipped)} malformed folders skipped)" if skipped else "")
                )
            if self.hparams.application_mode == "super_classes":
                for folder, position in folders:
                    try:
                        superclass_of(position.class_name)
                    except ValueError as error:
                        raise RFMatIDFormatError(folder, str(error), field="class_name") from None
            names = [position.class_name for _, position in folders]
            vocabulary = class_vocabulary(names, self.hparams.application_mode)
            if self.hparams.domain == "frequency":
                freq_hz = self._first_frequency_axis(folders)
                seq_len = int(protocol_mask(freq_hz, self.hparams.protocol).sum())
                in_channels = 3 if self.hparams.freq_data_type == "three_channel" else 2
            else:
                seq_len = int(self._load().x.shape[1])
                in_channels = 1
            self._summary = DatasetSummary(vocabulary, seq_len, in_channels, tuple(skipped))
        return self._summary

    def _first_frequency_axis(self, folders: list[tuple[Path, Position]]) -> np.ndarray:
        """freq_hz [F] of the first readable frequency CSV (with ``skip_bad``, bad ones are
        logged and passed over here; ``load_dataset`` records them later)."""
        for folder, _ in folders:
            for csv in frequency_csvs(folder):
                try:
                    return read_frequency_csv(csv)[0]
                except RFMatIDFormatError as error:
                    if not self.hparams.skip_bad:
                        raise
                    logger.warning("skipping %s: %s", csv, error)
        raise FileNotFoundError(f"{self.data_dir}: no readable frequency CSV files")

    @property
    def skipped(self) -> tuple[tuple[str, str], ...]:
        """``(path, reason)`` of everything passed over with ``skip_bad``: malformed folders seen
        by ``summarize()`` and, once loaded, every sample ``load_dataset`` dropped."""
        skipped = self.summarize().skipped
        if self._data is not None:
            skipped += self._data.skipped
        return skipped

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
        mode = self.hparams.application_mode
        vocabulary = self.summarize().class_names
        present = class_vocabulary(list(data.class_names), mode)
        if present != vocabulary:
            missing = sorted(set(vocabulary) - set(present))
            if not self.hparams.skip_bad or set(present) - set(vocabulary):
                raise ValueError(
                    f"{self.data_dir}: classes in the CSV files {present} differ from the folder "
                    f"names {vocabulary}"
                )
            logger.warning(
                "%s: every sample of %s was skipped; the labels keep the folders' vocabulary",
                self.data_dir,
                missing,
            )
        labels, _ = label_indices(list(data.class_names), mode, vocabulary)
        mask = None
        if self.hparams.domain == "frequency":
            mask = protocol_mask(np.asarray(data.axis), self.hparams.protocol)
        indices = make_split(
            np.asarray(data.distance_mm),
            np.asarray(data.angle_deg),
            self.split_name,
            self.mod,
            seed=self.hparams.split_seed,
        )
        label_array = np.asarray(labels, dtype=np.int64)
        for part in ("train", "val", "test"):
            if len(indices[part]) == 0:
                raise ValueError(
                    f"{self.data_dir}: split {self.hparams.split} has no {part} samples "
                    "(the dataset lacks the distances/angles this split needs)"
                )
            self._datasets[part] = RFMatIDSubset(data.x, label_array, indices[part], mask)

    def sample_records(self, part: str) -> list[tuple[str, str]]:
        """``(file relative to data_dir, label name)`` of every sample of ``part`` ('train',
        'val' or 'test'), in the order of its dataset (the loader's order without shuffling)."""
        self.setup()
        data = self._load()
        subset = self._datasets[part]
        vocabulary = self.summarize().class_names
        return [(data.files[row], vocabulary[subset.labels[row]]) for row in subset.indices]

    def split_sizes(self) -> dict[str, int]:
        self.setup()
        return {part: len(dataset) for part, dataset in self._datasets.items()}

    def _loader(self, part: str, shuffle: bool) -> DataLoader:
        self.setup()
        collate: Any = collate_frequency if self.hparams.domain == "frequency" else collate_time
        if self.hparams.freq_data_type == "three_channel":
            data = self._load()
            collate = ThreeChannelCollate(
                np.asarray(data.axis)[protocol_mask(np.asarray(data.axis), self.hparams.protocol)]
            )
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
