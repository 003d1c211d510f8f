"""``robotics-remac predict``'s output: a Lightning prediction writer that saves the sampled
chunks, with the episode and frame each was sampled at and the split, to ``predictions.pt`` in
the run's output folder (``--trainer.default_root_dir``). An earlier predict's file there is
refused in one line naming it and ``--overwrite``, and ``predict --overwrite`` replaces it: the
rule of every package's ``predict`` (:func:`iclr26_common.lightning.check_prediction_file`)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from iclr26_common.lightning import BatchPredictionWriter

__all__ = ["PREDICTIONS_FILE", "PredictionsWriter", "predictions_path"]

PREDICTIONS_FILE = "predictions.pt"


def predictions_path(root_dir: str | Path, world_size: int = 1, rank: int = 0) -> Path:
    """Where ``predict`` writes: ``ROOT/predictions.pt`` (one process) or
    ``ROOT/predictions.rank{R}.pt`` (each process of a multi-process run)."""
    name = PREDICTIONS_FILE if world_size <= 1 else f"predictions.rank{rank}.pt"
    return Path(root_dir) / name


class PredictionsWriter(BatchPredictionWriter):
    """Saves ``{"chunks": [N, H, A], "episode_index": [N], "frame_index": [N], "split": str}``
    (one sampled chunk per observation, in the predict dataloader's order; chunk ``i`` was
    sampled at frame ``frame_index[i]`` of the dataset's episode ``episode_index[i]``; ``split``:
    ``val``, ``train`` or ``all``, the data module's ``predict_split``) with ``torch.save`` at the
    end of ``predict``, atomically with mode 0644, and prints what it wrote. An existing file is
    refused before the first batch unless ``overwrite`` (``predict --overwrite``), the workspace
    rule (:class:`iclr26_common.lightning.BatchPredictionWriter`). The ids come from each
    batch's ``episode`` and ``frame`` (:class:`robotics_remac.data.ChunkDataset`); a data module
    whose batches lack them writes the chunks alone."""

    def __init__(self, filename: str = PREDICTIONS_FILE, overwrite: bool = False) -> None:
        super().__init__(filename, overwrite=overwrite)  # rows: (chunk, episode, frame)

    def target(self, trainer: Any) -> Path:
        """``predictions.pt`` in ``--trainer.default_root_dir`` (each process of a
        multi-process run its own ``predictions.rank{R}.pt``)."""
        return predictions_path(trainer.default_root_dir, trainer.world_size, trainer.global_rank)

    def targets(self, trainer: Any) -> list[Path]:
        return [self.target(trainer)]

    def batch_size(self, prediction: Any, batch: Any) -> int:
        return len(prediction)

    def rows_of(self, prediction: Any, batch: Any) -> Sequence[Any]:
        chunks = prediction.detach().cpu()
        ids = [
            batch[key].detach().cpu().long().reshape(-1)
            if isinstance(batch, dict) and key in batch
            else None
            for key in ("episode", "frame")
        ]
        return [
            (chunks[i], *(None if v is None else v[i] for v in ids)) for i in range(len(chunks))
        ]

    def on_predict_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        rows = [row for _, row in sorted(self.rows.items())]  # this process's, in order
        saved: dict[str, Any] = {"chunks": torch.stack([row[0] for row in rows])}
        for position, key in ((1, "episode_index"), (2, "frame_index")):
            if rows and all(row[position] is not None for row in rows):
                saved[key] = torch.stack([row[position] for row in rows])
        split = getattr(trainer.datamodule, "predict_split", None)
        if split is not None:
            saved["split"] = str(split)
        buffer = io.BytesIO()
        torch.save(saved, buffer)
        self.path = target = self.write_output(self.target(trainer), buffer.getvalue())
        chunks = saved["chunks"]
        episodes = len(torch.unique(saved["episode_index"])) if "episode_index" in saved else None
        print(
            f"wrote {target} ({len(chunks)} chunks"
            + (f" of {episodes} episodes" if episodes is not None else "")
            + (f", {split} split" if split is not None else "")
            + ")"
        )
