from __future__ import annotations

import numpy as np
import pytest
import torch
from ase import Atoms
from e3nn import o3
from torch_geometric.data import Batch

from atomistic_scaling.constants import ARCHITECTURES
from atomistic_scaling.graph import atoms_to_graph
from atomistic_scaling.model import ForceField, count_parameters
from atomistic_scaling.peers import nequip_available

EQUIVARIANT = ("invariant", "l1", "l2", "l3")
TOL = 1e-5


def _model(arch: str, conservative: bool = False) -> ForceField:
    torch.manual_seed(0)
    model = ForceField(arch, width=6, num_layers=2, cutoff=4.0, conservative=conservative)
    with torch.no_grad():
        model.atomic_energies[:] = torch.randn(model.atomic_energies.shape)
        for param in model.parameters():  # O(1) outputs: symmetry holds for any weights
            param.add_(0.3 * torch.randn_like(param))
    return model.double().eval()


def _predict(model: ForceField, atoms: Atoms) -> tuple[float, np.ndarray]:
    batch = Batch.from_data_list([atoms_to_graph(atoms, model.cutoff, dtype=torch.float64)])
    with torch.set_grad_enabled(model.conservative):
        out = model(batch)
    return float(out["energy"].detach()[0]), out["forces"].detach().numpy()


def _transforms(atoms: Atoms, seed: int) -> dict[str, tuple[Atoms, np.ndarray, np.ndarray]]:
    """Transformed copies with (rotation R applied to forces as f @ R, permutation)."""
    torch.manual_seed(seed)
    rot = o3.rand_matrix().double().numpy()
    ident = np.arange(len(atoms))
    rotated = atoms.copy()
    rotated.positions = atoms.positions @ rot.T
    rotated.cell = atoms.cell[:] @ rot.T
    shifted = atoms.copy()
    shifted.positions = atoms.positions + np.array([0.7, -1.3, 2.1])
    perm = np.random.default_rng(seed).permutation(len(atoms))
    permuted = atoms[perm]
    return {
        "rotation": (rotated, rot.T, ident),
        "translation": (shifted, np.eye(3), ident),
        "permutation": (permuted, np.eye(3), perm),
    }


@pytest.mark.parametrize("arch", EQUIVARIANT)
@pytest.mark.parametrize("conservative", [False, True])
def test_energy_invariant_forces_equivariant(
    arch: str, conservative: bool, structures: list[Atoms]
) -> None:
    model = _model(arch, conservative)
    atoms = structures[1]
    e0, f0 = _predict(model, atoms)
    assert np.abs(f0).max() > 1e-2  # forces are not trivially zero
    for name, (moved, rot, perm) in _transforms(atoms, seed=7).items():
        e1, f1 = _predict(model, moved)
        assert abs(e1 - e0) < TOL * max(1.0, abs(e0)), name
        np.testing.assert_allclose(f1, (f0 @ rot)[perm], atol=TOL, err_msg=name)


def test_unconstrained_mpnn_is_translation_but_not_rotation_invariant(
    structures: list[Atoms],
) -> None:
    model = _model("mpnn")
    atoms = structures[1]
    e0, f0 = _predict(model, atoms)
    moves = _transforms(atoms, seed=7)
    e_t, f_t = _predict(model, moves["translation"][0])
    assert abs(e_t - e0) < TOL and np.allclose(f_t, f0, atol=TOL)
    e_p, f_p = _predict(model, moves["permutation"][0])
    assert abs(e_p - e0) < TOL and np.allclose(f_p, f0[moves["permutation"][2]], atol=TOL)
    rotated, rot, _ = moves["rotation"]
    e_r, f_r = _predict(model, rotated)
    assert abs(e_r - e0) > 1e-3  # visibly not invariant
    assert np.abs(f_r - f0 @ rot).max() > 1e-3  # nor equivariant


@pytest.mark.parametrize("arch", ["invariant", "l2"])
def test_conservative_forces_are_minus_energy_gradient(arch: str, structures: list[Atoms]) -> None:
    model = _model(arch, conservative=True)
    atoms = structures[2]
    _, forces = _predict(model, atoms)
    h = 1e-5
    for index, axis in [(0, 0), (3, 2)]:
        plus, minus = atoms.copy(), atoms.copy()
        plus.positions[index, axis] += h
        minus.positions[index, axis] -= h
        numeric = -(_predict(model, plus)[0] - _predict(model, minus)[0]) / (2 * h)
        assert forces[index, axis] == pytest.approx(numeric, abs=1e-6)


