"""Lightning module: the paper's energy + force loss, a warmup-stable-decay schedule whose
cooldowns can branch from one constant-rate trunk (exactly one run per D), optional rotation
augmentation and symmetry as a loss term, FLOPs per step measured with
``torch.utils.flop_counter``."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import lightning as L
import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from atomistic_scaling._pyg import Batch, DataLoader, scatter
from atomistic_scaling.model import ForceField, count_parameters
from atomistic_scaling.symmetry import random_rotation, rotate_batch

__all__ = [
    "ForceFieldModule",
    "TrainState",
    "cooldown_steps",
    "equivariance_penalty",
    "force_field_loss",
    "measure_step_flops",
    "trivial_loss",
    "wsd_factor",
]


def force_field_loss(
    pred: dict[str, Tensor], batch: Batch, lambda_e: float = 1.0, lambda_f: float = 1.0
) -> tuple[Tensor, Tensor, Tensor]:
    """Paper loss per structure ``λ_e/n |E - Ê| + λ_f/n Σ_i ‖f_i - f̂_i‖₂``, batch mean.

    Returns ``(loss, energy_term, force_term)`` (scalars); ``n`` atoms of each structure.
    """
    n_atoms = batch.n_atoms.to(pred["energy"].dtype)
    e_term = (pred["energy"] - batch.energy).abs() / n_atoms
    atom_batch = batch.batch
    f_err = (pred["forces"] - batch.forces).norm(dim=-1)
    f_term = scatter(f_err, atom_batch, dim=0, dim_size=n_atoms.shape[0]) / n_atoms
    e_mean, f_mean = e_term.mean(), f_term.mean()
    return lambda_e * e_mean + lambda_f * f_mean, e_mean, f_mean


def trivial_loss(val_set: Dataset, atomic_energies: torch.Tensor) -> dict[str, float]:
    """The paper loss of the trivial predictor on ``val_set``: the per-element reference
    energies ``Σ_i E0[z_i]`` (fitted on the training split) and zero forces."""
    totals, count = np.zeros(3), 0
    for batch in DataLoader(val_set, 64):
        energy = scatter(atomic_energies[batch.z], batch.batch, dim=0, dim_size=batch.num_graphs)
        pred = {"energy": energy, "forces": torch.zeros_like(batch.forces)}
        size = int(batch.num_graphs)
        totals += size * np.array([float(t) for t in force_field_loss(pred, batch)])
        count += size
    loss, energy, forces = totals / count
    return {"loss": loss, "energy_term": energy, "force_term": forces}


def wsd_factor(step: int, warmup: int, total: int | None, cooldown_fraction: float) -> float:
    """Warmup-stable-decay learning-rate factor at optimiser step ``step`` (0-based): linear
    warm-up over ``warmup`` steps, constant, then (when ``total`` is given) a linear decay to 0
    over the last ``cooldown_steps(total, cooldown_fraction)`` steps of the ``total``-step run."""
    factor = min(1.0, (step + 1) / max(1, warmup))
    if total is not None:
        cool = cooldown_steps(total, cooldown_fraction)
        if cool > 0 and step >= total - cool:
            factor *= max(0.0, (total - step) / cool)
    return factor


def cooldown_steps(total: int, cooldown_fraction: float) -> int:
    """Steps of the final linear decay of a ``total``-step WSD run (at least 1 when the
    fraction is positive)."""
    if cooldown_fraction <= 0:
        return 0
    return max(1, round(cooldown_fraction * total))


@dataclass
class TrainState:
    """Everything a run continues from at optimiser step ``step``: model weights, optimiser
    state and the augmentation generator (see :meth:`ForceFieldModule.snapshot`)."""

    step: int
    model: dict[str, Tensor]
    optimizer: dict[str, Any]
    rotation_generator: Tensor


def equivariance_penalty(
    pred: dict[str, Tensor], rotated: dict[str, Tensor], batch: Batch, rotation: Tensor
) -> Tensor:
    """Symmetry as a loss term: the paper loss between the predictions on the rotated batch and
    the rotated predictions, ``mean_s (|E(Rx) - E(x)| + Σ_i ‖F_i(Rx) - F_i(x) R‖) / n_s``."""
    n_atoms = batch.n_atoms.to(pred["energy"].dtype)
    e_term = (rotated["energy"] - pred["energy"]).abs() / n_atoms
    f_err = (rotated["forces"] - pred["forces"] @ rotation).norm(dim=-1)
    f_term = scatter(f_err, batch.batch, dim=0, dim_size=n_atoms.shape[0]) / n_atoms
    return (e_term + f_term).mean()


class ForceFieldModule(L.LightningModule):
    """Trains a :class:`~atomistic_scaling.model.ForceField`.

    Args:
        arch, width, num_layers, cutoff, num_rbf, conservative, l_max: the model knobs
            (:class:`~atomistic_scaling.model.ForceField`; ``l_max`` for ``arch="nequip"``).
        lr: peak Adam learning rate of the warmup-stable-decay schedule (:func:`wsd_factor`).
        warmup_steps: linear warm-up steps.
        total_steps: length of the run for the final decay; None keeps the rate constant after
            the warm-up (a trunk from which :meth:`resume` branches cooldowns).
        cooldown_fraction: the final linear decay to 0 spans this fraction of ``total_steps``.
        lambda_e, lambda_f: loss weights (paper: equal).
        rotation_augmentation: rotate each training batch by a fresh random rotation.
        equivariance_weight: weight of :func:`equivariance_penalty` added to the training loss
            (the paper's "symmetry as a loss term"; one extra forward pass per step); 0 = off.
    """

    def __init__(
        self,
        arch: str = "l1",
        width: int = 16,
        num_layers: int = 2,
        cutoff: float = 4.5,
        num_rbf: int = 8,
        conservative: bool = False,
        lr: float = 3e-3,
        warmup_steps: int = 10,
        total_steps: int | None = None,
        cooldown_fraction: float = 0.2,
        lambda_e: float = 1.0,
        lambda_f: float = 1.0,
        rotation_augmentation: bool = False,
        equivariance_weight: float = 0.0,
        l_max: int = 1,
    ) -> None:
        super().__init__()
        if not 0 <= cooldown_fraction <= 1:
            raise ValueError("cooldown_fraction must be in [0, 1]")
        if total_steps is not None and total_steps < 1:
            raise ValueError("total_steps must be >= 1 (or None for a constant rate)")
        if equivariance_weight < 0:
            raise ValueError("equivariance_weight must be >= 0")
        self.save_hyperparameters()
        self.model = ForceField(arch, width, num_layers, cutoff, num_rbf, conservative, l_max)
        self._rot_gen = torch.Generator().manual_seed(0)
        #: Optimiser steps already taken by the run this one continues (see :meth:`resume`).
        self.step_offset = 0
        self._resume_optimizer: dict[str, Any] | None = None
        self._trivial_val_loss: float | None = None

    @property
    def num_parameters(self) -> int:
        return count_parameters(self.model)

    def forward(self, batch: Batch, compute_stress: bool = False) -> dict[str, Tensor]:
        return self.model(batch, compute_stress=compute_stress)

    def _predict(self, batch: Batch, grad: bool, compute_stress: bool = False) -> dict[str, Tensor]:
        """The model's outputs on ``batch`` (with the stress when ``compute_stress`` and the model
        is conservative), with autograd on when ``grad`` or when the forces are
        conservative (``F = -dE/dpos`` needs it even in evaluation). Lightning's ``test``,
        ``validate`` and ``predict`` run under ``torch.inference_mode``, where no gradient can
        be taken: a conservative model leaves it, with a copy of the batch (tensors made in
        inference mode cannot enter autograd)."""
        if not self.model.conservative:
            with torch.set_grad_enabled(grad):
                return self(batch)
        with torch.inference_mode(False), torch.enable_grad():
            if batch.pos.is_inference():
                batch = batch.clone()
            return self(batch, compute_stress=compute_stress)

    def lr_factor(self, step: int) -> float:
        """:func:`wsd_factor` of this run at its optimiser step ``step``."""
        hp = self.hparams
        return wsd_factor(step, hp.warmup_steps, hp.total_steps, hp.cooldown_fraction)

    def snapshot(self) -> TrainState:
        """The state of a running fit after ``step_offset + global_step`` optimiser steps."""
        optimizer = self.trainer.optimizers[0]
        return TrainState(
            step=self.step_offset + int(self.trainer.global_step),
            model=copy.deepcopy(self.model.state_dict()),
            optimizer=copy.deepcopy(optimizer.state_dict()),
            rotation_generator=self._rot_gen.get_state(),
        )

    def resume(self, state: TrainState) -> None:
        """Continue from ``state`` in the next ``fit``: weights, optimiser moments and the
        augmentation generator are restored and the schedule goes on at ``state.step``, so a
        trunk of ``s`` steps plus a resumed fit of ``T - s`` steps equals one ``T``-step run."""
        self.model.load_state_dict(state.model)
        self._resume_optimizer = state.optimizer
        self._rot_gen.set_state(state.rotation_generator)
        self.step_offset = state.step

    def on_fit_start(self) -> None:
        datamodule = getattr(self.trainer, "datamodule", None)
        if datamodule is not None and hasattr(datamodule, "atomic_energies"):
            energies = datamodule.atomic_energies()
            self.model.set_atomic_references(energies, datamodule.training_elements())
            val_set = getattr(datamodule, "val_set", None)
            if val_set is not None and len(val_set):
                # the trivial predictor (references, zero forces): the loss to beat
                self._trivial_val_loss = trivial_loss(val_set, energies)["loss"]
                self.print(f"trivial predictor val_loss {self._trivial_val_loss:.4f}")

    def on_validation_epoch_end(self) -> None:
        if self._trivial_val_loss is not None:
            self.log(
                "trivial_val_loss", self._trivial_val_loss, sync_dist=True
            )  # same on every rank

    def on_train_start(self) -> None:
        if self._resume_optimizer is None:
            return
        optimizer = self.trainer.optimizers[0]
        optimizer.load_state_dict(self._resume_optimizer)
        for group in optimizer.param_groups:  # the first resumed step's rate
            group["initial_lr"] = self.hparams.lr
            group["lr"] = self.hparams.lr * self.lr_factor(self.step_offset)
        self._resume_optimizer = None

    def _step(self, batch: Batch, stage: str) -> Tensor:
        train = stage == "train"
        if train and self.hparams.rotation_augmentation:
            # drawn from the CPU generator (the same rotations on every device), then moved
            rotation = random_rotation(self._rot_gen, batch.pos.dtype).to(batch.pos.device)
            batch = rotate_batch(batch, rotation)
        pred = self._predict(batch, grad=train)
        loss, e_term, f_term = force_field_loss(
            pred, batch, self.hparams.lambda_e, self.hparams.lambda_f
        )
        size = int(batch.num_graphs)
        sync = not train  # epoch-level val/test means over all ranks under DDP
        log = {"batch_size": size, "sync_dist": sync}
        if train and self.hparams.equivariance_weight > 0:
            rotation = random_rotation(self._rot_gen, batch.pos.dtype).to(batch.pos.device)
            penalty = equivariance_penalty(
                pred, self(rotate_batch(batch, rotation)), batch, rotation
            )
            loss = loss + self.hparams.equivariance_weight * penalty
            self.log("train_equivariance", penalty.detach(), **log)
        self.log(f"{stage}_loss", loss.detach(), prog_bar=not train, **log)
        self.log(f"{stage}_energy_mae_per_atom", e_term.detach(), **log)
        self.log(f"{stage}_force_l2", f_term.detach(), **log)
        return loss

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self._step(batch, "test")

    def predict_step(self, batch: Batch, batch_idx: int) -> dict[str, Tensor]:
        """``energy`` [B], ``forces`` [n_atoms, 3] and, for a conservative model, ``stress``
        [B, 3, 3] (written by :class:`~atomistic_scaling.predictions.PredictionsWriter`)."""
        out = self._predict(batch, grad=False, compute_stress=self.model.conservative)
        return {key: value.detach() for key, value in out.items()}

    def configure_optimizers(self) -> Any:
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        offset = self.step_offset
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: self.lr_factor(s + offset))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def measure_step_flops(module: ForceFieldModule, batch: Batch) -> dict[str, float]:
    """FLOPs of one training step (forward + backward) on ``batch`` counted with
    ``torch.utils.flop_counter.FlopCounterMode``; ``kappa = flops / (3 N n_atoms)`` as in the
    paper's ``C ≈ 3 κ N D`` with D counted in atoms.

    Only matmul-like ops are counted by the flop counter (elementwise ops, scatter and the e3nn
    einsum-free paths are not): a lower bound, see the README.
    """
    from torch.utils.flop_counter import FlopCounterMode

    module.train()
    counter = FlopCounterMode(display=False)
    with counter:
        pred = module(batch)
        loss, _, _ = force_field_loss(pred, batch)
        loss.backward()
    module.zero_grad(set_to_none=True)
    flops = float(counter.get_total_flops())
    n_atoms = int(batch.pos.shape[0])
    n_params = module.num_parameters
    return {
        "flops_per_step": flops,
        "flops_per_structure": flops / int(batch.num_graphs),
        "flops_per_atom": flops / n_atoms,
        "kappa": flops / (3.0 * n_params * n_atoms),
    }
