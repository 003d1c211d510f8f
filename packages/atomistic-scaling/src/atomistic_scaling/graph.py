"""Neighbour lists (vesin, with ``ase.neighborlist`` as the reference) and the conversion of
``ase.Atoms`` into PyG graphs with periodic images.

A graph carries ``z`` (N,), ``pos`` (N, 3), ``cell`` (1, 3, 3), ``edge_index`` (2, E) with
``edge_index[0] = j`` (source, the neighbour) and ``edge_index[1] = i`` (target, the centre),
``shifts`` (E, 3) integer cell offsets of the neighbour's image, so that the edge vector is
``r_ij = pos[j] + shifts @ cell - pos[i]``; labels ``energy`` (1,) and ``forces`` (N, 3).
"""

from __future__ import annotations

import numpy as np
import torch
from ase import Atoms

from atomistic_scaling._pyg import Data

__all__ = [
    "atoms_to_graph",
    "cell_problem",
    "closest_pair",
    "edge_vectors",
    "neighbor_list",
    "neighbor_list_ase",
]

#: A periodic cell with |det| below this (Å³) is singular (missing or linearly dependent vectors).
MIN_CELL_VOLUME = 1e-9


def cell_problem(cell: np.ndarray, pbc: np.ndarray) -> str | None:
    """Why a periodic ``cell`` (3, 3) cannot be used, or None: a structure periodic in any
    direction needs three linearly independent cell vectors (the neighbour list wraps with the
    full cell)."""
    if np.asarray(pbc, dtype=bool).any() and abs(np.linalg.det(cell)) < MIN_CELL_VOLUME:
        rows = "; ".join(" ".join(f"{v:g}" for v in row) for row in np.asarray(cell))
        return (
            f"periodic (pbc={[bool(p) for p in pbc]}) but the cell is missing or singular "
            f"(Lattice rows {rows})"
        )
    return None


def _box(atoms: Atoms) -> tuple[np.ndarray, np.ndarray]:
    pbc = np.asarray(atoms.pbc, dtype=bool)
    cell = np.asarray(atoms.cell[:], dtype=np.float64)
    problem = cell_problem(cell, pbc)
    if problem is not None:
        raise ValueError(problem)
    return cell, pbc


def neighbor_list(atoms: Atoms, cutoff: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Full neighbour list within ``cutoff`` (Å) with vesin: ``(i, j, shifts)``.

    ``i`` (E,) centres, ``j`` (E,) neighbours, ``shifts`` (E, 3) integer image offsets such
    that ``pos[j] + shifts @ cell - pos[i]`` is the bond vector (both directions are listed;
    self-pairs at zero distance are excluded, periodic self-images are kept).
    """
    from vesin import NeighborList

    cell, pbc = _box(atoms)
    positions = np.asarray(atoms.positions, dtype=np.float64)
    if not pbc.any():
        cell = np.zeros((3, 3))
    i, j, shifts = NeighborList(cutoff=float(cutoff), full_list=True).compute(
        positions, cell, pbc.tolist(), quantities="ijS"
    )
    return i.astype(np.int64), j.astype(np.int64), shifts.astype(np.int64)


def closest_pair(atoms: Atoms, below: float) -> tuple[int, int, float] | None:
    """The closest pair ``(i, j, distance)`` of ``atoms`` (periodic images included) if some
    pair is closer than ``below`` Å, else None."""
    i, j, shifts = neighbor_list(atoms, below)
    if len(i) == 0:
        return None
    cell = np.asarray(atoms.cell[:], dtype=np.float64)
    vec = atoms.positions[j] + shifts @ cell - atoms.positions[i]
    dist = np.linalg.norm(vec, axis=1)
    k = int(np.argmin(dist))
    return int(i[k]), int(j[k]), float(dist[k])


def neighbor_list_ase(atoms: Atoms, cutoff: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Same as :func:`neighbor_list` with ``ase.neighborlist.primitive_neighbor_list``."""
    from ase.neighborlist import primitive_neighbor_list

    cell, pbc = _box(atoms)
    i, j, shifts = primitive_neighbor_list(
        "ijS", pbc, cell, atoms.positions, float(cutoff), self_interaction=False
    )
    return i.astype(np.int64), j.astype(np.int64), shifts.astype(np.int64)


def atoms_to_graph(atoms: Atoms, cutoff: float, dtype: torch.dtype = torch.float32) -> Data:
    """A PyG :class:`Data` graph of ``atoms`` (labels included when present).

    Labels are read from ``info["energy"]`` and ``arrays["forces"]`` (see :mod:`.io`).
    """
    i, j, shifts = neighbor_list(atoms, cutoff)
    cell = np.asarray(atoms.cell[:], dtype=np.float64)
    data = Data(
        z=torch.as_tensor(atoms.numbers, dtype=torch.long),
        pos=torch.as_tensor(atoms.positions, dtype=dtype),
        cell=torch.as_tensor(cell, dtype=dtype).unsqueeze(0),
        edge_index=torch.as_tensor(np.stack([j, i]), dtype=torch.long),
        shifts=torch.as_tensor(shifts, dtype=dtype),
        n_atoms=torch.tensor([len(atoms)], dtype=torch.long),
    )
    if "energy" in atoms.info:
        data.energy = torch.tensor([float(atoms.info["energy"])], dtype=dtype)
    if "forces" in atoms.arrays:
        data.forces = torch.as_tensor(atoms.arrays["forces"], dtype=dtype)
    return data


def edge_vectors(
    pos: torch.Tensor,
    cell: torch.Tensor,
    edge_index: torch.Tensor,
    shifts: torch.Tensor,
    batch: torch.Tensor,
) -> torch.Tensor:
    """Bond vectors ``r_ij = pos[j] + shifts @ cell[graph] - pos[i]``, shape (E, 3).

    ``pos`` (N, 3), ``cell`` (B, 3, 3), ``edge_index`` (2, E) as (j, i), ``shifts`` (E, 3),
    ``batch`` (N,) graph index of each atom.
    """
    src, dst = edge_index
    offsets = torch.einsum("ek,ekl->el", shifts, cell[batch[dst]])
    return pos[src] + offsets - pos[dst]
