"""Lightning module: the paper's energy + force loss, optional rotation augmentation for the
unconstrained model, FLOPs per step measured with ``torch.utils.flop_counter``."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from torch import Tensor
from torch_geometric.data import Batch
from torch_geometric.utils import scatter

from atomistic_scaling.model import ForceField, count_parameters

__all__ = ["ForceFieldModule", "force_field_loss", "measure_step_flops", "random_rotation"]


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


def random_rotation(generator: torch.Generator | None = None, dtype=torch.float32) -> Tensor:
    """A uniformly random proper rotation (3, 3) via QR of a Gaussian matrix."""
    q, r = torch.linalg.qr(torch.randn(3, 3, generator=generator, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
    if torch.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q.to(dtype)


def rotate_batch(batch: Batch, rotation: Tensor) -> Batch:
    """Rotates positions, cells and force labels of ``batch`` by ``rotation`` (row vectors)."""
    batch = batch.clone()
    batch.pos = batch.pos @ rotation
    batch.cell = batch.cell @ rotation
    if getattr(batch, "forces", None) is not None:
        batch.forces = batch.forces @ rotation
    return batch


class ForceFieldModule(L.LightningModule):
    """Trains a :class:`~atomistic_scaling.model.ForceField`.

    Args:
        arch, width, num_layers, cutoff, num_rbf, conservative: the model knobs.
        lr: Adam learning rate (constant after ``warmup_steps`` of linear warm-up, so losses
            read along one run stand in for runs with that many samples).
        lambda_e, lambda_f: loss weights (paper: equal).
        rotation_augmentation: rotate each training batch by a random rotation (for ``mpnn``).
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
        lambda_e: float = 1.0,
        lambda_f: float = 1.0,
        rotation_augmentation: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model = ForceField(arch, width, num_layers, cutoff, num_rbf, conservative)
        self._rot_gen = torch.Generator().manual_seed(0)

    @property
    def num_parameters(self) -> int:
        return count_parameters(self.model)

    def forward(self, batch: Batch, compute_stress: bool = False) -> dict[str, Tensor]:
        return self.model(batch, compute_stress=compute_stress)

    def on_fit_start(self) -> None:
        datamodule = getattr(self.trainer, "datamodule", None)
        if datamodule is not None and hasattr(datamodule, "atomic_energies"):
            self.model.atomic_energies.copy_(datamodule.atomic_energies())

    def _step(self, batch: Batch, stage: str) -> Tensor:
        if stage == "train" and self.hparams.rotation_augmentation:
            # drawn from the CPU generator (the same rotations on every device), then moved
            rotation = random_rotation(self._rot_gen, batch.pos.dtype).to(batch.pos.device)
            batch = rotate_batch(batch, rotation)
        with torch.set_grad_enabled(stage == "train" or self.hparams.conservative):
            pred = self(batch)
        loss, e_term, f_term = force_field_loss(
            pred, batch, self.hparams.lambda_e, self.hparams.lambda_f
        )
        size = int(batch.num_graphs)
        sync = stage != "train"  # epoch-level val/test means over all ranks under DDP
        log = {"batch_size": size, "sync_dist": sync}
        self.log(f"{stage}_loss", loss.detach(), prog_bar=stage != "train", **log)
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
        with torch.set_grad_enabled(self.hparams.conservative):
            out = self(batch)
        return {key: value.detach() for key, value in out.items()}

    def configure_optimizers(self) -> Any:
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        warmup = max(1, self.hparams.warmup_steps)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
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
