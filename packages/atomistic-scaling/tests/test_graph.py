from __future__ import annotations

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import bulk, molecule

from atomistic_scaling.graph import atoms_to_graph, edge_vectors, neighbor_list, neighbor_list_ase


def _pairs(i, j, s) -> set[tuple[int, int, int, int, int]]:
    return {(int(a), int(b), *map(int, c)) for a, b, c in zip(i, j, s, strict=True)}


@pytest.mark.parametrize("cutoff", [3.0, 4.5, 6.0])
def test_vesin_matches_ase(structures: list[Atoms], cutoff: float) -> None:
    for atoms in structures[:4]:
        assert _pairs(*neighbor_list(atoms, cutoff)) == _pairs(*neighbor_list_ase(atoms, cutoff))


def test_periodic_self_images_and_lengths() -> None:
    atoms = bulk("Cu", "fcc", a=3.6)  # one atom: every neighbour is a periodic image of itself
    graph = atoms_to_graph(atoms, 3.0)
    assert graph.edge_index.shape[1] == 12  # the 12 nearest fcc neighbours
    vec = edge_vectors(
        graph.pos, graph.cell, graph.edge_index, graph.shifts, torch.zeros(1, dtype=torch.long)
    )
    np.testing.assert_allclose(vec.norm(dim=-1).numpy(), 3.6 / np.sqrt(2), rtol=1e-5)


def test_mixed_and_no_periodicity() -> None:
    mol = molecule("H2O")
    i, _, s = neighbor_list(mol, 2.0)
    assert len(i) == 6 and not s.any()
    slab = bulk("Al", "fcc", a=4.05).repeat((2, 2, 1))
    slab.pbc = (True, True, False)
    assert _pairs(*neighbor_list(slab, 4.0)) == _pairs(*neighbor_list_ase(slab, 4.0))
