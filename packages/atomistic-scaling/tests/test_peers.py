"""The NequIP peer (``arch="nequip"``), built by the ``nequip`` library (optional extra)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ase import Atoms
from torch_geometric.data import Batch

from atomistic_scaling.graph import atoms_to_graph
from atomistic_scaling.model import ForceField, count_parameters

pytest.importorskip("nequip")


def _peer(width: int = 4, l_max: int = 1, seed: int = 0) -> ForceField:
    torch.manual_seed(seed)
    model = ForceField("nequip", width=width, num_layers=2, cutoff=4.0, l_max=l_max)
    with torch.no_grad():
        model.atomic_energies[:] = torch.randn(model.atomic_energies.shape)
    return model.eval()


def _predict(model: ForceField, atoms: Atoms) -> dict[str, np.ndarray]:
    batch = Batch.from_data_list([atoms_to_graph(atoms, model.cutoff)])
    out = model(batch, compute_stress=True)
    return {k: v.detach().numpy() for k, v in out.items()}


def test_forces_rotate_with_the_structure(structures: list[Atoms]) -> None:
    """Rotating the input (positions and cell) rotates NequIP's forces and leaves the energy:
    the peer is fed our bond vectors, so a wrong edge convention would break this."""
    model = _peer()
    atoms = structures[2]
    before = _predict(model, atoms)
    assert np.isfinite(before["energy"]).all() and np.isfinite(before["forces"]).all()
    assert np.abs(before["forces"]).max() > 1e-3  # not trivially zero
    rot = torch.linalg.qr(torch.randn(3, 3, generator=torch.Generator().manual_seed(3)))[0]
    rot = rot.numpy() * np.sign(np.linalg.det(rot.numpy()))  # a proper rotation
    moved = atoms.copy()
    moved.positions = atoms.positions @ rot.T
    moved.cell = atoms.cell[:] @ rot.T
    after = _predict(model, moved)
    assert after["energy"][0] == pytest.approx(before["energy"][0], rel=1e-5, abs=1e-5)
    np.testing.assert_allclose(after["forces"], before["forces"] @ rot.T, atol=2e-5)
    np.testing.assert_allclose(after["stress"][0], rot @ before["stress"][0] @ rot.T, atol=2e-5)


def test_energy_equals_nequips_own_pipeline(structures: list[Atoms]) -> None:
    """Our graph (edges, bond vectors pos[j] + shift - pos[i]) given to the peer gives the
    energy nequip computes from its own neighbour list and edge vectors (pos, cell, shifts):
    our neighbour list, bond vectors and type mapping (z - 1) are nequip's (a mapping off by
    one element fails here). The edge direction cannot show in an O(3)-invariant energy:
    reversing every edge equals inverting the structure."""
    from nequip.data import AtomicDataDict, compute_neighborlist_, from_ase

    model = _peer()
    atoms = structures[4]
    ours = _predict(model, atoms)["energy"][0]
    references = float(model.atomic_energies[torch.as_tensor(atoms.numbers)].sum())
    data = compute_neighborlist_(from_ase(atoms), r_max=4.0)
    data[AtomicDataDict.ATOM_TYPE_KEY] = torch.as_tensor(atoms.numbers - 1)
    data = AtomicDataDict.with_batch_(data)
    theirs = float(model.peer.model(data)["total_energy"].detach().sum())
    assert ours - references == pytest.approx(theirs, rel=1e-5, abs=1e-5)


def test_parameter_count_follows_the_width_and_l_max_knobs() -> None:
    small, wide, higher = _peer(4), _peer(8), _peer(4, l_max=2)
    n = [count_parameters(m) for m in (small, wide, higher)]
    assert n[0] < n[1] and n[0] < n[2]
    assert not hasattr(small, "embedding")  # no unused parameters of our own family counted


def test_building_a_peer_leaves_the_process_state_alone() -> None:
    """nequip's builder switched e3nn to TorchScript for every later model (our l1 then could
    not be deep-copied by the ASE calculator), its global state set float64 as the default
    dtype and reseeded the RNGs; all three are restored now."""
    import copy

    torch.manual_seed(11)
    expected = torch.rand(3)
    torch.manual_seed(11)
    ForceField("nequip", width=4, num_layers=1, cutoff=4.0)
    drawn_after = torch.rand(3)  # the peer's seed is drawn from the stream, nothing else
    torch.manual_seed(11)
    torch.randint(0, 2**31 - 1, (1,))
    assert torch.equal(drawn_after, torch.rand(3)) and not torch.equal(drawn_after, expected)
    assert torch.get_default_dtype() == torch.float32
    copy.deepcopy(ForceField("l1", width=4, num_layers=1, cutoff=4.0))


def test_nequip_trains_in_the_sweep(structures: list[Atoms]) -> None:
    """The same ``arch`` knob drives a sweep run: finite losses below the untrained model's."""
    from atomistic_scaling.data import AtomsGraphDataset
    from atomistic_scaling.sweep import SweepConfig, train_runs

    config = SweepConfig(
        archs=["nequip"],
        widths=[4],
        num_layers=1,
        d_values=[12],
        seeds=[0],
        batch_size=2,
        warmup_steps=1,
        cooldown_fraction=0.5,
        cutoff=4.0,
        lr=1e-2,
        n_boot=2,
    )
    train_set = AtomsGraphDataset(structures[:12], 4.0)
    val_set = AtomsGraphDataset(structures[8:], 4.0)
    (record,) = train_runs("nequip", 4, 0, train_set, val_set, None, config)
    assert np.isfinite(record["loss"]) and record["n_params"] > 0


def test_ase_calculator_runs_the_peer_in_float32(structures: list[Atoms]) -> None:
    """The calculator's float64 default failed inside nequip (float weights, double input):
    a nequip model now runs in float32 by default, and float64 is refused by name."""
    from atomistic_scaling.calculator import ForceFieldCalculator
    from atomistic_scaling.data import elements_of

    model = _peer()
    model.set_atomic_references(model.atomic_energies.clone(), elements_of(structures))
    atoms = structures[2].copy()
    atoms.calc = ForceFieldCalculator(model)
    expected = _predict(model, structures[2])
    assert atoms.get_potential_energy() == pytest.approx(float(expected["energy"][0]), rel=1e-6)
    np.testing.assert_allclose(atoms.get_forces(), expected["forces"], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="nequip' computes in float32 only"):
        ForceFieldCalculator(model, dtype=torch.float64)
