"""The sweep's runs: the warmup-stable-decay schedule, one run per D made of a shared trunk plus
a resumed cooldown (equal to a separate run), the trivial predictor, and the fit summary."""

from __future__ import annotations

import lightning as L
import numpy as np
import pytest
import torch
from ase import Atoms
from torch_geometric.loader import DataLoader

from atomistic_scaling.data import AtomsGraphDataset, elements_of, fit_atomic_energies
from atomistic_scaling.lit_module import ForceFieldModule, cooldown_steps, wsd_factor
from atomistic_scaling.sweep import (
    SweepConfig,
    _module,
    _stream_loader,
    evaluate,
    fit_problems,
    learned_cells,
    train_runs,
    trivial_loss,
)
from iclr26_common.lightning import quiet_trainer


def test_wsd_schedule() -> None:
    factors = [wsd_factor(s, warmup=2, total=10, cooldown_fraction=0.3) for s in range(10)]
    assert factors[:2] == [0.5, 1.0]  # linear warm-up
    assert factors[2:7] == [1.0] * 5  # stable
    assert factors[7:] == pytest.approx([1.0, 2 / 3, 1 / 3])  # linear decay over the last 3
    assert wsd_factor(500, warmup=2, total=None, cooldown_fraction=0.3) == 1.0  # a trunk
    assert cooldown_steps(10, 0.3) == 3 and cooldown_steps(3, 0.1) == 1


def _config(**kw) -> SweepConfig:
    base = dict(
        archs=["l1"],
        widths=[4],
        num_layers=1,
        d_values=[8, 12],
        seeds=[0],
        batch_size=2,
        warmup_steps=1,
        cooldown_fraction=0.5,
        cutoff=4.0,
        n_boot=2,
    )
    return SweepConfig(**{**base, **kw})


@pytest.mark.parametrize("augment", [False, True])
def test_branched_cooldown_equals_a_separate_run(structures: list[Atoms], augment: bool) -> None:
    """train_runs trains one constant-rate trunk and resumes each D's cooldown from it; the
    run for D = 12 (6 steps, cooldown from step 3) must equal a separate 6-step WSD run from
    the same seed on the same stream (weights, optimiser moments and augmentation draws)."""
    config = _config(rotation_augmentation=augment)
    train, val = structures[:12], structures[8:]
    train_set, val_set = AtomsGraphDataset(train, 4.0), AtomsGraphDataset(val, 4.0)
    refs = (fit_atomic_energies(train), elements_of(train))
    records = train_runs("l1", 4, 0, train_set, val_set, refs, config)
    assert [(r["D"], r["steps"]) for r in records] == [(8, 4), (12, 6)]

    L.seed_everything(0, verbose=False)
    straight = _module(config, "l1", 4, 6, 0)
    straight.model.set_atomic_references(*refs)
    order = np.random.default_rng(0).permutation(len(train_set))
    quiet_trainer(max_epochs=1, limit_val_batches=0).fit(
        straight, train_dataloaders=_stream_loader(train_set, order, 0, 6, 2)
    )
    expected = evaluate(straight, DataLoader(val_set, 64))
    assert records[1]["loss"] == pytest.approx(expected["loss"], rel=1e-6, abs=1e-7)
    assert records[1]["force_term"] == pytest.approx(expected["force_term"], rel=1e-6, abs=1e-7)
    # and the run for D = 8 is a different run (its own cooldown from step 2)
    assert records[0]["loss"] != pytest.approx(records[1]["loss"], rel=1e-6)


def test_references_come_from_structures_the_run_trains_on(structures: list[Atoms]) -> None:
    """Without given references each seed fits them on the first min(D) structures of its
    stream, which every run of the seed trains on. So the D = 8 run does not change when the
    labels of the 4 structures only the D = 12 run sees change; with references fitted on the
    whole training split (the experiment before the fix) it did."""
    config = _config(archs=["mpnn"], d_values=[8, 12])
    train = [a.copy() for a in structures[:12]]
    order = np.random.default_rng(0).permutation(12)
    shifted = [a.copy() for a in train]
    for i in order[8:]:
        shifted[i].info["energy"] += 3.0 * len(shifted[i])
    val_set = AtomsGraphDataset(structures[8:], 4.0)
    runs = {}
    for name, data in (("plain", train), ("shifted", shifted)):
        train_set = AtomsGraphDataset(data, 4.0)
        own = train_runs("mpnn", 4, 0, train_set, val_set, None, config)
        whole = (fit_atomic_energies(data), elements_of(data))
        runs[name] = (own, train_runs("mpnn", 4, 0, train_set, val_set, whole, config))
    assert runs["plain"][0][0]["loss"] == runs["shifted"][0][0]["loss"]
    assert runs["plain"][1][0]["loss"] != pytest.approx(runs["shifted"][1][0]["loss"], rel=1e-4)


