"""``pointcloud-pgllm predict``'s output: a Lightning prediction writer that saves the trained
classifier's answer for every cloud of the predict split (the data module's ``test`` split) to
``predictions.csv`` in the run folder.

The run folder is ``trainer.log_dir``, where ``fit`` saves its ``config.yaml``: the logger's
version folder, or ``--trainer.default_root_dir`` (by default the working directory) without a
logger. One row per cloud, in the split's order:

- ``row``: the cloud's position in the split (0-based),
- ``source``: the cloud's id as the data gives it (the file it was read from; HDF5 file and row;
  ``synthetic:<class>:seed<seed>:<i>`` for the in-memory synthetic clouds, unique per cloud),
- ``label``: its class name when the data is labelled (empty otherwise),
- ``predicted``: the class of highest probability,
- ``prob_<class>``: the softmax probability of every class (the model's ``class_names``).

An earlier predict's ``predictions.csv`` in the run folder is refused in one line naming it and
``--overwrite`` (before the model or data is loaded when the run folder is ``default_root_dir``),
and ``predict --overwrite`` replaces it: the rule of every package's ``predict``
(:func:`iclr26_common.lightning.check_prediction_file`). Under DDP every rank predicts its share,
rank 0 gathers them and writes the one file.
(Before issue 39 ``predict`` exited 0 and wrote nothing.)
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

# check_free: a deprecated re-export (predict uses check_prediction_file), removed in 0.7.0
from iclr26_common.lightning import BatchPredictionWriter, check_free

__all__ = ["PREDICTIONS_FILE", "PredictionsWriter", "check_free", "predictions_table"]

PREDICTIONS_FILE = "predictions.csv"


def predictions_table(
    rows: dict[int, list[float]],
    class_names: Sequence[str],
    sources: Sequence[str],
    labels: Sequence[int],
) -> str:
    """The CSV of the module docstring: ``rows`` maps a cloud's position in the split to its
    class probabilities; ``sources`` / ``labels`` (-1: none) are the split's, by position."""
    table = io.StringIO(newline="")
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(["row", "source", "label", "predicted", *(f"prob_{c}" for c in class_names)])
    for index in sorted(rows):
        probs = rows[index]
        label = int(labels[index]) if index < len(labels) else -1
        writer.writerow(
            [
                index,
                sources[index] if index < len(sources) else "",
                class_names[label] if 0 <= label < len(class_names) else "",
                class_names[max(range(len(probs)), key=probs.__getitem__)],
                *(f"{p:.6f}" for p in probs),
            ]
        )
    return table.getvalue()


class PredictionsWriter(BatchPredictionWriter):
    """Collects per-cloud probabilities batch by batch and writes ``predictions.csv`` (see the
    module docstring) at the end of the predict epoch. ``path`` holds the file written."""

    def __init__(self, filename: str = PREDICTIONS_FILE, overwrite: bool = False) -> None:
        super().__init__(filename, overwrite=overwrite)  # rows: probs [C] by position

    def rows_of(self, prediction: Any, batch: Any) -> Sequence[Any]:
        return prediction["probs"].detach().float().cpu().tolist()

    def write_rows(self, trainer: Any, pl_module: Any, rows: dict[int, Any]) -> None:
        # every rank's rows, on rank 0 (common's on_predict_epoch_end gathers, then a barrier)
        class_names = _class_names(pl_module, trainer, rows)
        clouds = getattr(trainer.datamodule, "_test", None)
        sources = list(getattr(clouds, "sources", []) or [])
        labels = [int(v) for v in getattr(clouds, "labels", [])]
        table = predictions_table(rows, class_names, sources, labels)
        self.path = self.write_output(self.target(trainer), table)
        print(f"wrote {self.path} ({len(rows)} clouds)", flush=True)


def _class_names(pl_module: Any, trainer: Any, rows: dict[int, list[float]]) -> list[str]:
    """The model's class names (linked from the data module by the CLI), else the data
    module's, else ``class_<i>``."""
    names = getattr(pl_module.hparams, "class_names", None) or getattr(
        trainer.datamodule, "class_names", None
    )
    width = len(next(iter(rows.values()))) if rows else 0
    if names and len(names) == width:
        return list(names)
    return [f"class_{i}" for i in range(width)]
