from __future__ import annotations

from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from ase import Atoms, units
from ase.md.langevin import Langevin
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution
from ase.md.verlet import VelocityVerlet
from torch_geometric.loader import DataLoader

from atomistic_scaling.calculator import ForceFieldCalculator, load_force_field
from atomistic_scaling.data import AtomsGraphDataset, fit_atomic_energies
from atomistic_scaling.lit_module import ForceFieldModule

#: Pre-registered NVE bound: |E_tot(t) - E_tot(0)| per atom over 40 steps of 1 fs, float64.
NVE_DRIFT_MAX_EV_PER_ATOM = 1e-3


def _trained(structures: list[Atoms], tmp_path: Path, conservative: bool) -> Path:
    L.seed_everything(0)
    module = ForceFieldModule("l1", width=6, num_layers=1, cutoff=4.0, conservative=conservative)
    module.model.atomic_energies.copy_(fit_atomic_energies(structures))
    loader = DataLoader(AtomsGraphDataset(structures, 4.0), batch_size=4, shuffle=True)
    trainer = L.Trainer(
        max_epochs=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(module, train_dataloaders=loader)
    path = tmp_path / "model.ckpt"
    trainer.save_checkpoint(path)
    return path


def test_langevin_md_with_direct_model(structures: list[Atoms], tmp_path: Path) -> None:
    calc = ForceFieldCalculator(_trained(structures, tmp_path, conservative=False))
    atoms = structures[0].copy()
    atoms.calc = calc
    MaxwellBoltzmannDistribution(atoms, temperature_K=300, rng=np.random.default_rng(0))
    start = atoms.positions.copy()
    Langevin(
        atoms,
        1 * units.fs,
        temperature_K=300,
        friction=0.02,
        fixcm=False,
        rng=np.random.default_rng(0),
    ).run(10)
    assert np.all(np.isfinite(atoms.positions)) and not np.allclose(atoms.positions, start)
    assert np.isfinite(atoms.get_potential_energy())
    with pytest.raises(NotImplementedError, match="stress"):
        atoms.get_stress()


def test_nve_energy_drift_and_stress_with_conservative_model(
    structures: list[Atoms], tmp_path: Path
) -> None:
    model = load_force_field(_trained(structures, tmp_path, conservative=True))
    assert model.conservative
    atoms = structures[4].copy()
    atoms.calc = ForceFieldCalculator(model, dtype=torch.float64)
    assert atoms.get_stress().shape == (6,)
    MaxwellBoltzmannDistribution(atoms, temperature_K=300, rng=np.random.default_rng(1))
    e0 = atoms.get_total_energy()
    dyn = VelocityVerlet(atoms, 1 * units.fs)
    drift = []
    for _ in range(4):
        dyn.run(10)
        drift.append(abs(atoms.get_total_energy() - e0) / len(atoms))
    assert max(drift) < NVE_DRIFT_MAX_EV_PER_ATOM, drift


def test_bad_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_force_field(tmp_path / "none.ckpt")
    torch.save({"x": torch.zeros(1)}, tmp_path / "other.ckpt")
    with pytest.raises(ValueError, match="not a ForceFieldModule checkpoint"):
        load_force_field(tmp_path / "other.ckpt")