def test_symmetry_as_a_loss_term_and_depth_reach_the_sweeps_runs(structures: list[Atoms]) -> None:
    """equivariance_weight > 0 (symmetry as a loss term) and num_layers (depth) are sweep knobs
    that change the trained MPNN; the experiment does not run either (README)."""
    train_set = AtomsGraphDataset(structures[:12], 4.0)
    val_set = AtomsGraphDataset(structures[8:], 4.0)

    def final(**kw) -> dict:
        config = _config(archs=["mpnn"], d_values=[12], **kw)
        (record,) = train_runs("mpnn", 4, 0, train_set, val_set, None, config)
        assert np.isfinite(record["loss"])
        return record

    plain = final()
    assert final(equivariance_weight=1.0)["loss"] != pytest.approx(plain["loss"], rel=1e-4)
    deeper = final(num_layers=2)
    assert deeper["n_params"] > plain["n_params"]


def test_wsd_factor_at_a_resumed_step_and_bad_cooldown() -> None:
    module = ForceFieldModule(
        arch="mpnn",
        width=4,
        num_layers=1,
        lr=0.1,
        warmup_steps=1,
        total_steps=10,
        cooldown_fraction=0.5,
    )
    assert module.lr_factor(5) == pytest.approx(1.0) and module.lr_factor(7) == pytest.approx(0.6)
    with pytest.raises(ValueError, match="cooldown_fraction"):
        ForceFieldModule(cooldown_fraction=1.5)


def test_trivial_predictor_loss(structures: list[Atoms]) -> None:
    """References from the data itself and zero forces: the energy term is the per-atom energy
    residual of the least-squares fit, the force term the mean force norm per atom."""
    val_set = AtomsGraphDataset(structures, 4.5)
    energies = fit_atomic_energies(structures)
    out = trivial_loss(val_set, energies)
    norms = [np.linalg.norm(a.arrays["forces"], axis=1).mean() for a in structures]
    assert out["force_term"] == pytest.approx(np.mean(norms), rel=1e-5)
    residual = [
        abs(a.info["energy"] - float(energies[torch.as_tensor(a.numbers)].sum())) / len(a)
        for a in structures
    ]
    assert out["energy_term"] == pytest.approx(np.mean(residual), rel=1e-4)
    assert out["loss"] == pytest.approx(out["energy_term"] + out["force_term"])


def test_fit_problems() -> None:
    good = {"alpha": 0.4, "beta": 0.3, "ci": {"alpha": (0.3, 0.5), "beta": (0.2, 0.4)}}
    assert fit_problems(good) == []
    negative = {**good, "beta": -0.006}
    assert fit_problems(negative) == ["beta = -0.006 outside (0, 2]"]
    steep = {**good, "alpha": 3.1}
    assert fit_problems(steep) == ["alpha = 3.1 outside (0, 2]"]
    one_seed = {"alpha": 0.4, "beta": 0.3, "ci": {}}
    assert len(fit_problems(one_seed)) == 2
    # more than 10 % of the bootstrap draws non-finite: the CIs describe a subset
    lumpy = {**good, "nonfinite_draws": {"alpha": 0.0, "beta": 0.0, "a": 0.12, "gamma": 0.5}}
    assert fit_problems(lumpy) == ["12% of the bootstrap draws of a non-finite (> 10%)"]
    assert fit_problems({**good, "nonfinite_draws": {"a": 0.1}}) == []
    too_few = {"alpha": float("nan"), "beta": float("nan"), "ci": {}, "cells_problem": "why"}
    assert fit_problems(too_few) == ["why"]


def test_learned_cells() -> None:
    """Cells on the trivial predictor's plateau (seed-mean loss above the bound) leave the fit;
    the rest must span >= 3 N and >= 3 D values."""
    cells = [(w, d) for w in (8, 16, 32) for d in (200, 400, 800, 1600)]
    n = np.array([{8: 2e3, 16: 6e3, 32: 2e4}[w] for w, _ in cells])
    plateau = np.array([1.0 if d <= 400 else 0.5 for _, d in cells])
    keep, why = learned_cells(cells, n, plateau, max_loss=0.8)
    assert keep.tolist() == [d > 400 for _, d in cells]
    assert "spanning 3 N and 2 D values" in why
    keep, why = learned_cells(cells, n, np.where(plateau > 0.9, 0.7, 0.5), max_loss=0.8)
    assert keep.all() and why == ""
    one_width = np.array([0.5 if w == 32 else 1.0 for w, _ in cells])
    assert "1 N and 4 D values" in learned_cells(cells, n, one_width, max_loss=0.8)[1]


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="too few"):
        _config(d_values=[2, 12])  # 1 step: no room for the warm-up before the cooldown
    with pytest.raises(ValueError, match="unknown archs"):
        _config(archs=["gnn"])
    assert _config(arch_widths={"l1": [2, 3]}).widths_of("l1") == [2, 3]
