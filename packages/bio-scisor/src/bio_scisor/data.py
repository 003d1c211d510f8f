"""Dataset and LightningDataModule of unaligned protein sequences (FASTA / A2M / Stockholm)."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from bio_scisor.insertion import pad_batch
from bio_scisor.io import ScisorFormatError, encode, read_sequences

__all__ = ["ScisorDataModule", "SequenceDataset", "collate"]


class SequenceDataset(Dataset):
    """Token tensors of residue strings (validated by :func:`bio_scisor.io.encode`)."""

    def __init__(self, sequences: list[str]) -> None:
        self.sequences = list(sequences)
        self.tokens = [
            torch.from_numpy(encode(s, f"sequence {i}")) for i, s in enumerate(sequences)
        ]

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.tokens[index]


def collate(batch: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded X0 (B, m) int64 and lengths (B,)."""
    return pad_batch(batch)


class ScisorDataModule(L.LightningDataModule):
    """Training sequences from ``train_path`` or, with ``synthetic=True``, the synthetic family.

    ``val_fraction`` of the records (a seeded shuffle, at least one) is held out for validation
    and testing. Nothing is dropped: a record over ``max_len`` is an error.
    """

    def __init__(
        self,
        train_path: str | None = None,
        fmt: str | None = None,
        synthetic: bool = False,
        n_synthetic: int = 400,
        synthetic_seed: int = 0,
        val_fraction: float = 0.1,
        batch_size: int = 16,
        max_len: int | None = None,
        split_seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        if (train_path is None) == (not synthetic):
            raise ValueError("give exactly one of data.train_path or data.synthetic=true")
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.save_hyperparameters()
        self.train_set: SequenceDataset | None = None
        self.val_set: SequenceDataset | None = None

    def load_sequences(self) -> list[str]:
        hp = self.hparams
        if hp.synthetic:
            from bio_scisor.synth import make_family

            return make_family(n_sequences=hp.n_synthetic, seed=hp.synthetic_seed).sequences
        return [s for _, s in read_sequences(Path(hp.train_path), hp.fmt, hp.max_len)]

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        sequences = self.load_sequences()
        if len(sequences) < 2:
            source = self.hparams.train_path or "synthetic family"
            raise ScisorFormatError(f"{source}: need at least 2 sequences, got {len(sequences)}")
        order = torch.randperm(
            len(sequences), generator=torch.Generator().manual_seed(self.hparams.split_seed)
        ).tolist()
        n_val = max(1, round(self.hparams.val_fraction * len(sequences)))
        self.val_set = SequenceDataset([sequences[i] for i in order[:n_val]])
        self.train_set = SequenceDataset([sequences[i] for i in order[n_val:]])

    def _loader(self, dataset: Dataset | None, shuffle: bool) -> DataLoader:
        assert dataset is not None, "call setup() first"
        return DataLoader(
            dataset,
            batch_size=self.hparams.batch_size,
            shuffle=shuffle,
            collate_fn=collate,
            num_workers=self.hparams.num_workers,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, shuffle=False)
