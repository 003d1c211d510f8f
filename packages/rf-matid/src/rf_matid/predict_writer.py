"""``rf-matid predict``: a Lightning callback that writes the predictions of the test split.

``rf-matid predict --config C --data.init_args.data_dir D --ckpt_path CKPT`` runs the model over
the data module's predict split (the test split) and writes ``predictions.csv`` into the run's
log folder (``trainer.log_dir``: the logger's version folder, or ``default_root_dir`` without a
logger), next to the saved ``config.yaml``. An earlier predict's ``predictions.csv`` there is
refused in one line naming it and ``--overwrite`` (before the model or data is loaded when the
run folder is ``default_root_dir``), and ``predict --overwrite`` replaces it: the rule of every
package's ``predict`` (:func:`iclr26_common.lightning.check_prediction_file`). Under DDP
(``--trainer.strategy ddp --trainer.devices N``) each rank predicts its share of the split and
rank 0 writes the one ``predictions.csv`` with every sample once, in the split's order
(:class:`iclr26_common.lightning.BatchPredictionWriter`); until 0.7.0 each rank wrote its
own ``predictions-rank<R>.csv``. Columns: ``file`` (relative to the data folder), ``predicted``,
``label`` and one ``prob_<class>`` per class in the model's class order, as ``rf-matid
predict-files`` writes them.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np

from iclr26_common.lightning import BatchPredictionWriter

__all__ = ["PREDICTIONS_FILE", "PredictionCSVWriter"]

PREDICTIONS_FILE = "predictions.csv"


class PredictionCSVWriter(BatchPredictionWriter):
    """Collects ``predict_step``'s ``probs`` [B, C] per batch and writes the CSV of the module
    docstring at the end of the predict epoch (rank 0, with every rank's rows). ``path`` holds
    the file written."""

    def __init__(self, filename: str = PREDICTIONS_FILE, overwrite: bool = False) -> None:
        super().__init__(filename, overwrite=overwrite)  # rows: probs [C] by position

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        datamodule = trainer.datamodule
        if stage == "predict" and not hasattr(datamodule, "sample_records"):
            raise TypeError(  # on every rank, before the first batch
                "rf-matid predict writes predictions of an RFMatIDDataModule; got "
                f"{type(datamodule).__name__}"
            )

    def write_rows(self, trainer: Any, pl_module: Any, rows: dict[int, Any]) -> None:
        records = trainer.datamodule.sample_records("test")
        names = list(pl_module.hparams.get("class_names") or trainer.datamodule.class_names)
        table = io.StringIO(newline="")
        writer = csv.writer(table, lineterminator="\r\n")  # as predict-files writes
        writer.writerow(["file", "predicted", "label", *(f"prob_{name}" for name in names)])
        for index, row in rows.items():
            file, label = records[index]
            predicted = names[int(np.argmax(row))]
            writer.writerow([file, predicted, label, *(f"{p:.6g}" for p in row)])
        self.path = self.write_output(self.target(trainer), table.getvalue())
        print(f"wrote {self.path} ({len(rows)} spectra, {len(names)} classes)", flush=True)
