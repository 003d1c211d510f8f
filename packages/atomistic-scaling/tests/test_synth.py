from __future__ import annotations

import numpy as np
import pytest
from ase.calculators.emt import EMT

from atomistic_scaling.constants import EMT_ELEMENTS
from atomistic_scaling.synth import KINDS, MD_SNAPSHOTS, generate_structures


def test_deterministic_and_labelled_by_emt() -> None:
    a = generate_structures(9, seed=1)
    b = generate_structures(9, seed=1)
    assert len(a) == 9
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.positions, y.positions)
    for atoms in a:
        assert set(atoms.get_chemical_symbols()) <= set(EMT_ELEMENTS)
        assert atoms.pbc.all() and 6 <= len(atoms) <= 27
        check = atoms.copy()
        check.calc = EMT()
        assert check.get_potential_energy() == pytest.approx(atoms.info["energy"], abs=1e-9)
        np.testing.assert_allclose(check.get_forces(), atoms.arrays["forces"], atol=1e-9)


def test_md_snapshots_are_distinct_and_forces_nonzero() -> None:
    md = generate_structures(MD_SNAPSHOTS, seed=0, kinds=["md"])
    assert len(md) == MD_SNAPSHOTS
    assert not np.allclose(md[0].positions, md[1].positions)
    assert np.abs(md[0].arrays["forces"]).max() > 0.05


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="not supported by EMT"):
        generate_structures(2, elements=["Fe"])
    with pytest.raises(ValueError, match="unknown structure kinds"):
        generate_structures(2, kinds=["liquid"])
    assert set(KINDS) == {"rattle", "strain", "vacancy", "md"}


def _max_angle(atoms) -> float:
    """Largest angle (deg) between a cell vector and ASE's canonical fcc primitive axis."""
    from ase.build import bulk

    canonical = bulk("Cu", "fcc", a=3.6).cell[:]
    canonical = canonical / np.linalg.norm(canonical, axis=1, keepdims=True)
    cell = atoms.cell[:] / np.linalg.norm(atoms.cell[:], axis=1, keepdims=True)
    return float(np.degrees(np.arccos(np.clip((cell * canonical).sum(1), -1, 1))).max())


def test_structures_are_randomly_oriented() -> None:
    """Every structure in its own orientation (before: all cells within 2 deg of ASE's canonical
    fcc axes); the stored labels are EMT's on the rotated structure, component by component
    (a rotation of positions without the forces would fail here: the force norms alone would
    not see it), and random_orientation=False keeps the canonical cells."""
    rotated = generate_structures(8, seed=2)
    assert min(_max_angle(a) for a in rotated) > 10.0
    plain = generate_structures(8, seed=2, random_orientation=False)
    assert max(_max_angle(a) for a in plain) < 10.0
    for a, b in zip(rotated, plain, strict=True):
        check = a.copy()
        check.calc = EMT()
        np.testing.assert_allclose(check.get_forces(), a.arrays["forces"], atol=1e-8)
        assert check.get_potential_energy() == pytest.approx(a.info["energy"], abs=1e-8)
        assert a.info["energy"] == pytest.approx(b.info["energy"])
        assert not np.allclose(a.arrays["forces"], b.arrays["forces"], atol=1e-3)


def test_the_experiments_train_and_validation_sets_are_randomly_oriented() -> None:
    """The experiment's own data (validation seed SYNTHETIC_VAL_SEED included) is not canonical."""
    from atomistic_scaling.experiment import settings, structures
    from atomistic_scaling.sweep import SweepConfig

    cfg = settings(True)
    sweep = SweepConfig(d_values=cfg["d_values"], batch_size=cfg["batch_size"])
    train, val = structures(cfg, sweep)
    assert len(val) == cfg["n_val"] and len(train) >= max(cfg["d_values"])
    for part in (train, val):
        assert np.median([_max_angle(a) for a in part]) > 10.0
