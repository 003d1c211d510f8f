from __future__ import annotations

from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from ase import Atoms, units
from ase.build import bulk, molecule
from ase.md.langevin import Langevin
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution
from ase.md.verlet import VelocityVerlet
from torch_geometric.loader import DataLoader

from atomistic_scaling.calculator import ForceFieldCalculator, load_force_field
from atomistic_scaling.data import AtomsGraphDataset, elements_of, fit_atomic_energies
from atomistic_scaling.lit_module import ForceFieldModule

#: Pre-registered NVE bound: |E_tot(t) - E_tot(0)| per atom over 40 steps of 1 fs, float64.
NVE_DRIFT_MAX_EV_PER_ATOM = 1e-3


def _trained(structures: list[Atoms], tmp_path: Path, conservative: bool) -> Path:
    L.seed_everything(0)
    module = ForceFieldModule("l1", width=6, num_layers=1, cutoff=4.0, conservative=conservative)
    module.model.set_atomic_references(fit_atomic_energies(structures), elements_of(structures))
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
    from atomistic_scaling.cli import SCRIPT
    from atomistic_scaling.io import AtomisticFormatError

    with pytest.raises(FileNotFoundError, match=r"none\.ckpt: no such checkpoint"):
        load_force_field(tmp_path / "none.ckpt")
    torch.save({"x": torch.zeros(1)}, tmp_path / "other.ckpt")
    with pytest.raises(AtomisticFormatError, match="not a ForceFieldModule checkpoint"):
        load_force_field(tmp_path / "other.ckpt")
    # a file that is no checkpoint at all: one line naming it (it was torch's unpickling error)
    (tmp_path / "text.ckpt").write_text("not a checkpoint\n")
    with pytest.raises(
        AtomisticFormatError, match=r"text\.ckpt: not a readable checkpoint"
    ) as info:
        load_force_field(tmp_path / "text.ckpt")
    assert SCRIPT.is_user_error(info.value)


def test_foreign_or_malformed_checkpoint_is_one_line_naming_the_file(tmp_path: Path) -> None:
    """Issue 36: an rf-matid checkpoint was a bare ``KeyError: 'width'``; now one line naming
    the file (and, for another package's, both packages)."""
    from atomistic_scaling.cli import SCRIPT
    from atomistic_scaling.io import AtomisticFormatError
    from iclr26_common.checkpoints import MODEL_KEY

    rf = {
        "state_dict": {"net.weight": torch.zeros(2, 3)},
        "hyper_parameters": {"n_classes": 4},
        MODEL_KEY: "rf_matid.lit_module.RFMatIDClassifier",
    }
    hp = {"arch": "l1", "width": 4, "num_layers": 1, "cutoff": 4.0, "num_rbf": 8}
    cases = {
        "rf.ckpt": (
            rf,
            ": a checkpoint of rf-matid (rf_matid.lit_module.RFMatIDClassifier), not of "
            "atomistic-scaling",
        ),
        "other_hparams.ckpt": (
            {"state_dict": {}, "hyper_parameters": {"n_classes": 4}},
            ": not a ForceFieldModule checkpoint (no 'arch')",
        ),
        "hplist.ckpt": (
            {"state_dict": {}, "hyper_parameters": [1, 2]},
            ": not a ForceFieldModule checkpoint",
        ),
        "arch.ckpt": (
            {"state_dict": {}, "hyper_parameters": {**hp, "arch": "gpt", "conservative": False}},
            ": its hyper-parameters do not build a ForceField: unknown arch 'gpt'",
        ),
    }
    for name, (payload, message) in cases.items():
        torch.save(payload, tmp_path / name)
        with pytest.raises(AtomisticFormatError) as info:
            load_force_field(tmp_path / name)
        line = str(info.value)
        assert line.startswith(f"{tmp_path / name}{message}") and "\n" not in line, line
        assert SCRIPT.is_user_error(info.value)


def test_unseen_elements_are_refused(structures: list[Atoms], tmp_path: Path) -> None:
    """U in a Cu cell and an H2O molecule used to get energies without a word."""
    calc = ForceFieldCalculator(_trained(structures, tmp_path, conservative=False))
    trained = set(elements_of(structures))
    cell = bulk("Cu", "fcc", a=3.6).repeat(2)
    cell.numbers[0] = 92
    cell.calc = calc
    with pytest.raises(ValueError, match=r"elements never seen in training: U;"):
        cell.get_potential_energy()
    water = molecule("H2O")
    water.calc = calc
    assert not {1, 8} & trained
    with pytest.raises(ValueError, match=r"never seen in training: H, O;"):
        water.get_forces()
    known = structures[0].copy()
    known.calc = calc
    assert np.isfinite(known.get_potential_energy())


def test_unseen_elements_refused_on_the_command_line_path(tmp_path: Path) -> None:
    """The calculator's refusal is a ValueError from this package: one line in a CLI."""
    from atomistic_scaling.cli import SCRIPT
    from atomistic_scaling.model import ForceField

    model = ForceField("l1", width=4, num_layers=1)
    model.set_atomic_references(torch.zeros(100), [29])
    atoms = bulk("Au", "fcc", a=4.08)
    atoms.calc = ForceFieldCalculator(model)
    with pytest.raises(ValueError) as info:
        atoms.get_potential_energy()
    assert SCRIPT.is_user_error(info.value)


def test_callers_model_is_left_unchanged(structures: list[Atoms]) -> None:
    """The calculator used to convert the caller's model to float64 and eval mode in place."""
    from atomistic_scaling.model import ForceField

    model = ForceField("l1", width=4, num_layers=1)
    model.set_atomic_references(fit_atomic_energies(structures), elements_of(structures))
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    atoms = structures[0].copy()
    atoms.calc = ForceFieldCalculator(model, dtype=torch.float64)
    atoms.get_forces()
    assert model.training
    assert model.atomic_energies.dtype == torch.float32
    assert next(model.parameters()).dtype == torch.float32
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_checkpoint_without_trained_elements_loads(structures: list[Atoms], tmp_path: Path) -> None:
    """Checkpoints of version 0.2 have no trained_elements buffer: the elements with a fitted
    reference energy stand in."""
    path = _trained(structures, tmp_path, conservative=False)
    state = torch.load(path, map_location="cpu", weights_only=True)
    del state["state_dict"]["model.trained_elements"]
    torch.save(state, tmp_path / "old.ckpt")
    model = load_force_field(tmp_path / "old.ckpt")
    assert model.unseen_elements(elements_of(structures)) == []
    assert model.unseen_elements([92]) == [92]
