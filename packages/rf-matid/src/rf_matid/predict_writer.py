"""``rf-matid predict``: a Lightning callback that writes the predictions of the test split.

``rf-matid predict --config C --data.init_args.data_dir D --ckpt_path CKPT`` runs the model over
the data module's predict split (the test split) and writes ``predictions.csv`` into the run's
log folder (``trainer.log_dir``: the logger's version folder, or ``default_root_dir`` without a
logger), next to the saved ``config.yaml``; when that file exists the next free name
``predictions-1.csv``, ... is taken, never an existing file. Under DDP each rank writes its own
samples to ``predictions-rank<R>.csv``. Columns: ``file`` (relative to the data folder),
``predicted``, ``label`` and one ``prob_<class>`` per class in the model's class order, as
``rf-matid predict-files`` writes them.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common.lightning import BatchPredictionWriter
from iclr26_common.outputs import FILE_MODE

__all__ = ["PredictionCSVWriter"]


class PredictionCSVWriter(BatchPredictionWriter):
    """Collects ``predict_step``'s ``probs`` [B, C] per batch and writes one CSV per rank at the
    end of the predict epoch (see the module docstring). ``path`` holds the last file written."""

    def __init__(self, filename: str = "predictions.csv") -> None:
        super().__init__(filename)
        self._indices: list[int] = []
        self._probs: list[np.ndarray] = []

    def on_predict_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._indices, self._probs = [], []

    def collected(self) -> int:
        return len(self._indices)

    def collect(self, prediction: Any, batch: Any, batch_indices: Sequence[int]) -> None:
        probs = prediction["probs"].detach().float().cpu().numpy()
        self._indices.extend(int(i) for i in batch_indices)
        self._probs.append(probs)

    def on_predict_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        from iclr26_common.lightning import free_config_path

        datamodule = trainer.datamodule
        if not hasattr(datamodule, "sample_records"):
            raise TypeError(
                "rf-matid predict writes predictions of an RFMatIDDataModule; got "
                f"{type(datamodule).__name__}"
            )
        records = datamodule.sample_records("test")
        names = list(pl_module.hparams.get("class_names") or datamodule.class_names)
        probs = np.concatenate(self._probs) if self._probs else np.zeros((0, len(names)))
        folder = Path(trainer.log_dir or trainer.default_root_dir)
        folder.mkdir(parents=True, exist_ok=True)
        filename = self.filename
        if trainer.world_size > 1:
            filename = f"{Path(filename).stem}-rank{trainer.global_rank}{Path(filename).suffix}"
        path = free_config_path(folder, filename)
        with path.open("x", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["file", "predicted", "label", *(f"prob_{name}" for name in names)])
            for index, row in zip(self._indices, probs, strict=True):
                file, label = records[index]
                predicted = names[int(np.argmax(row))]
                writer.writerow([file, predicted, label, *(f"{p:.6g}" for p in row)])
        os.chmod(path, FILE_MODE)  # an ordinary output file whatever the umask
        self.path = path
        print(f"wrote {path} ({len(probs)} spectra, {len(names)} classes)", flush=True)
