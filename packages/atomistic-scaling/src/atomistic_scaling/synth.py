"""Synthetic labelled structures from ASE's EMT potential (Al, Cu, Ag, Au, Ni, Pd, Pt).

Configurations: rattled and strained fcc supercells (optionally binary alloys), cells with
vacancies, and Langevin MD snapshots at 300-1500 K, each in its own random orientation. Each
is labelled with EMT energy and forces and can be written as extxyz (``atomistic-scaling
synth``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from ase import Atoms, units
from ase.build import bulk
from ase.calculators.emt import EMT

from atomistic_scaling.constants import EMT_ELEMENTS
from atomistic_scaling.io import write_extxyz
from atomistic_scaling.symmetry import randomly_orient

__all__ = ["KINDS", "generate_structures", "write_synthetic"]

KINDS = ("rattle", "strain", "vacancy", "md")
#: Supercell repeats drawn for each structure (2x2x2 fcc conventional cubic = 32 atoms is too
#: slow on CPU; primitive-cell repeats give 8-27 atoms).
REPEATS = ((2, 2, 2), (2, 2, 3), (3, 3, 2), (3, 3, 3))
#: Langevin MD (4 fs steps, from Maxwell-Boltzmann velocities): warm-up steps, then
#: ``MD_SNAPSHOTS`` snapshots ``MD_STRIDE`` steps apart from one trajectory.
MD_WARMUP = 4
MD_STRIDE = 2
MD_SNAPSHOTS = 4


def _base_cell(rng: np.random.Generator, elements: Sequence[str]) -> Atoms:
    element = str(rng.choice(elements))
    atoms = bulk(element, "fcc", cubic=False)
    atoms = atoms.repeat(REPEATS[int(rng.integers(len(REPEATS)))])
    if len(elements) > 1 and rng.random() < 0.5:  # binary alloy
        other = str(rng.choice([e for e in elements if e != element]))
        mask = rng.random(len(atoms)) < rng.uniform(0.1, 0.5)
        symbols = atoms.get_chemical_symbols()
        atoms.set_chemical_symbols([other if m else s for s, m in zip(symbols, mask, strict=True)])
    return atoms


def _label(atoms: Atoms) -> Atoms:
    if not isinstance(atoms.calc, EMT):
        atoms.calc = EMT()  # an EMT calculator already attached reuses its cached results
    energy = float(atoms.get_potential_energy())
    forces = np.array(atoms.get_forces(), dtype=np.float64)
    out = Atoms(numbers=atoms.numbers, positions=atoms.positions, cell=atoms.cell, pbc=atoms.pbc)
    out.info["energy"] = energy
    out.arrays["forces"] = forces
    return out


def _md_snapshots(atoms: Atoms, rng: np.random.Generator, count: int) -> list[Atoms]:
    from ase.md.langevin import Langevin
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution

    temperature = float(rng.uniform(300.0, 1500.0))
    atoms.calc = EMT()
    MaxwellBoltzmannDistribution(atoms, temperature_K=temperature, rng=rng)
    dyn = Langevin(
        atoms, 4.0 * units.fs, temperature_K=temperature, friction=0.05, fixcm=False, rng=rng
    )
    dyn.run(MD_WARMUP)
    snapshots = []
    for _ in range(count):
        dyn.run(MD_STRIDE)
        snapshots.append(_label(atoms))
    return snapshots


def _make(kind: str, rng: np.random.Generator, elements: Sequence[str], count: int) -> list[Atoms]:
    atoms = _base_cell(rng, elements)
    if kind in ("strain", "vacancy", "md"):
        strain = rng.normal(0.0, 0.02, size=(3, 3))
        strain = 0.5 * (strain + strain.T)
        atoms.set_cell(atoms.cell[:] @ (np.eye(3) + strain), scale_atoms=True)
    if kind == "vacancy":
        n_vac = int(rng.integers(1, 3))
        for index in sorted(rng.choice(len(atoms), size=n_vac, replace=False), reverse=True):
            del atoms[int(index)]
    if kind == "md":
        return _md_snapshots(atoms, rng, count)
    atoms.rattle(stdev=float(rng.uniform(0.01, 0.1)), seed=int(rng.integers(2**31)))
    return [_label(atoms)]


def generate_structures(
    n: int,
    seed: int = 0,
    elements: Sequence[str] = EMT_ELEMENTS,
    kinds: Sequence[str] = KINDS,
    random_orientation: bool = True,
) -> list[Atoms]:
    """``n`` EMT-labelled structures (``info["energy"]`` eV, ``arrays["forces"]`` eV/Å).

    Kinds cycle through ``kinds`` (an MD trajectory counts for its ``MD_SNAPSHOTS`` snapshots);
    elements are drawn from ``elements`` (EMT ones only). With ``random_orientation`` (default)
    every structure (cell, positions, forces) is rotated by its own uniformly random rotation,
    so that crystal axes carry no information, as in molecular data; otherwise every cell has
    ASE's canonical fcc orientation. Deterministic given ``seed``.
    """
    unknown = sorted(set(elements) - set(EMT_ELEMENTS))
    if unknown:
        raise ValueError(f"elements {unknown} are not supported by EMT; use {EMT_ELEMENTS}")
    bad_kinds = sorted(set(kinds) - set(KINDS))
    if bad_kinds or not kinds:
        raise ValueError(f"unknown structure kinds {bad_kinds}; known: {KINDS}")
    if n < 1:
        raise ValueError("n must be >= 1")
    rng = np.random.default_rng(seed)
    out: list[Atoms] = []
    i = 0
    while len(out) < n:
        kind = kinds[i % len(kinds)]
        count = min(MD_SNAPSHOTS, n - len(out)) if kind == "md" else 1
        out.extend(_make(kind, rng, list(elements), count))
        i += 1 if kind != "md" else count
    return randomly_orient(out, seed) if random_orientation else out


def write_synthetic(
    path: str | Path,
    n: int,
    seed: int = 0,
    elements: Sequence[str] = EMT_ELEMENTS,
    kinds: Sequence[str] = KINDS,
    random_orientation: bool = True,
    overwrite: bool = False,
) -> Path:
    """Generates ``n`` structures and writes them to ``path`` as extxyz (REF_energy/REF_forces).
    ``path`` is checked before anything is generated: an existing file is refused unless
    ``overwrite`` (then replaced in one step)."""
    from iclr26_common.outputs import check_out_file

    path = check_out_file(path, option="--out", overwrite=overwrite)
    structures = generate_structures(n, seed, elements, kinds, random_orientation)
    return write_extxyz(path, structures, overwrite=overwrite)
