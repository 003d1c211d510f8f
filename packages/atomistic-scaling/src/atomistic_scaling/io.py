"""Readers and writers for labelled atomic structures (extxyz / anything ``ase.io.read`` reads,
ASE databases), with validation that names the file and the frame of bad input.

A labelled structure is an :class:`ase.Atoms` whose ``info[energy_key]`` holds the total energy
(eV) and ``arrays[forces_key]`` the forces (eV/Å, shape ``(n_atoms, 3)``). ASE turns plain
``energy``/``forces`` keys of an extxyz file into a ``SinglePointCalculator``; those are read
from the calculator. All structures returned by :func:`read_structures` are normalised to carry
``info["energy"]`` (float) and ``arrays["forces"]`` (float64, ``(n, 3)``) without a calculator.
The fallback from the default ``REF_`` keys to the plain ones is decided per file, never per
frame. Frames with unsupported atomic numbers, a missing or singular periodic cell, or atoms
closer than ``min_distance`` are refused.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from ase import Atoms

from atomistic_scaling.constants import (
    DEFAULT_ENERGY_KEY,
    DEFAULT_FORCES_KEY,
    DEFAULT_MIN_DISTANCE,
    MAX_Z,
)
from atomistic_scaling.graph import cell_problem, closest_pair

__all__ = [
    "FRAME_KEY",
    "SOURCE_KEY",
    "AtomisticFormatError",
    "LabelFallbackWarning",
    "label_structure",
    "read_many",
    "read_structures",
    "write_extxyz",
]

DB_SUFFIXES = (".db", ".json")
#: ``info`` keys of every structure read here: the file as the user named it and the frame's
#: position in it (0-based), so that outputs (``predict``'s ``predictions.extxyz``) name each
#: structure by its source. Generated structures carry ``synthetic:seed=S`` and their position
#: in the generated list.
SOURCE_KEY = "source_file"
FRAME_KEY = "frame"


class AtomisticFormatError(ValueError):
    """Bad input data: the message names the file and the frame (and the field)."""


class LabelFallbackWarning(UserWarning):
    """A file without the default ``REF_`` label keys is read with its plain energy/forces."""


#: The calculator's getter of each plain label (what ``ase.io.read`` attaches to a frame).
_CALC_GETTERS = {"energy": "get_potential_energy", "forces": "get_forces"}


def _label_of(atoms: Atoms, store: dict[str, Any], key: str, plain: str) -> Any:
    """``store[key]`` (``atoms.info`` or ``atoms.arrays``), else for the ``plain`` key
    (``energy``/``forces``) what the attached calculator holds; ``None`` where neither has it."""
    if key in store:
        return store[key]
    if key == plain and atoms.calc is not None:
        try:
            return getattr(atoms.calc, _CALC_GETTERS[plain])(atoms)
        except Exception:  # the calculator holds no such value
            return None
    return None


def _energy_of(atoms: Atoms, key: str) -> float | None:
    return _label_of(atoms, atoms.info, key, "energy")


def _forces_of(atoms: Atoms, key: str) -> np.ndarray | None:
    return _label_of(atoms, atoms.arrays, key, "forces")


#: How the CLI names the label keys (the reader is shared by ``fit`` and ``sweep``).
KEY_FLAGS = {
    "energy": "--data.energy_key (fit/validate/test/predict) or --energy_key (sweep)",
    "forces": "--data.forces_key (fit/validate/test/predict) or --forces_key (sweep)",
    "min_distance": "--data.min_distance (fit/validate/test/predict) or --min_distance (sweep)",
}


def label_structure(
    atoms: Atoms,
    source: str,
    frame: int,
    energy_key: str,
    forces_key: str,
    min_distance: float = DEFAULT_MIN_DISTANCE,
    *,
    require_labels: bool = True,
) -> Atoms:
    """Validated copy of ``atoms`` with ``info["energy"]`` and ``arrays["forces"]``, and its
    ids ``info[SOURCE_KEY] = source``, ``info[FRAME_KEY] = frame``.

    Raises :class:`AtomisticFormatError` naming ``source`` and ``frame`` when the energy or the
    forces are missing, non-finite, or the forces do not have one row of 3 per atom; when an
    atomic number is outside 1..MAX_Z-1; when a periodic cell is missing or singular; and when
    two atoms are closer than ``min_distance`` Å (0 disables that check). With
    ``require_labels=False`` (``predict`` on new structures) a missing energy or forces is
    left out of the copy instead (a label that is present is still checked).
    """
    where = f"{source}: frame {frame}"
    n = len(atoms)
    if n == 0:
        raise AtomisticFormatError(f"{where}: structure has no atoms")
    bad_z = sorted({int(z) for z in atoms.numbers if not 0 < z < MAX_Z})
    if bad_z:
        raise AtomisticFormatError(
            f"{where}: atomic numbers {bad_z} are not supported (1..{MAX_Z - 1})"
        )
    energy = _energy_of(atoms, energy_key)
    if energy is None and require_labels:
        raise AtomisticFormatError(
            f"{where}: missing energy key {energy_key!r} (name it with {KEY_FLAGS['energy']})"
        )
    if energy is not None:
        try:
            energy = float(energy)
        except (TypeError, ValueError):
            raise AtomisticFormatError(
                f"{where}: energy {energy_key!r} is not a number: {energy!r}"
            ) from None
        if not np.isfinite(energy):
            raise AtomisticFormatError(f"{where}: energy {energy_key!r} is not finite ({energy})")
    forces = _forces_of(atoms, forces_key)
    if forces is None and require_labels:
        raise AtomisticFormatError(
            f"{where}: missing forces key {forces_key!r} (name it with {KEY_FLAGS['forces']})"
        )
    if forces is not None:
        forces = np.asarray(forces, dtype=np.float64)
        if forces.shape != (n, 3):
            raise AtomisticFormatError(
                f"{where}: forces {forces_key!r} have shape {forces.shape}, expected ({n}, 3) "
                f"for {n} atoms"
            )
        if not np.all(np.isfinite(forces)):
            raise AtomisticFormatError(f"{where}: forces {forces_key!r} contain NaN or inf")
    if not np.all(np.isfinite(atoms.positions)):
        raise AtomisticFormatError(f"{where}: positions contain NaN or inf")
    problem = cell_problem(np.asarray(atoms.cell[:], dtype=np.float64), atoms.pbc)
    if problem is not None:
        raise AtomisticFormatError(f"{where}: {problem}")
    out = Atoms(numbers=atoms.numbers, positions=atoms.positions, cell=atoms.cell, pbc=atoms.pbc)
    if min_distance > 0:
        pair = closest_pair(out, min_distance)
        if pair is not None:
            i, j, dist = pair
            raise AtomisticFormatError(
                f"{where}: atoms {i} and {j} are {dist:.3g} Å apart, closer than min_distance="
                f"{min_distance:g} Å (a unit or cell error?; to accept, lower it with "
                f"{KEY_FLAGS['min_distance']}; 0 turns the check off)"
            )
    if energy is not None:
        out.info["energy"] = energy
    if forces is not None:
        out.arrays["forces"] = forces
    out.info[SOURCE_KEY] = str(source)
    out.info[FRAME_KEY] = int(frame)
    return out


def _read_raw(path: Path, index: str) -> list[Atoms]:
    import ase.io

    if path.suffix in DB_SUFFIXES:
        import ase.db

        try:
            with ase.db.connect(str(path)) as db:
                rows = list(db.select())
        except Exception as error:
            raise AtomisticFormatError(f"{path}: not a readable ASE database: {error}") from None
        frames = []
        for row in rows:
            atoms = row.toatoms(add_additional_information=True)
            data = row.get("data") or {}
            for key, value in dict(row.key_value_pairs).items():
                atoms.info.setdefault(key, value)
            for key, value in data.items():
                if np.ndim(value) == 2 and len(value) == len(atoms):
                    atoms.arrays[key] = np.asarray(value)
                else:
                    atoms.info.setdefault(key, value)
            frames.append(atoms)
        return frames
    frames: list[Atoms] = []
    try:  # frame by frame, so that a parse error names the frame it happened in
        for atoms in ase.io.iread(str(path), index=index):
            frames.append(atoms)
    except Exception as error:  # ASE raises many types on malformed text
        message = " ".join(str(error).split()) or type(error).__name__
        raise AtomisticFormatError(
            f"{path}: frame {len(frames)}: cannot parse: {message}"
        ) from None
    return frames


def _label_keys(
    frames: list[Atoms], path: Path, energy_key: str, forces_key: str
) -> tuple[str, str]:
    """The keys to read from every frame of one file. A default key (``REF_energy`` /
    ``REF_forces``) that no frame has falls back to the plain ``energy``/``forces`` for the whole
    file, with a warning; a file where only some frames have the default key is an error, and
    so is a file whose energy would come from the ``REF_`` key and forces from the plain one (or
    the reverse): one file never mixes label sources. Keys named explicitly are used as given."""
    keys, fallen = [], []
    for key, default, plain, get in (
        (energy_key, DEFAULT_ENERGY_KEY, "energy", _energy_of),
        (forces_key, DEFAULT_FORCES_KEY, "forces", _forces_of),
    ):
        if key != default:
            keys.append(key)
            continue
        has = [get(atoms, key) is not None for atoms in frames]
        if all(has) or not any(get(atoms, plain) is not None for atoms in frames):
            keys.append(key)  # every frame has it, or nothing to fall back to (error per frame)
        elif not any(has):
            keys.append(plain)
            fallen.append((key, plain))
        else:
            first = has.index(False)
            raise AtomisticFormatError(
                f"{path}: frame {first}: missing {plain} key {key!r} that other frames of this "
                f"file have (refusing to mix it with the plain {plain!r} labels)"
            )
    if len(fallen) == 1 and (energy_key, forces_key) == (DEFAULT_ENERGY_KEY, DEFAULT_FORCES_KEY):
        (key, plain), kept = fallen[0], next(k for k in keys if k != fallen[0][1])
        raise AtomisticFormatError(
            f"{path}: the frames have {kept!r} but no {key!r}: refusing to read one label from "
            f"{kept!r} and the other from the plain {plain!r} (name both keys: "
            f"{KEY_FLAGS['energy']}; {KEY_FLAGS['forces']})"
        )
    if fallen:
        warnings.warn(
            f"{path}: no frame has {' / '.join(repr(k) for k, _ in fallen)}; reading the plain "
            f"{' / '.join(repr(p) for _, p in fallen)} of every frame",
            LabelFallbackWarning,
            stacklevel=3,
        )
    return keys[0], keys[1]


def read_structures(
    path: str | Path,
    energy_key: str = DEFAULT_ENERGY_KEY,
    forces_key: str = DEFAULT_FORCES_KEY,
    index: str = ":",
    min_distance: float = DEFAULT_MIN_DISTANCE,
    *,
    require_labels: bool = True,
) -> list[Atoms]:
    """Reads every frame of ``path`` (extxyz, xyz, ASE trajectory, ``.db``) and validates it
    (see :func:`label_structure`; ``require_labels=False``: frames without energy or forces are
    read without them, as ``predict`` on new structures does).

    When no frame has ``energy_key``/``forces_key`` and those are the defaults
    (``REF_energy``/``REF_forces``), the plain ``energy``/``forces`` (calculator) values of the
    whole file are used, with a :class:`LabelFallbackWarning`; a file in which only some frames
    carry the default key is refused.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    frames = _read_raw(path, index)
    if not frames:
        raise AtomisticFormatError(f"{path}: no structures")
    ekey, fkey = _label_keys(frames, path, energy_key, forces_key)
    return [
        label_structure(
            atoms, str(path), i, ekey, fkey, min_distance, require_labels=require_labels
        )
        for i, atoms in enumerate(frames)
    ]


