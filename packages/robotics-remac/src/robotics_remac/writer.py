"""``robotics-remac predict``'s output: a Lightning prediction writer that saves the sampled
chunks to ``predictions.pt`` in the run's output folder (``--trainer.default_root_dir``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.callbacks import BasePredictionWriter

__all__ = ["PREDICTIONS_FILE", "PredictionsWriter", "predictions_path"]

PREDICTIONS_FILE = "predictions.pt"


def predictions_path(root_dir: str | Path, world_size: int = 1, rank: int = 0) -> Path:
    """Where ``predict`` writes: ``ROOT/predictions.pt`` (one process) or
    ``ROOT/predictions.rank{R}.pt`` (each process of a multi-process run)."""
    name = PREDICTIONS_FILE if world_size <= 1 else f"predictions.rank{rank}.pt"
    return Path(root_dir) / name


class PredictionsWriter(BasePredictionWriter):
    """Saves ``{"chunks": [N, H, A]}`` (one sampled chunk per held-out observation, in the
    predict dataloader's order) with ``torch.save`` at the end of ``predict``. Never overwrites:
    an existing file is a ``FileExistsError`` before anything runs, and the file is opened
    exclusively (``"xb"``)."""

    def __init__(self) -> None:
        super().__init__(write_interval="epoch")

    @staticmethod
    def target(trainer: Any) -> Path:
        return predictions_path(trainer.default_root_dir, trainer.world_size, trainer.global_rank)

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        path = self.target(trainer)
        if stage == "predict" and path.exists():
            raise FileExistsError(f"{path}: exists; predict never overwrites a file")

    def write_on_epoch_end(
        self, trainer: Any, pl_module: Any, predictions: Any, batch_indices: Any
    ) -> None:
        chunks = torch.cat([p.detach().cpu() for p in predictions])
        path = self.target(trainer)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "xb") as handle:
            torch.save({"chunks": chunks}, handle)
