"""``robotics-remac predict``'s output: a Lightning prediction writer that saves the sampled
chunks, with the episode and frame each was sampled at and the split, to ``predictions.pt`` in
the run's output folder (``--trainer.default_root_dir``). An earlier predict's file there is
refused in one line naming it and ``--overwrite``, and ``predict --overwrite`` replaces it: the
rule of every package's ``predict`` (:func:`iclr26_common.lightning.check_prediction_file`)."""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from iclr26_common.lightning import BatchPredictionWriter

__all__ = ["PREDICTIONS_FILE", "PredictionsWriter", "predictions_path"]

PREDICTIONS_FILE = "predictions.pt"
#: Lightning's warning for loaders without its index-tracking batch sampler; this writer takes
#: each row's position from the batch's ``index`` instead, so the warning says nothing useful.
BATCH_INDICES_WARNING = r"Couldn't infer the batch indices fetched from your dataloader"


def predictions_path(root_dir: str | Path, world_size: int = 1, rank: int = 0) -> Path:
    """Where ``predict`` writes: ``ROOT/predictions.pt``, also under DDP (rank 0 writes every
    rank's chunks into it since issue 38). ``world_size`` and ``rank`` are accepted for callers
    of 0.5 and ignored (0.5 wrote one ``predictions.rank{R}.pt`` per process)."""
    del world_size, rank
    return Path(root_dir) / PREDICTIONS_FILE


class PredictionsWriter(BatchPredictionWriter):
    """Saves ``{"chunks": [N, H, A], "episode_index": [N], "frame_index": [N], "split": str}``
    (one sampled chunk per observation, in the predict split's order; chunk ``i`` was sampled at
    frame ``frame_index[i]`` of the dataset's episode ``episode_index[i]``; ``split``: ``val``,
    ``train`` or ``all``, the data module's ``predict_split``) with ``torch.save`` at the end of
    ``predict``, atomically with mode 0644, and prints what it wrote when ``predict`` ends. An
    existing file is refused before the first batch unless ``overwrite`` (``predict
    --overwrite``), the workspace rule (:class:`iclr26_common.lightning.BatchPredictionWriter`). The ids come from each
    batch's ``episode`` and ``frame`` (:class:`robotics_remac.data.ChunkDataset`); a data module
    whose batches lack them writes the chunks alone.

    Under DDP each rank samples its share of the split and rank 0 writes the one file (common's
    :meth:`~iclr26_common.lightning.BatchPredictionWriter.on_predict_epoch_end` gathers the rows,
    :meth:`write_rows` writes them). The loaders hand the dataset a whole batch of indices
    (``batch_size=None`` over a ``BatchSampler``), so Lightning gives no ``batch_indices``: each
    row's position in the split is the batch's ``index`` (:class:`~robotics_remac.data.
    ChunkDataset`), which the distributed sampler's share keeps; a batch without it (another
    data module, one process) is numbered in the order it comes. Lightning's "Couldn't infer
    the batch indices" warning is therefore silenced while ``predict`` runs (that one message,
    restored at teardown), and the "wrote ..." line is printed at teardown, after the progress
    bar has ended (review of issue 38)."""

    def __init__(self, filename: str = PREDICTIONS_FILE, overwrite: bool = False) -> None:
        super().__init__(filename, overwrite=overwrite)  # rows: (chunk, episode, frame)
        self._quiet: Any = None  # the warnings filter scope of one predict
        self._wrote: str | None = None  # the "wrote ..." line, printed at teardown

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        if stage == "predict" and self._quiet is None:
            self._wrote = None
            self._quiet = warnings.catch_warnings()
            self._quiet.__enter__()
            warnings.filterwarnings("ignore", message=BATCH_INDICES_WARNING)

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        try:
            if stage == "predict" and self._wrote is not None:
                # after the progress bar: TQDM's closed at predict end, Rich's stops at its own
                # teardown, which comes after this writer's (common puts the writer first), so
                # stop it now (stopping it again there does nothing)
                bar = getattr(trainer, "progress_bar_callback", None)
                if bar is not None:
                    bar.teardown(trainer, pl_module, stage)
                print(self._wrote, flush=True)
                self._wrote = None
        finally:
            if stage == "predict" and self._quiet is not None:
                self._quiet.__exit__(None, None, None)
                self._quiet = None
            super().teardown(trainer, pl_module, stage)

    def target(self, trainer: Any) -> Path:
        """``predictions.pt`` in ``--trainer.default_root_dir`` (with a logger too: remac's run
        folder is the root, known before the model is built; no collective, safe on rank 0)."""
        return predictions_path(trainer.default_root_dir)

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
        if isinstance(batch, dict) and "index" in batch:  # the rows' positions in the split
            batch_indices = batch["index"].detach().cpu().reshape(-1).tolist()
        elif trainer.world_size > 1 and not batch_indices:
            raise RuntimeError(
                "predict under DDP needs each row's position: a batch without 'index' and no "
                "sampler indices would number every rank's rows from 0"
            )
        super().write_on_batch_end(
            trainer, pl_module, prediction, batch_indices, batch, batch_idx, dataloader_idx
        )

    def write_rows(self, trainer: Any, pl_module: Any, rows: dict[int, Any]) -> None:
        # every rank's rows by position, on rank 0 (common gathers them, then a barrier)
        ordered = list(rows.values())
        saved: dict[str, Any] = {"chunks": torch.stack([row[0] for row in ordered])}
        for position, key in ((1, "episode_index"), (2, "frame_index")):
            if ordered and all(row[position] is not None for row in ordered):
                saved[key] = torch.stack([row[position] for row in ordered])
        split = getattr(getattr(trainer, "datamodule", None), "predict_split", None)
        if split is not None:
            saved["split"] = str(split)
        buffer = io.BytesIO()
        torch.save(saved, buffer)
        self.path = target = self.write_output(self.target(trainer), buffer.getvalue())
        chunks = saved["chunks"]
        episodes = len(torch.unique(saved["episode_index"])) if "episode_index" in saved else None
        self._wrote = (
            f"wrote {target} ({len(chunks)} chunks"
            + (f" of {episodes} episodes" if episodes is not None else "")
            + (f", {split} split" if split is not None else "")
            + ")"
        )
