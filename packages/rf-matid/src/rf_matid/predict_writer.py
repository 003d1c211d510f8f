"""``rf-matid predict``: a Lightning callback that writes the predictions of the test split.

``rf-matid predict --config C --data.init_args.data_dir D --ckpt_path CKPT`` runs the model over
the data module's predict split (the test split) and writes ``predictions.csv`` into the run's
log folder (``trainer.log_dir``: the logger's version folder, or ``default_root_dir`` without a
logger), next to the saved ``config.yaml``. An earlier predict's ``predictions.csv`` there is
refused in one line naming it and ``--overwrite`` (before the model or data is loaded when the
run folder is ``default_root_dir``), and ``predict --overwrite`` replaces it: the rule of every
package's ``predict`` (:func:`iclr26_common.lightning.check_prediction_file`). Under DDP each
rank writes its own samples to ``predictions-rank<R>.csv``. Columns: ``file``
(relative to the data folder), ``predicted``, ``label`` and one ``prob_<class>`` per class in the
model's class order, as ``rf-matid predict-files`` writes them.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common.lightning import BatchPredictionWriter

__all__ = ["PREDICTIONS_FILE", "PredictionCSVWriter"]

PREDICTIONS_FILE = "predictions.csv"


class PredictionCSVWriter(BatchPredictionWriter):
    """Collects ``predict_step``'s ``probs`` [B, C] per batch and writes the CSV of the module
    docstring at the end of the predict epoch. ``path`` holds the file written."""

    def __init__(self, filename: str = PREDICTIONS_FILE, overwrite: bool = False) -> None:
        super().__init__(filename, overwrite=overwrite)  # rows: probs [C] by position

    def on_predict_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        datamodule = trainer.datamodule
        if not hasattr(datamodule, "sample_records"):
            raise TypeError(
                "rf-matid predict writes predictions of an RFMatIDDataModule; got "
                f"{type(datamodule).__name__}"
            )
        rows = dict(sorted(self.rows.items()))  # this rank's, in the split's order
        records = datamodule.sample_records("test")
        names = list(pl_module.hparams.get("class_names") or datamodule.class_names)
        table = io.StringIO(newline="")
        writer = csv.writer(table, lineterminator="\r\n")  # as predict-files writes
        writer.writerow(["file", "predicted", "label", *(f"prob_{name}" for name in names)])
        for index, row in rows.items():
            file, label = records[index]
            predicted = names[int(np.argmax(row))]
            writer.writerow([file, predicted, label, *(f"{p:.6g}" for p in row)])
        self.path = self.write_output(self.targets(trainer)[0], table.getvalue())
        print(f"wrote {self.path} ({len(rows)} spectra, {len(names)} classes)", flush=True)

    def targets(self, trainer: Any) -> list[Path]:
        """``predictions.csv`` in the run folder; under DDP each rank's own
        ``predictions-rank<R>.csv`` (no collective at the end of predict)."""
        path = self.target(trainer)
        if trainer.world_size > 1:
            path = path.with_name(f"{path.stem}-rank{trainer.global_rank}{path.suffix}")
        return [path]
