"""Readers and writers for labelled atomic structures (extxyz / anything ``ase.io.read`` reads,
ASE databases), with validation that names the file and the frame of bad input.

A labelled structure is an :class:`ase.Atoms` whose ``info[energy_key]`` holds the total energy
(eV) and ``arrays[forces_key]`` the forces (eV/Å, shape ``(n_atoms, 3)``). ASE turns plain
``energy``/``forces`` keys of an extxyz file into a ``SinglePointCalculator``; those are read
from the calculator. All structures returned by :func:`read_structures` are normalised to carry
``info["energy"]`` (float) and ``arrays["forces"]`` (float64, ``(n, 3)``) without a calculator.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from ase import Atoms

from atomistic_scaling.constants import DEFAULT_ENERGY_KEY, DEFAULT_FORCES_KEY

__all__ = [
    "AtomisticFormatError",
    "label_structure",
    "read_many",
    "read_structures",
    "write_extxyz",
]

DB_SUFFIXES = (".db", ".json")


class AtomisticFormatError(ValueError):
    """Bad input data: the message names the file and the frame (and the field)."""


def _energy_of(atoms: Atoms, key: str) -> float | None:
    if key in atoms.info:
        return atoms.info[key]
    if key == "energy" and atoms.calc is not None:
        try:
            return atoms.calc.get_potential_energy(atoms)
        except Exception:  # no energy stored in the calculator
            return None
    return None


def _forces_of(atoms: Atoms, key: str) -> np.ndarray | None:
    if key in atoms.arrays:
        return atoms.arrays[key]
    if key == "forces" and atoms.calc is not None:
        try:
            return atoms.calc.get_forces(atoms)
        except Exception:  # no forces stored in the calculator
            return None
    return None


def label_structure(
    atoms: Atoms, source: str, frame: int, energy_key: str, forces_key: str
) -> Atoms:
    """Validated copy of ``atoms`` with ``info["energy"]`` and ``arrays["forces"]``.

    Raises :class:`AtomisticFormatError` naming ``source`` and ``frame`` when the energy or the
    forces are missing, non-finite, or the forces do not have one row of 3 per atom.
    """
    where = f"{source}: frame {frame}"
    n = len(atoms)
    if n == 0:
        raise AtomisticFormatError(f"{where}: structure has no atoms")
    energy = _energy_of(atoms, energy_key)
    if energy is None:
        alt = "" if energy_key == "energy" else " (set --energy-key if it is named differently)"
        raise AtomisticFormatError(f"{where}: missing energy key {energy_key!r}{alt}")
    try:
        energy = float(energy)
    except (TypeError, ValueError):
        raise AtomisticFormatError(
            f"{where}: energy {energy_key!r} is not a number: {energy!r}"
        ) from None
    if not np.isfinite(energy):
        raise AtomisticFormatError(f"{where}: energy {energy_key!r} is not finite ({energy})")
    forces = _forces_of(atoms, forces_key)
    if forces is None:
        raise AtomisticFormatError(f"{where}: missing forces key {forces_key!r}")
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
    out = Atoms(numbers=atoms.numbers, positions=atoms.positions, cell=atoms.cell, pbc=atoms.pbc)
    out.info["energy"] = energy
    out.arrays["forces"] = forces
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
    try:
        frames = ase.io.read(str(path), index=index)
    except Exception as error:  # ASE raises many types on malformed text
        message = " ".join(str(error).split()) or type(error).__name__
        raise AtomisticFormatError(f"{path}: cannot parse: {message}") from None
    return frames if isinstance(frames, list) else [frames]


def read_structures(
    path: str | Path,
    energy_key: str = DEFAULT_ENERGY_KEY,
    forces_key: str = DEFAULT_FORCES_KEY,
    index: str = ":",
) -> list[Atoms]:
    """Reads every frame of ``path`` (extxyz, xyz, ASE trajectory, ``.db``) and validates it.

    When a frame lacks ``energy_key``/``forces_key`` and those are the defaults
    (``REF_energy``/``REF_forces``), the plain ``energy``/``forces`` (calculator) values are used.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    frames = _read_raw(path, index)
    if not frames:
        raise AtomisticFormatError(f"{path}: no structures")
    out = []
    for i, atoms in enumerate(frames):
        ekey, fkey = energy_key, forces_key
        if energy_key == DEFAULT_ENERGY_KEY and _energy_of(atoms, ekey) is None:
            ekey = "energy" if _energy_of(atoms, "energy") is not None else ekey
        if forces_key == DEFAULT_FORCES_KEY and _forces_of(atoms, fkey) is None:
            fkey = "forces" if _forces_of(atoms, "forces") is not None else fkey
        out.append(label_structure(atoms, str(path), i, ekey, fkey))
    return out


def read_many(
    paths: Sequence[str | Path],
    energy_key: str = DEFAULT_ENERGY_KEY,
    forces_key: str = DEFAULT_FORCES_KEY,
) -> list[Atoms]:
    """:func:`read_structures` over several files, concatenated in order."""
    out: list[Atoms] = []
    for path in paths:
        out.extend(read_structures(path, energy_key, forces_key))
    return out


def write_extxyz(
    path: str | Path,
    structures: Sequence[Atoms],
    energy_key: str = DEFAULT_ENERGY_KEY,
    forces_key: str = DEFAULT_FORCES_KEY,
) -> Path:
    """Writes labelled structures (``info["energy"]``, ``arrays["forces"]``) as extxyz with the
    labels under ``energy_key``/``forces_key``. Refuses to overwrite an existing file."""
    import ase.io

    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists; not overwriting it")
    frames = []
    for atoms in structures:
        copy = Atoms(
            numbers=atoms.numbers, positions=atoms.positions, cell=atoms.cell, pbc=atoms.pbc
        )
        copy.info[energy_key] = float(atoms.info["energy"])
        copy.arrays[forces_key] = np.asarray(atoms.arrays["forces"], dtype=np.float64)
        frames.append(copy)
    path.parent.mkdir(parents=True, exist_ok=True)
    ase.io.write(str(path), frames, format="extxyz")
    return path
