"""``robotics-remac predict``'s output: a Lightning prediction writer that saves the sampled
chunks to ``predictions.pt`` in the run's output folder (``--trainer.default_root_dir``)."""

from __future__ import annotations

import io
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
    predict dataloader's order) with ``torch.save`` at the end of ``predict``, atomically with
    mode 0644 (:func:`iclr26_common.outputs.write_bytes`). An existing file is refused before
    anything runs (:func:`iclr26_common.outputs.check_out_file`, one line) unless
    ``overwrite`` (``predict --overwrite``)."""

    def __init__(self, overwrite: bool = False) -> None:
        super().__init__(write_interval="epoch")
        self.overwrite = overwrite

    @staticmethod
    def target(trainer: Any) -> Path:
        return predictions_path(trainer.default_root_dir, trainer.world_size, trainer.global_rank)

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        from iclr26_common.outputs import check_out_file

        if stage == "predict":
            check_out_file(
                self.target(trainer), option="--trainer.default_root_dir", overwrite=self.overwrite
            )

    def write_on_epoch_end(
        self, trainer: Any, pl_module: Any, predictions: Any, batch_indices: Any
    ) -> None:
        from iclr26_common.outputs import write_bytes

        chunks = torch.cat([p.detach().cpu() for p in predictions])
        buffer = io.BytesIO()
        torch.save({"chunks": chunks}, buffer)
        write_bytes(self.target(trainer), buffer.getvalue())