def read_many(
    paths: Sequence[str | Path],
    energy_key: str = DEFAULT_ENERGY_KEY,
    forces_key: str = DEFAULT_FORCES_KEY,
    min_distance: float = DEFAULT_MIN_DISTANCE,
    *,
    require_labels: bool = True,
) -> list[Atoms]:
    """:func:`read_structures` over several files, concatenated in order."""
    out: list[Atoms] = []
    for path in paths:
        out.extend(
            read_structures(
                path,
                energy_key,
                forces_key,
                min_distance=min_distance,
                require_labels=require_labels,
            )
        )
    return out


def write_extxyz(
    path: str | Path,
    structures: Sequence[Atoms],
    energy_key: str = DEFAULT_ENERGY_KEY,
    forces_key: str = DEFAULT_FORCES_KEY,
    overwrite: bool = False,
) -> Path:
    """Writes labelled structures (``info["energy"]``, ``arrays["forces"]``) as extxyz with the
    labels under ``energy_key``/``forces_key``. Refuses to overwrite an existing file unless
    ``overwrite``; the file appears in one step (written beside it, then renamed), mode 0644."""
    path = Path(path)
    if path.exists() and not overwrite:
        # the wording of iclr26_common.outputs.check_out_file (no option to name in the API)
        raise FileExistsError(f"{path}: exists; pass --overwrite to replace it")
    frames = []
    for atoms in structures:
        copy = _bare_atoms(atoms)
        copy.info[energy_key] = float(atoms.info["energy"])
        copy.arrays[forces_key] = np.asarray(atoms.arrays["forces"], dtype=np.float64)
        frames.append(copy)
    return _write_frames(path, frames)


def _bare_atoms(atoms: Atoms) -> Atoms:
    """A new :class:`Atoms` with only the numbers, positions, cell and pbc of ``atoms`` (no
    labels, no calculator)."""
    return Atoms(numbers=atoms.numbers, positions=atoms.positions, cell=atoms.cell, pbc=atoms.pbc)


def _write_frames(
    path: Path, frames: list[Atoms], check: Callable[[Path], object] | None = None
) -> Path:
    """``frames`` as the extxyz file ``path``, in one step (formatted in memory, then
    :func:`iclr26_common.outputs.write_text`: written beside it and renamed), mode 0644;
    ``check(path)``, where given, runs just before the file is written."""
    import io

    import ase.io

    from iclr26_common.outputs import write_text

    buffer = io.StringIO()
    ase.io.write(buffer, frames, format="extxyz")
    if check is not None:
        check(path)
    return write_text(path, buffer.getvalue())
