"""``robotics-remac predict``'s output: a Lightning prediction writer that saves the sampled
chunks, with the episode and frame each was sampled at and the split, to ``predictions.pt`` in
the run's output folder (``--trainer.default_root_dir``)."""

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
    """Saves ``{"chunks": [N, H, A], "episode_index": [N], "frame_index": [N], "split": str}``
    (one sampled chunk per observation, in the predict dataloader's order; chunk ``i`` was
    sampled at frame ``frame_index[i]`` of the dataset's episode ``episode_index[i]``; ``split``:
    ``val``, ``train`` or ``all``, the data module's ``predict_split``) with ``torch.save`` at the
    end of ``predict``, atomically with mode 0644 (:func:`iclr26_common.outputs.write_bytes`),
    and prints what it wrote. An existing file is refused before anything runs
    (:func:`iclr26_common.outputs.check_out_file`, one line) unless ``overwrite`` (``predict
    --overwrite``). The ids come from each batch's ``episode`` and ``frame``
    (:class:`robotics_remac.data.ChunkDataset`); a data module whose batches lack them writes
    the chunks alone."""

    def __init__(self, overwrite: bool = False) -> None:
        super().__init__(write_interval="epoch")
        self.overwrite = overwrite
        self._ids: dict[str, list[torch.Tensor]] = {"episode": [], "frame": []}

    def on_predict_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._ids = {"episode": [], "frame": []}

    def on_predict_batch_end(
        self,
        trainer: Any,
        pl_module: Any,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        for key, ids in self._ids.items():
            if isinstance(batch, dict) and key in batch:
                ids.append(batch[key].detach().cpu().long().reshape(-1))
        super().on_predict_batch_end(trainer, pl_module, outputs, batch, batch_idx, dataloader_idx)

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
        saved: dict[str, Any] = {"chunks": chunks}
        for key, ids in self._ids.items():
            if ids and sum(len(i) for i in ids) == len(chunks):
                saved[f"{key}_index"] = torch.cat(ids)
        split = getattr(trainer.datamodule, "predict_split", None)
        if split is not None:
            saved["split"] = str(split)
        buffer = io.BytesIO()
        torch.save(saved, buffer)
        target = write_bytes(self.target(trainer), buffer.getvalue())
        episodes = len(torch.unique(saved["episode_index"])) if "episode_index" in saved else None
        print(
            f"wrote {target} ({len(chunks)} chunks"
            + (f" of {episodes} episodes" if episodes is not None else "")
            + (f", {split} split" if split is not None else "")
            + ")"
        )
