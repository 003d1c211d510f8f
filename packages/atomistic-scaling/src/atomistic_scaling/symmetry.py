"""Rotations for the symmetry question: uniformly random proper rotations, rotating labelled
structures (positions, cell, forces) and batches, and randomly orienting a data set so that an
unconstrained model has to learn rotational symmetry from the data (as on molecular data)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from ase import Atoms
from torch import Tensor

from atomistic_scaling._pyg import Batch

__all__ = ["random_rotation", "randomly_orient", "rotate_batch", "rotate_structure"]


def random_rotation(generator: torch.Generator | None = None, dtype=torch.float32) -> Tensor:
    """A uniformly (Haar) random proper rotation (3, 3): QR of a Gaussian matrix with the signs
    of R's diagonal folded into Q, then a column flipped if det = -1."""
    q, r = torch.linalg.qr(torch.randn(3, 3, generator=generator, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
    if torch.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q.to(dtype)


def rotate_batch(batch: Batch, rotation: Tensor) -> Batch:
    """Rotates positions, cells and force labels of ``batch`` by ``rotation`` (row vectors:
    ``x -> x @ rotation``); returns a copy."""
    batch = batch.clone()
    batch.pos = batch.pos @ rotation
    batch.cell = batch.cell @ rotation
    if getattr(batch, "forces", None) is not None:
        batch.forces = batch.forces @ rotation
    return batch


def rotate_structure(atoms: Atoms, rotation: np.ndarray) -> Atoms:
    """A copy of a labelled structure (``info["energy"]``, ``arrays["forces"]``) rotated by
    ``rotation`` (3, 3) acting on row vectors: positions, cell vectors and forces ``x @ R``;
    the energy is unchanged (a physical energy is rotation invariant); the structure's ids
    (``source_file``, ``frame``: :mod:`.io`) are kept."""
    rotation = np.asarray(rotation, dtype=np.float64)
    out = Atoms(
        numbers=atoms.numbers,
        positions=atoms.positions @ rotation,
        cell=np.asarray(atoms.cell[:]) @ rotation,
        pbc=atoms.pbc,
    )
    if "energy" in atoms.info:
        out.info["energy"] = atoms.info["energy"]
    if "forces" in atoms.arrays:
        out.arrays["forces"] = np.asarray(atoms.arrays["forces"]) @ rotation
    for key in ("source_file", "frame"):  # io.SOURCE_KEY, io.FRAME_KEY
        if key in atoms.info:
            out.info[key] = atoms.info[key]
    return out


def randomly_orient(structures: Sequence[Atoms], seed: int) -> list[Atoms]:
    """Each structure rotated by its own random rotation (deterministic given ``seed``)."""
    gen = torch.Generator().manual_seed(int(seed))
    return [
        rotate_structure(atoms, random_rotation(gen, torch.float64).numpy()) for atoms in structures
    ]
