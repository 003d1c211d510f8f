"""``atomistic-scaling predict``'s output: a Lightning prediction writer that saves the model's
energy, forces (and stress, when the model predicts it) of every structure of the predict split
to ``predictions.pt`` in the run folder.

The run folder is ``trainer.log_dir``, where ``fit`` saves its ``config.yaml``: the logger's
version folder, or ``--trainer.default_root_dir`` (by default the working directory) without a
logger. The file holds, in the predict split's order (the test split: ``test_files`` or the test
fraction, the validation split when that is empty), ``S`` structures:

- ``energy``: float tensor ``[S]`` (eV),
- ``forces``: list of ``S`` float tensors ``[n_s, 3]`` (eV/Å), one per structure,
- ``stress``: float tensor ``[S, 3, 3]`` (eV/Å³), only for a conservative model,
- ``n_atoms``: long tensor ``[S]``, ``index``: long tensor ``[S]`` (position in the split).

It is read with ``torch.load(path, weights_only=True)``. An existing file is never overwritten
(``FileExistsError`` naming it before the first batch; the file is opened with ``"xb"``).
Under DDP every rank predicts its share, rank 0 gathers them and writes the one file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.callbacks import BasePredictionWriter
from torch import Tensor

from iclr26_common.outputs import FILE_MODE

__all__ = [
    "PREDICTIONS_FILE",
    "PredictionsWriter",
    "check_free",
    "split_per_structure",
    "write_predictions",
]

PREDICTIONS_FILE = "predictions.pt"


def check_free(path: Path) -> Path:
    """``path`` if no file is there; else the one-line ``FileExistsError`` naming it."""
    if path.exists():
        raise FileExistsError(f"{path}: exists; predict never overwrites a file")
    return path


def split_per_structure(
    prediction: dict[str, Tensor], ptr: Tensor, indices: Sequence[int]
) -> list[dict[str, Any]]:
    """One record per structure of a batch: ``prediction`` is ``predict_step``'s output
    (``energy`` [B], ``forces`` [sum n_s, 3], optional ``stress`` [B, 3, 3]); ``ptr`` [B + 1] the
    batch's atom offsets; ``indices`` the B positions of the structures in the split."""
    records = []
    for s, index in enumerate(indices):
        start, stop = int(ptr[s]), int(ptr[s + 1])
        record = {
            "index": int(index),
            "energy": prediction["energy"][s].detach().cpu(),
            "forces": prediction["forces"][start:stop].detach().cpu(),
        }
        if "stress" in prediction:
            record["stress"] = prediction["stress"][s].detach().cpu()
        records.append(record)
    return records


class PredictionsWriter(BasePredictionWriter):
    """Collects per-structure predictions batch by batch and writes ``predictions.pt`` (see the
    module docstring) at the end of the predict epoch. ``path`` holds the file written."""

    def __init__(self, filename: str = PREDICTIONS_FILE) -> None:
        super().__init__(write_interval="batch")
        self.filename = filename
        self.path: Path | None = None
        self._records: list[dict[str, Any]] = []

    def target(self, trainer: Any) -> Path:
        """``trainer.log_dir / filename`` (``log_dir`` is broadcast from rank 0)."""
        return Path(trainer.log_dir or trainer.default_root_dir) / self.filename

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage == "predict":  # every rank sees the same file: all stop, none waits
            check_free(self.target(trainer))

    def on_predict_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._records = []

    def write_on_batch_end(
        self,
        trainer: Any,
        pl_module: Any,
        prediction: Any,
        batch_indices: Sequence[int] | None,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int,
    ) -> None:
        if batch_indices is None:  # no sampler indices: the loader is sequential
            start = len(self._records)
            batch_indices = range(start, start + int(batch.num_graphs))
        self._records.extend(split_per_structure(prediction, batch.ptr, batch_indices))

    def on_predict_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        records = self._records
        if trainer.world_size > 1:
            import torch.distributed as dist

            gathered: list[Any] = [None] * trainer.world_size
            dist.all_gather_object(gathered, records)
            records = [record for part in gathered for record in part]
        path = self.target(trainer)
        if trainer.is_global_zero:
            write_predictions(path, records)
            self.path = path
            print(f"wrote {path} ({len(records)} structures)", flush=True)
        trainer.strategy.barrier()


def write_predictions(path: Path, records: list[dict[str, Any]]) -> Path:
    """Save ``records`` (from :func:`split_per_structure`, any order; a structure predicted twice
    is kept once) as ``path`` in the module docstring's layout, never over an existing file."""
    unique = {record["index"]: record for record in records}
    ordered = [unique[index] for index in sorted(unique)]
    payload: dict[str, Any] = {
        "energy": torch.stack([r["energy"] for r in ordered]) if ordered else torch.zeros(0),
        "forces": [r["forces"] for r in ordered],
        "n_atoms": torch.tensor([len(r["forces"]) for r in ordered], dtype=torch.long),
        "index": torch.tensor([r["index"] for r in ordered], dtype=torch.long),
    }
    if ordered and "stress" in ordered[0]:
        payload["stress"] = torch.stack([r["stress"] for r in ordered])
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "xb") as handle:
        torch.save(payload, handle)
    os.chmod(path, FILE_MODE)  # an ordinary output file whatever the umask
    return path
