"""Scaling sweep: architectures × widths, each trained for one epoch over ``max(d_checkpoints)``
structures with Lightning; the validation loss is read at every checkpoint D along the run
(loss-vs-D within runs) and compute is ``C = FLOPs per structure × D`` (measured FLOPs).
Then per architecture: ``L(N, D)`` and compute-frontier fits with bootstrap CIs and plots."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch_geometric.loader import DataLoader

from atomistic_scaling.constants import ARCHITECTURES
from atomistic_scaling.data import AtomsGraphDataset
from atomistic_scaling.lit_module import ForceFieldModule, force_field_loss, measure_step_flops
from atomistic_scaling.scaling import bootstrap_fit, compute_frontier
from iclr26_common.lightning import quiet_trainer

__all__ = ["LossVsDataCallback", "SweepConfig", "evaluate", "fit_sweep", "plot_sweep", "run_sweep"]


@dataclass
class SweepConfig:
    """The grid: ``archs`` × ``widths`` (× ``num_layers`` fixed), loss read at ``d_checkpoints``
    training structures within each single-epoch run."""

    archs: list[str] = field(default_factory=lambda: ["mpnn", "invariant", "l1", "l2"])
    widths: list[int] = field(default_factory=lambda: [8, 16, 32])
    num_layers: int = 2
    d_checkpoints: list[int] = field(default_factory=lambda: [100, 200, 400, 800, 1600])
    batch_size: int = 16
    lr: float = 3e-3
    cutoff: float = 4.5
    conservative: bool = False
    rotation_augmentation: bool = False
    seed: int = 0
    n_boot: int = 100

    def __post_init__(self) -> None:
        unknown = sorted(set(self.archs) - set(ARCHITECTURES))
        if unknown or not self.archs:
            raise ValueError(f"sweep: unknown archs {unknown}; choose from {ARCHITECTURES}")
        if not self.widths or min(self.widths) < 1:
            raise ValueError("sweep: widths must be a non-empty list of positive integers")
        if not self.d_checkpoints or min(self.d_checkpoints) < 1:
            raise ValueError("sweep: d_checkpoints must be a non-empty list of positive integers")
        self.d_checkpoints = sorted(set(self.d_checkpoints))


def evaluate(module: ForceFieldModule, loader: DataLoader) -> float:
    """Structure-weighted mean of the paper loss over ``loader`` (batches are moved to the
    module's device)."""
    was_training = module.training
    module.eval()
    total, count = 0.0, 0
    for batch in loader:
        batch = batch.to(module.device)
        with torch.set_grad_enabled(module.hparams.conservative):
            loss, _, _ = force_field_loss(module(batch), batch)
        total += float(loss) * int(batch.num_graphs)
        count += int(batch.num_graphs)
    module.train(was_training)
    return total / max(count, 1)


class LossVsDataCallback(L.Callback):
    """Evaluates the validation loss whenever the number of training structures seen reaches
    the next of ``checkpoints``; ``records`` holds ``(D, loss)`` pairs."""

    def __init__(self, checkpoints: Sequence[int], val_loader: DataLoader) -> None:
        self.checkpoints = sorted(checkpoints)
        self.val_loader = val_loader
        self.seen = 0
        self.records: list[tuple[int, float]] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:  # type: ignore[no-untyped-def]
        self.seen += int(batch.num_graphs)
        while (
            len(self.records) < len(self.checkpoints)
            and self.seen >= self.checkpoints[len(self.records)]
        ):
            self.records.append((self.seen, evaluate(pl_module, self.val_loader)))
        if len(self.records) == len(self.checkpoints):
            trainer.should_stop = True


def run_sweep(
    train_set: AtomsGraphDataset,
    val_set: AtomsGraphDataset,
    atomic_energies: torch.Tensor,
    config: SweepConfig,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Trains every (arch, width) once; one record per (arch, width, D checkpoint) with
    ``n_params``, ``D``, ``loss`` (validation), ``flops_per_structure``, ``compute`` and
    ``kappa`` (measured)."""
    if len(train_set) < max(config.d_checkpoints):
        raise ValueError(
            f"sweep: {len(train_set)} training structures < largest checkpoint "
            f"{max(config.d_checkpoints)}"
        )
    records: list[dict[str, Any]] = []
    for arch in config.archs:
        for width in config.widths:
            L.seed_everything(config.seed, verbose=False)
            module = ForceFieldModule(
                arch=arch,
                width=width,
                num_layers=config.num_layers,
                cutoff=config.cutoff,
                conservative=config.conservative,
                lr=config.lr,
                rotation_augmentation=config.rotation_augmentation and arch == "mpnn",
            )
            module.model.atomic_energies.copy_(atomic_energies)
            # FLOPs are counted on the CPU before fit (the counter is device-independent).
            probe = next(iter(DataLoader(train_set, config.batch_size)))
            flops = measure_step_flops(module, probe)
            gen = torch.Generator().manual_seed(config.seed)
            train_loader = DataLoader(train_set, config.batch_size, shuffle=True, generator=gen)
            callback = LossVsDataCallback(config.d_checkpoints, DataLoader(val_set, 64))
            # one device, CUDA when PyTorch sees it (ICLR26_DEVICE forces); no logger etc.
            trainer = quiet_trainer(max_epochs=1, callbacks=[callback], limit_val_batches=0)
            start = time.perf_counter()
            trainer.fit(module, train_dataloaders=train_loader)
            elapsed = time.perf_counter() - start
            for d, loss in callback.records:
                records.append(
                    {
                        "arch": arch,
                        "width": width,
                        "n_params": module.num_parameters,
                        "D": d,
                        "loss": loss,
                        "flops_per_structure": flops["flops_per_structure"],
                        "compute": flops["flops_per_structure"] * d,
                        "kappa": flops["kappa"],
                    }
                )
            final = callback.records[-1][1] if callback.records else float("nan")
            log(
                f"  {arch:9s} width {width:3d}  N={module.num_parameters:6d}  "
                f"final val loss {final:.4f}  ({elapsed:.1f} s)"
            )
    return records


def fit_sweep(records: list[dict[str, Any]], n_boot: int, seed: int = 0) -> dict[str, Any]:
    """Per architecture: ``L(N, D)`` fit (α, β, a, b, γ with bootstrap CIs) and the compute
    frontier fit (γ_c with CI); also the mean measured κ."""
    out: dict[str, Any] = {}
    for arch in dict.fromkeys(r["arch"] for r in records):
        rows = [r for r in records if r["arch"] == arch]
        n = np.array([r["n_params"] for r in rows], float)
        d = np.array([r["D"] for r in rows], float)
        loss = np.array([r["loss"] for r in rows], float)
        comp = np.array([r["compute"] for r in rows], float)
        nd = bootstrap_fit(
            np.stack([np.log(n), np.log(d)], 1), loss, ("alpha", "beta"), n_boot=n_boot, seed=seed
        )
        alpha, beta = (float(v) for v in nd.exponents)
        total = alpha + beta
        front = compute_frontier(comp, loss)
        entry: dict[str, Any] = {
            "alpha": alpha,
            "beta": beta,
            "a": beta / total if total > 0 else float("nan"),
            "b": alpha / total if total > 0 else float("nan"),
            "gamma": alpha * beta / total if total > 0 else float("nan"),
            "loss_floor": nd.loss_floor,
            "ci": dict(nd.ci),
            "kappa": float(np.mean([r["kappa"] for r in rows])),
            "frontier_points": len(front),
        }
        if len(front) >= 3:
            cf = bootstrap_fit(
                np.log(comp[front]), loss[front], ("gamma",), n_boot=n_boot, seed=seed
            )
            entry["gamma_c"] = float(cf.exponents[0])
            entry["ci"]["gamma_c"] = cf.ci.get("gamma", (float("nan"), float("nan")))
            entry["_frontier_fit"] = cf
        entry["_nd_fit"] = nd
        out[arch] = entry
    return out


def plot_sweep(records: list[dict[str, Any]], fits: dict[str, Any], out_dir: Path) -> list[str]:
    """Loss vs compute per architecture (points per width, frontier fit line) and loss vs D;
    PNGs written with the object API. Returns the file names."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out_dir.mkdir(parents=True, exist_ok=True)
    archs = list(fits)
    fig = Figure(figsize=(4 * len(archs), 3.4))
    FigureCanvasAgg(fig)
    for k, arch in enumerate(archs):
        ax = fig.add_subplot(1, len(archs), k + 1)
        rows = [r for r in records if r["arch"] == arch]
        for width in sorted({r["width"] for r in rows}):
            pts = [r for r in rows if r["width"] == width]
            ax.loglog(
                [r["compute"] for r in pts],
                [r["loss"] for r in pts],
                "o-",
                ms=3,
                label=f"w={width} (N={pts[0]['n_params']})",
            )
        cf = fits[arch].get("_frontier_fit")
        if cf is not None:
            comp = np.array([r["compute"] for r in rows])
            grid = np.logspace(np.log10(comp.min()), np.log10(comp.max()), 50)
            ax.loglog(
                grid,
                cf.predict(np.log(grid)[:, None]),
                "k--",
                label=f"frontier γ_c={fits[arch]['gamma_c']:.2f}",
            )
        ax.set_title(f"{arch}: α={fits[arch]['alpha']:.2f} β={fits[arch]['beta']:.2f}")
        ax.set_xlabel("compute C (FLOPs)")
        if k == 0:
            ax.set_ylabel("validation loss")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out_dir / "loss_vs_compute.png", dpi=110)

    fig = Figure(figsize=(5, 3.6))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for arch in archs:
        rows = [r for r in records if r["arch"] == arch]
        widest = max(r["width"] for r in rows)
        pts = [r for r in rows if r["width"] == widest]
        ax.loglog(
            [r["D"] for r in pts],
            [r["loss"] for r in pts],
            "o-",
            ms=3,
            label=f"{arch} (w={widest}) β={fits[arch]['beta']:.2f}",
        )
    ax.set_xlabel("training structures D")
    ax.set_ylabel("validation loss")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "loss_vs_data.png", dpi=110)
    return ["loss_vs_compute.png", "loss_vs_data.png"]