def test_stress_matches_strain_derivative(structures: list[Atoms]) -> None:
    model = _model("l1", conservative=True)
    atoms = structures[0]
    batch = Batch.from_data_list([atoms_to_graph(atoms, model.cutoff, dtype=torch.float64)])
    stress = model(batch, compute_stress=True)["stress"][0].detach().numpy()
    h = 1e-5
    eps = np.zeros((3, 3))
    eps[0, 1] = eps[1, 0] = h / 2
    energies = []
    for sign in (1, -1):
        strained = atoms.copy()
        strained.set_cell(atoms.cell[:] @ (np.eye(3) + sign * eps), scale_atoms=True)
        energies.append(_predict(model, strained)[0])
    numeric = (energies[0] - energies[1]) / (2 * h) / atoms.get_volume()
    assert stress[0, 1] == pytest.approx(numeric, abs=1e-6)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_shapes_and_sizes(arch: str, structures: list[Atoms]) -> None:
    if arch == "nequip" and not nequip_available():
        pytest.skip("the nequip peer needs the optional nequip package")
    small = ForceField(arch, width=8, num_layers=2)
    large = ForceField(arch, width=32, num_layers=2)
    assert 1e3 <= count_parameters(small) < count_parameters(large) <= 1e5
    batch = Batch.from_data_list([atoms_to_graph(a, small.cutoff) for a in structures[:3]])
    out = small(batch)
    assert out["energy"].shape == (3,)
    assert out["forces"].shape == (batch.pos.shape[0], 3)


def test_bad_arch() -> None:
    with pytest.raises(ValueError, match="unknown arch"):
        ForceField("transformer")


def test_nequip_without_the_package_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the optional extra, arch 'nequip' says how to install it (no ImportError)."""
    import atomistic_scaling.peers as peers

    monkeypatch.setattr(peers, "nequip_available", lambda: False)
    with pytest.raises(ValueError, match=r"atomistic-scaling\[peers\]"):
        ForceField("nequip")


def test_training_elements_and_references() -> None:
    model = ForceField("l1", width=4, num_layers=1)
    assert model.unseen_elements([29]) == [29]  # nothing fitted yet: every element is unseen
    energies = torch.zeros(model.atomic_energies.shape)
    energies[29] = -3.5
    model.set_atomic_references(energies, [29, 79])
    assert model.unseen_elements([29, 79, 79]) == []
    assert model.unseen_elements([1, 29, 92, 150]) == [1, 92, 150]
    assert float(model.atomic_energies[29]) == -3.5


def test_mpnn_edge_input_has_radially_weighted_components() -> None:
    from atomistic_scaling.model import unconstrained_edge_features

    vec = torch.tensor([[1.0, -2.0, 0.5]])
    rbf = torch.tensor([[0.3, 0.7]])
    out = unconstrained_edge_features(vec, rbf)
    expected = [1.0, -2.0, 0.5, 0.3, 0.7, 0.3, 0.7, -0.6, -1.4, 0.15, 0.35]
    np.testing.assert_allclose(out.numpy()[0], expected, rtol=1e-6)


@pytest.mark.parametrize("arch", ["mpnn", "l1"])
def test_equivariance_penalty_vanishes_only_for_equivariant_models(
    arch: str, structures: list[Atoms]
) -> None:
    """Symmetry as a loss term: the penalty is ~0 for an equivariant model and clearly positive
    for the unconstrained one."""
    from atomistic_scaling.lit_module import equivariance_penalty
    from atomistic_scaling.symmetry import rotate_batch

    model = _model(arch)
    batch = Batch.from_data_list(
        [atoms_to_graph(a, model.cutoff, dtype=torch.float64) for a in structures[:3]]
    )
    rotation = o3.rand_matrix().double()
    with torch.no_grad():
        rotated = model(rotate_batch(batch, rotation))
        penalty = float(equivariance_penalty(model(batch), rotated, batch, rotation))
    if arch == "mpnn":
        assert penalty > 1e-2
    else:
        assert penalty < 1e-6
