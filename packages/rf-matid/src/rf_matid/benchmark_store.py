"""What an ``rf-matid benchmark`` run keeps on disk: one JSON file per finished cell
(:class:`BenchmarkRow`, written the moment it finishes, read back by ``--resume``), the settings a
resume must match, and the miniature synthetic dataset ``--synth`` generates once and reuses
(split from :mod:`rf_matid.benchmark`, which re-exports these names).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from iclr26_common.cli_support import UsageError
from iclr26_common.outputs import check_resume_settings as check_settings
from iclr26_common.outputs import write_text

__all__ = [
    "CELLS_DIR",
    "MINIATURE_GRID",
    "SETTINGS_FILE",
    "SYNTH_MARKER",
    "BenchmarkRow",
    "cell_key",
    "cell_path",
    "check_resume_settings",
    "check_synthetic_dataset",
    "load_cells",
    "remove_earlier_outputs",
    "save_cell",
    "synthetic_dataset",
]


@dataclass
class BenchmarkRow:
    """One trained-and-tested configuration."""

    arch: str
    protocol: str
    split: str
    application_mode: str
    seed: int
    epochs: int
    n_train: int
    n_val: int
    n_test: int
    accuracy: float
    macro_f1: float
    val_accuracy: float
    train_seconds: float
    class_names: list[str] = field(default_factory=list)
    confusion: list[list[int]] = field(default_factory=list)
    #: The test spectra (files relative to the data folder, in test order) and whether the
    #: last epoch's model got each right (1/0): the per-item scores of a paired comparison.
    test_files: list[str] = field(default_factory=list)
    test_correct: list[int] = field(default_factory=list)


def cell_key(row: Any) -> tuple[str, str, str, int]:
    """(arch, protocol, split, seed): what identifies a benchmark cell."""
    return (row.arch, row.protocol, row.split, int(row.seed))


# Positions of the miniature synthetic dataset (`benchmark --synth`; the full grid of the
# `rf-matid.benchmark` experiment): every 300 mm (train and test distances for all three S2 mods),
# every angle (S3 needs 0..10), two repeated measurements per position (S1 is a random split over
# repeated measurements).
MINIATURE_GRID: dict[str, Any] = {
    "distances_mm": list(range(200, 2001, 300)),
    "angles_deg": list(range(0, 11)),
    "samples_per_position": 2,
}


#: Where ``rf-matid benchmark`` saves each finished cell, and the settings a resume must match.
CELLS_DIR = "cells"
SETTINGS_FILE = "benchmark-settings.json"


def cell_path(out_dir: Path, key: tuple[str, str, str, int]) -> Path:
    """``out_dir/cells/<arch>_<protocol>_<split>_seed<k>.json``."""
    arch, protocol, split, seed = key
    return out_dir / CELLS_DIR / f"{arch}_{protocol}_{split}_seed{seed}.json"


def save_cell(out_dir: Path, row: BenchmarkRow) -> Path:
    """Write one finished cell (atomically: a cell file is whole or absent)."""
    return write_text(cell_path(out_dir, cell_key(row)), json.dumps(asdict(row), indent=1))


def load_cells(out_dir: Path) -> dict[tuple[str, str, str, int], BenchmarkRow]:
    """The finished cells an interrupted run saved in ``out_dir/cells``, by :func:`cell_key`.
    A file that is not one is a one-line error naming it."""
    names = {f.name for f in fields(BenchmarkRow)}
    found: dict[tuple[str, str, str, int], BenchmarkRow] = {}
    for path in sorted((out_dir / CELLS_DIR).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            row = BenchmarkRow(**{k: v for k, v in data.items() if k in names})
        except (ValueError, TypeError) as error:
            raise UsageError(
                f"--resume: {path} is not a finished benchmark cell ({error}); delete it or pass "
                "--overwrite"
            ) from None
        found[cell_key(row)] = row
    return found


#: The option a user types for a settings key whose option is not ``--KEY``.
SETTINGS_OPTIONS = {"data": "--data/--synth", "batch_size": "--batch-size"}


def check_resume_settings(out_dir: Path, settings: dict[str, Any]) -> None:
    """A resumed run must continue the same benchmark: one line naming what differs
    (:func:`iclr26_common.outputs.check_resume_settings`, the rule every resumable command
    shares)."""
    check_settings(out_dir / SETTINGS_FILE, settings, "benchmark", options=SETTINGS_OPTIONS)


def remove_earlier_outputs(out_dir: Path) -> None:
    """``--overwrite``: remove what an earlier benchmark wrote (cells, tables, plots, settings);
    the synthetic data folder and files of others stay."""
    shutil.rmtree(out_dir / CELLS_DIR, ignore_errors=True)
    for name in ("benchmark.md", "benchmark.json", SETTINGS_FILE):
        (out_dir / name).unlink(missing_ok=True)
    for png in out_dir.glob("confusion_*.png"):
        png.unlink()


SYNTH_MARKER = ".rf-matid-benchmark-synth.json"


def _synthetic_state(data_dir: Path) -> str:
    """``"same"`` (a complete set of the current grid), ``"other"`` (a complete set of another
    grid or version), ``"unfinished"`` (anything else that is not empty) or ``"absent"``."""
    marker = data_dir / SYNTH_MARKER
    if marker.is_file():
        try:
            recorded = json.loads(marker.read_text())
        except ValueError:
            recorded = None
        return "same" if recorded == _synthetic_spec() else "other"
    if data_dir.exists() and any(data_dir.iterdir()):
        return "unfinished"
    return "absent"


def _synthetic_spec() -> dict[str, Any]:
    return {"grid": MINIATURE_GRID, "seed": 0, "write_time": False}


def check_synthetic_dataset(
    out_dir: Path, replace: bool = False, unfinished_ok: bool = False
) -> str:
    """What :func:`synthetic_dataset` will do with ``out_dir/data`` (its state), checked before
    any work: a set of another grid without ``replace``, or unfinished or foreign files without
    ``unfinished_ok``, is a ``FileExistsError`` naming the folder."""
    data_dir = out_dir / "data"
    state = _synthetic_state(data_dir)
    if state == "other" and not replace:
        raise FileExistsError(
            f"{data_dir} holds a synthetic dataset of another grid or version; pass "
            "--overwrite to regenerate it or choose another --out"
        )
    if state == "unfinished" and not unfinished_ok:
        raise FileExistsError(
            f"{data_dir} is not empty and was not completed by `rf-matid benchmark --synth` "
            "(an interrupted run or other files); delete it or choose another --out"
        )
    return state


def synthetic_dataset(out_dir: Path, replace: bool = False, unfinished_ok: bool = False) -> Path:
    """``out_dir/data``: the miniature synthetic set, generated once and reused on reruns.

    A marker written after a complete generation records the grid; a rerun with the same grid
    reuses the data. A synthetic set of another grid is regenerated with ``replace``
    (``--overwrite``), an error naming the folder without it; a generation an interrupted run
    left unfinished (no marker) is regenerated with ``unfinished_ok`` (``--resume`` of a folder
    this command marked partial), an error without it (:func:`check_synthetic_dataset`).
    """
    from rf_matid.synth_dataset import generate_dataset

    data_dir = out_dir / "data"
    state = check_synthetic_dataset(out_dir, replace, unfinished_ok)
    if state == "same":
        print(f"reusing the synthetic dataset in {data_dir}", flush=True)
        return data_dir
    if state in ("other", "unfinished"):
        shutil.rmtree(data_dir)
    generate_dataset(data_dir, **MINIATURE_GRID, seed=0, write_time=False)
    write_text(data_dir / SYNTH_MARKER, json.dumps(_synthetic_spec()))
    return data_dir