def summary_table(fits: dict[str, Any]) -> str:
    """Markdown table of the fitted exponents with 95 % bootstrap CIs."""

    def cell(entry: dict[str, Any], key: str) -> str:
        value = entry.get(key, float("nan"))
        lo, hi = entry["ci"].get(key, (float("nan"), float("nan")))
        return f"{value:.3f} [{lo:.3f}, {hi:.3f}]"

    lines = [
        "| arch | α (N) | β (D) | a = β/(α+β) | γ = αβ/(α+β) | γ_c (frontier) | κ measured |",
        "|---|---|---|---|---|---|---|",
    ]
    for arch, e in fits.items():
        lines.append(
            f"| {arch} | {cell(e, 'alpha')} | {cell(e, 'beta')} | {cell(e, 'a')} | "
            f"{cell(e, 'gamma')} | {cell(e, 'gamma_c')} | {e['kappa']:.1f} |"
        )
    return "\n".join(lines)


def public_fits(fits: dict[str, Any]) -> dict[str, Any]:
    """``fits`` without the fit objects (JSON-ready)."""
    return {
        arch: {k: v for k, v in entry.items() if not k.startswith("_")}
        for arch, entry in fits.items()
    }


def config_dict(config: SweepConfig) -> dict[str, Any]:
    return asdict(config)
