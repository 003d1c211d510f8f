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

It is read with ``torch.load(path, weights_only=True)``.

Next to it, ``predictions.extxyz`` (ASE extended XYZ, one frame per structure in the same order)
names every structure by its source and holds predicted and reference values side by side:

- ``info``: ``source_file`` (the data file as given, or ``synthetic:seed=S`` for generated
  data), ``frame`` (the structure's 0-based frame in that file, or its position in the generated
  list), ``split_index`` (= ``index`` above), ``ref_energy`` and ``pred_energy`` (eV),
  ``pred_stress`` (3 x 3, eV/Å³, conservative models only);
- ``arrays``: ``ref_forces`` and ``pred_forces`` (eV/Å); positions, cell and numbers as the
  model saw them (rotated when ``--data.random_orientation true``, forces rotated with them).

Predicting needs no labels: with ``--data.test_files`` ``predict`` reads only those files (no
training data; the per-element references are in the checkpoint), and a frame without a
reference energy or forces has no ``ref_energy`` / ``ref_forces`` (its ids and predictions are
written as for any other).

Read it with ``ase.io.read(path, ":")``. Both files follow the rule of every package's
``predict`` (:func:`iclr26_common.lightning.check_prediction_file`): an earlier predict's file in
the run folder is refused in one line naming it and ``--overwrite`` (before the model or data is
loaded when the run folder is ``default_root_dir``, else before the first batch), and
``predict --overwrite`` replaces it; each is written in one step (beside it, then renamed), mode
0644. Under DDP every rank predicts its share, rank 0 gathers them and writes the files.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from iclr26_common.lightning import BatchPredictionWriter, check_prediction_file
from iclr26_common.outputs import write_bytes

__all__ = [
    "PREDICTIONS_EXTXYZ",
    "PREDICTIONS_FILE",
    "PredictionsWriter",
    "check_free",
    "split_per_structure",
    "write_predictions",
    "write_predictions_extxyz",
]

PREDICTIONS_FILE = "predictions.pt"
PREDICTIONS_EXTXYZ = "predictions.extxyz"


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


def check_free(path: Path) -> Path:
    """Deprecated (removed in 0.8.0): :func:`iclr26_common.lightning.check_prediction_file`, the
    rule every package's ``predict`` keeps (one line naming the file and ``--overwrite``)."""
    warnings.warn(
        "atomistic_scaling.predictions.check_free is deprecated and removed in 0.8.0; use "
        "iclr26_common.lightning.check_prediction_file",
        DeprecationWarning,
        stacklevel=2,
    )
    return check_prediction_file(path)


class PredictionsWriter(BatchPredictionWriter):
    """Collects per-structure predictions batch by batch and writes ``predictions.pt`` (see the
    module docstring) at the end of the predict epoch. ``path`` holds the file written."""

    def __init__(self, filename: str = PREDICTIONS_FILE, overwrite: bool = False) -> None:
        # ``overwrite``: ``predict --overwrite`` (set by run_cli), replace earlier predictions
        super().__init__(filename, PREDICTIONS_EXTXYZ, overwrite=overwrite)

    def extxyz_target(self, trainer: Any) -> Path:
        """``predictions.extxyz`` next to :meth:`target`."""
        return self.target(trainer).with_name(PREDICTIONS_EXTXYZ)

    def batch_size(self, prediction: Any, batch: Any) -> int:
        return int(batch.num_graphs)

    def collect(self, prediction: Any, batch: Any, batch_indices: Sequence[int]) -> None:
        for record in split_per_structure(prediction, batch.ptr, batch_indices):
            self.rows[record["index"]] = record

    def write_rows(self, trainer: Any, pl_module: Any, rows: dict[int, Any]) -> None:
        # every rank's rows, on rank 0 (common's on_predict_epoch_end gathers, then a barrier)
        records = list(rows.values())  # in the split's order
        path = self.target(trainer)
        write_predictions(path, records, overwrite=self.overwrite)
        self.path = path
        print(f"wrote {path} ({len(records)} structures)", flush=True)
        structures = _predict_structures(trainer)
        if structures is not None:
            extxyz = write_predictions_extxyz(
                self.extxyz_target(trainer), records, structures, overwrite=self.overwrite
            )
            print(f"wrote {extxyz} (ids, predicted and reference values)", flush=True)


def _predict_structures(trainer: Any) -> list[Any] | None:
    """The ``ase.Atoms`` of the predict split (``AtomisticDataModule.predict_dataloader`` reads
    ``test_set``: the test structures, else the validation ones), or ``None`` without such a
    data module (then only ``predictions.pt`` is written)."""
    datamodule = getattr(trainer, "datamodule", None)
    test = getattr(datamodule, "test_structures", None)
    val = getattr(datamodule, "val_structures", None)
    return test or val or None


def write_predictions_extxyz(
    path: Path,
    records: list[dict[str, Any]],
    structures: Sequence[Any],
    *,
    overwrite: bool = False,
) -> Path:
    """``records`` (as :func:`write_predictions`) with the ``structures`` of the predict split
    (``records[i]["index"]`` is the position in it) as ``path``, the extxyz of the module
    docstring; never over an existing file unless ``overwrite`` (written beside it, then
    renamed), mode 0644."""
    import numpy as np

    from atomistic_scaling.io import FRAME_KEY, SOURCE_KEY, _bare_atoms, _write_frames

    check_prediction_file(path, overwrite=overwrite)
    unique = {record["index"]: record for record in records}
    frames = []
    for index in sorted(unique):
        record, atoms = unique[index], structures[index]
        forces = record["forces"].double().numpy()
        if forces.shape != (len(atoms), 3):
            raise RuntimeError(
                f"structure {index} of the predict split has {len(atoms)} atoms, its prediction "
                f"{len(forces)}"
            )
        out = _bare_atoms(atoms)
        out.info["source_file"] = str(atoms.info.get(SOURCE_KEY, "unknown"))
        out.info["frame"] = int(atoms.info.get(FRAME_KEY, -1))
        out.info["split_index"] = int(index)
        if "energy" in atoms.info:  # unlabelled input (predict on new structures): none
            out.info["ref_energy"] = float(atoms.info["energy"])
        out.info["pred_energy"] = float(record["energy"])
        if "stress" in record:
            out.info["pred_stress"] = record["stress"].double().numpy()
        if "forces" in atoms.arrays:
            out.arrays["ref_forces"] = np.asarray(atoms.arrays["forces"], dtype=np.float64)
        out.arrays["pred_forces"] = forces
        frames.append(out)
    return _write_frames(
        path, frames, check=lambda p: check_prediction_file(p, overwrite=overwrite)
    )


def write_predictions(
    path: Path, records: list[dict[str, Any]], *, overwrite: bool = False
) -> Path:
    """Save ``records`` (from :func:`split_per_structure`, any order; a structure predicted twice
    is kept once) as ``path`` in the module docstring's layout, never over an existing file
    unless ``overwrite`` (``predict --overwrite``); written in one step, mode 0644."""
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
    check_prediction_file(path, overwrite=overwrite)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return write_bytes(path, buffer.getvalue())  # atomic, mode 0644
