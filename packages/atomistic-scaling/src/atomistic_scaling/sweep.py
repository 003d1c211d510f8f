"""Scaling sweep: architectures × widths × seeds × D, one single-epoch warmup-stable-decay run
per D (Lightning; the cooldowns branch from one constant-rate trunk per arch, width and seed,
which equals separate runs), compute ``C = FLOPs per structure × D`` (measured FLOPs). Then per
architecture: ``L(N, D)``, compute-frontier and train-time-frontier fits on seed means with CIs
from a bootstrap over seeds, and the trivial predictor's loss (plots and tables:
:mod:`atomistic_scaling.sweep_report`)."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import Subset

from atomistic_scaling._pyg import DataLoader
from atomistic_scaling.constants import ARCHITECTURES, MAX_NONFINITE, MIN_LEVELS
from atomistic_scaling.data import AtomsGraphDataset, graph_references
from atomistic_scaling.lit_module import (
    ForceFieldModule,
    cooldown_steps,
    force_field_loss,
    measure_step_flops,
    trivial_loss,
)
from atomistic_scaling.scaling import compute_optimal, frontier_fit, seed_bootstrap_fit
from iclr26_common.lightning import quiet_lightning, quiet_trainer
from iclr26_common.progress import progress

__all__ = [
    "MAX_EXPONENT",
    "SnapshotCallback",
    "SweepConfig",
    "evaluate",
    "fit_problems",
    "fit_sweep",
    "learned_cells",
    "run_sweep",
    "start_line",
    "sweep_jobs",
    "train_runs",
    "trivial_loss",
]


@dataclass
class SweepConfig:
    """The grid: ``archs`` × widths (``widths``, or ``arch_widths[arch]``) × ``seeds`` ×
    ``d_values``, one warmup-stable-decay run per D (cooldowns branched from one trunk per
    arch, width and seed; see :func:`run_sweep`)."""

    archs: list[str] = field(default_factory=lambda: ["mpnn", "invariant", "l1", "l2"])
    widths: list[int] = field(default_factory=lambda: [8, 16, 32])
    arch_widths: dict[str, list[int]] = field(default_factory=dict)
    num_layers: int = 2
    #: rotation order of the ``nequip`` peer (the other archs carry theirs in the name)
    l_max: int = 1
    d_values: list[int] = field(default_factory=lambda: [200, 400, 800, 1600])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    batch_size: int = 4
    lr: float = 1e-2
    warmup_steps: int = 10
    cooldown_fraction: float = 0.2
    cutoff: float = 4.5
    conservative: bool = False
    rotation_augmentation: bool = False
    equivariance_weight: float = 0.0
    n_boot: int = 100
    workers: int = 1

    def __post_init__(self) -> None:
        unknown = sorted(set(self.archs) - set(ARCHITECTURES))
        if unknown or not self.archs:
            raise ValueError(f"sweep: unknown archs {unknown}; choose from {ARCHITECTURES}")
        for arch in self.archs:
            widths = self.widths_of(arch)
            if not widths or min(widths) < 1:
                raise ValueError(f"sweep: widths of {arch} must be positive integers")
        if not self.d_values or min(self.d_values) < 1:
            raise ValueError("sweep: d_values must be a non-empty list of positive integers")
        if not self.seeds:
            raise ValueError("sweep: seeds must be a non-empty list")
        if self.batch_size < 1 or self.workers < 1:
            raise ValueError("sweep: batch_size and workers must be >= 1")
        for name in ("lr", "cooldown_fraction", "cutoff", "equivariance_weight"):
            value = getattr(self, name)
            if not math.isfinite(value):
                raise ValueError(f"sweep: --{name} must be a finite number, got {value}")
        if self.lr <= 0 or self.cutoff <= 0 or self.equivariance_weight < 0:
            raise ValueError("sweep: --lr and --cutoff must be > 0, --equivariance_weight >= 0")
        self.d_values = sorted(set(self.d_values))
        for d in self.d_values:
            steps = self.steps_of(d)
            if steps - cooldown_steps(steps, self.cooldown_fraction) < max(1, self.warmup_steps):
                raise ValueError(
                    f"sweep: D={d} gives {steps} steps of batch {self.batch_size}, too few for "
                    f"{self.warmup_steps} warm-up steps before the cooldown; raise the smallest D"
                )

    def widths_of(self, arch: str) -> list[int]:
        return list(self.arch_widths.get(arch, self.widths))

    def steps_of(self, d: int) -> int:
        """Optimiser steps of the run with D training structures (D rounded up to batches)."""
        return -(-d // self.batch_size)


def evaluate(module: ForceFieldModule, loader: DataLoader) -> dict[str, float]:
    """Structure-weighted means of the paper loss and its energy / force terms over ``loader``
    (batches are moved to the module's device)."""
    was_training = module.training
    module.eval()
    totals = np.zeros(3)
    count = 0
    for batch in loader:
        batch = batch.to(module.device)
        with torch.set_grad_enabled(module.model.conservative):
            terms = force_field_loss(module(batch), batch)
        size = int(batch.num_graphs)
        totals += size * np.array([float(t.detach()) for t in terms])
        count += size
    module.train(was_training)
    loss, energy, forces = totals / max(count, 1)
    return {"loss": loss, "energy_term": energy, "force_term": forces}


class SnapshotCallback(L.Callback):
    """Records :meth:`ForceFieldModule.snapshot` (and the seconds trained so far) after the
    optimiser steps in ``steps``; stops the fit after the last one."""

    def __init__(self, steps: Sequence[int]) -> None:
        self.steps = sorted(set(steps))
        self.states: dict[int, Any] = {}
        self.seconds: dict[int, float] = {}
        self._start = 0.0

    def on_train_start(self, trainer, pl_module) -> None:  # type: ignore[no-untyped-def]
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:  # type: ignore[no-untyped-def]
        step = int(trainer.global_step)
        if step in self.steps and step not in self.states:
            self.states[step] = pl_module.snapshot()
            self.seconds[step] = time.perf_counter() - self._start
        if step >= self.steps[-1]:
            trainer.should_stop = True


def _stream_loader(
    train_set: AtomsGraphDataset, order: np.ndarray, start: int, stop: int, batch_size: int
) -> DataLoader:
    """Batches ``start .. stop-1`` of the single-epoch stream ``order`` (no reshuffling)."""
    indices = order[start * batch_size : stop * batch_size].tolist()
    return DataLoader(Subset(train_set, indices), batch_size, shuffle=False)


def _module(
    config: SweepConfig, arch: str, width: int, total_steps: int | None, seed: int
) -> ForceFieldModule:
    module = ForceFieldModule(
        arch=arch,
        width=width,
        num_layers=config.num_layers,
        cutoff=config.cutoff,
        conservative=config.conservative,
        lr=config.lr,
        warmup_steps=config.warmup_steps,
        total_steps=total_steps,
        cooldown_fraction=config.cooldown_fraction,
        rotation_augmentation=config.rotation_augmentation,
        equivariance_weight=config.equivariance_weight,
        l_max=config.l_max,
    )
    module._rot_gen.manual_seed(seed)
    return module


def train_runs(
    arch: str,
    width: int,
    seed: int,
    train_set: AtomsGraphDataset,
    val_set: AtomsGraphDataset,
    references: tuple[torch.Tensor, list[int]] | None,
    config: SweepConfig,
) -> list[dict[str, Any]]:
    """One warmup-stable-decay run per D of ``config.d_values`` for one (arch, width, seed).

    ``references`` = (per-element reference energies (MAX_Z,), elements), or None: fitted on
    the first ``min(d_values)`` structures of the seed's stream, which every run of the seed
    trains on, so no run uses labels of structures outside its own D (and the runs still share
    their trunk).

    The run with D structures takes ``T = ceil(D / batch)`` steps over the first D structures
    of the seed's stream, at a constant rate after the warm-up until its cooldown starts at
    ``s = T - cooldown_steps(T)``. Runs with the same seed agree up to their own ``s``, so one
    constant-rate trunk is trained to the largest ``s`` and each run's cooldown resumes from
    the trunk's state at its ``s`` (exactly a separate run: ``tests/test_sweep.py``)."""
    with quiet_lightning(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*validation_step.*no `val_dataloader`.*")
        val_loader = DataLoader(val_set, 64)
        order = np.random.default_rng(seed).permutation(len(train_set))
        if references is None:
            references = graph_references(train_set, order[: min(config.d_values)])
        totals = {d: config.steps_of(d) for d in config.d_values}
        starts = {d: t - cooldown_steps(t, config.cooldown_fraction) for d, t in totals.items()}
        L.seed_everything(seed, verbose=False)
        trunk = _module(config, arch, width, None, seed)
        trunk.model.set_atomic_references(*references)
        snapshots = SnapshotCallback(starts.values())
        trainer = quiet_trainer(max_epochs=1, callbacks=[snapshots], limit_val_batches=0)
        trainer.fit(
            trunk,
            train_dataloaders=_stream_loader(
                train_set, order, 0, max(starts.values()), config.batch_size
            ),
        )
        records = []
        for d, total in totals.items():
            start = starts[d]
            branch = _module(config, arch, width, total, seed)
            branch.resume(snapshots.states[start])
            began = time.perf_counter()
            trainer = quiet_trainer(max_epochs=1, limit_val_batches=0)
            trainer.fit(
                branch,
                train_dataloaders=_stream_loader(train_set, order, start, total, config.batch_size),
            )
            seconds = snapshots.seconds[start] + time.perf_counter() - began
            records.append(
                {
                    "arch": arch,
                    "width": width,
                    "seed": seed,
                    "n_params": branch.num_parameters,
                    "D": min(total * config.batch_size, len(train_set)),
                    "steps": total,
                    **evaluate(branch, val_loader),
                    "train_seconds": seconds,
                }
            )
        return records


def _job(
    arch: str, width: int, seed: int, data: tuple, config: SweepConfig
) -> tuple[list[dict[str, Any]], float]:
    """Runs of one (arch, width, seed) with FLOPs per structure filled in; and its seconds."""
    train_set, val_set, references = data
    start = time.perf_counter()
    probe = _module(config, arch, width, None, 0)
    # FLOPs are counted on the CPU (the counter is device-independent), once per job.
    flops = measure_step_flops(probe, next(iter(DataLoader(train_set, config.batch_size))))
    runs = train_runs(arch, width, seed, train_set, val_set, references, config)
    for record in runs:
        record["flops_per_structure"] = flops["flops_per_structure"]
        record["compute"] = flops["flops_per_structure"] * record["D"]
        record["kappa"] = flops["kappa"]
    return runs, time.perf_counter() - start


_WORKER_DATA: tuple | None = None


def _init_worker(data: tuple, threads: int) -> None:
    import signal

    global _WORKER_DATA
    # Ctrl-C reaches the whole process group: the parent stops the workers (one line, exit
    # 130); a worker's own KeyboardInterrupt would print a traceback of its queue wait.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(threads)
    _WORKER_DATA = data


def _stop_workers(pool: Any) -> None:
    """Terminate a ProcessPoolExecutor's workers at once (on Ctrl-C or an error):
    ``shutdown(wait=False)`` alone would let a running job finish before the interpreter
    exits."""
    pool.shutdown(wait=False, cancel_futures=True)
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()


def _worker_job(arch: str, width: int, seed: int, config: SweepConfig):  # type: ignore[no-untyped-def]
    assert _WORKER_DATA is not None
    return _job(arch, width, seed, _WORKER_DATA, config)


Job = tuple[str, int, int]


def sweep_jobs(config: SweepConfig) -> list[Job]:
    """The (arch, width, seed) jobs of ``config``, in the order their records are returned."""
    return [
        (arch, width, seed)
        for arch in config.archs
        for width in config.widths_of(arch)
        for seed in config.seeds
    ]


def start_line(
    config: SweepConfig, done: Mapping[Job, Any], *, saved_in: object = None, first: str = ""
) -> str:
    """The line ``atomistic-scaling sweep`` shows on stderr before any slow step (data, then
    the first job, can take tens of seconds): the jobs of the grid, how many a resumed sweep
    finished before (``done``, read from ``saved_in``), how many are left to run, and
    ``first``, what it does before the first job (e.g. generating the data)."""
    jobs = sweep_jobs(config)
    finished = sum(job in done for job in jobs)
    widths = sorted({len(config.widths_of(arch)) for arch in config.archs})
    grid = (
        f"{len(config.archs)} arch(s) x {'/'.join(map(str, widths))} width(s) x "
        f"{len(config.seeds)} seed(s), D = {', '.join(map(str, config.d_values))}"
    )
    text = f"sweep: {len(jobs)} job(s) ({grid}); "
    if done:
        text += f"resuming: {finished} finished before"
        text += f" (in {saved_in}), " if saved_in is not None else ", "
    text += f"{len(jobs) - finished} to run"
    if config.workers > 1:
        text += f" in {config.workers} processes"
    return text + (f"; {first} first" if first else "")


def run_sweep(
    train_set: AtomsGraphDataset,
    val_set: AtomsGraphDataset,
    references: tuple[torch.Tensor, list[int]] | None,
    config: SweepConfig,
    log: Callable[[str], None] = print,
    done: Mapping[Job, list[dict[str, Any]]] | None = None,
    on_job: Callable[[Job, list[dict[str, Any]]], Any] | None = None,
    quiet: bool = True,
) -> list[dict[str, Any]]:
    """Trains every (arch, width, seed) with :func:`train_runs`; one record per (arch, width,
    seed, D) with ``n_params``, ``D``, ``loss`` (validation) and its energy / force terms,
    ``train_seconds``, ``flops_per_structure``, ``compute`` and ``kappa`` (measured).
    ``references`` = (per-element reference energies (MAX_Z,), training elements), or None to
    fit them per seed on the structures every run of that seed trains on (:func:`train_runs`).

    With ``config.workers > 1`` the jobs run in that many spawned processes (one torch thread
    each; the largest models first); every job seeds itself, so the records do not depend on
    which process ran it. ``done``: the records of jobs already finished (a resumed sweep's),
    by (arch, width, seed): not trained again. ``on_job(job, records)`` is called as each job
    finishes (``atomistic-scaling sweep`` saves it there). ``quiet=False`` shows progress over
    the jobs on stderr. Ctrl-C stops the worker processes too."""
    need = config.steps_of(max(config.d_values)) * config.batch_size
    if len(train_set) < need:
        raise ValueError(
            f"sweep: {len(train_set)} training structures < the {need} of the largest D"
        )
    jobs = sweep_jobs(config)
    data = (train_set, val_set, references)
    results: dict[Job, list[dict[str, Any]]] = {j: list(done[j]) for j in jobs if j in (done or {})}
    todo = [job for job in jobs if job not in results]
    description = "sweep jobs" + (f" ({len(results)} done before)" if results else "")

    def report(job: Job, runs: list[dict[str, Any]], seconds: float) -> None:
        results[job] = runs
        if on_job is not None:
            on_job(job, runs)
        losses = " ".join(f"{r['loss']:.3f}" for r in runs)
        log(
            f"  {job[0]:9s} width {job[1]:3d} seed {job[2]}  N={runs[0]['n_params']:6d}  "
            f"val loss by D {losses}  ({seconds:.1f} s)"
        )

    if config.workers == 1 or len(todo) <= 1:
        for job in progress(todo, description=description, quiet=quiet):
            report(job, *_job(*job, data, config))
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        order = sorted(todo, key=lambda j: (-ARCHITECTURES.index(j[0]), -j[1]))  # slow first
        context = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(
            min(config.workers, len(todo)),
            mp_context=context,
            initializer=_init_worker,
            initargs=(data, 1),
        )
        try:
            futures = {pool.submit(_worker_job, *job, config): job for job in order}
            finished = as_completed(futures)
            for future in progress(
                finished, description=description, total=len(futures), quiet=quiet
            ):
                report(futures[future], *future.result())
        except BaseException:
            _stop_workers(pool)
            raise
        pool.shutdown()
    return [record for job in jobs for record in results[job]]


#: Fit usability (fixed before any run): an exponent outside (0, MAX_EXPONENT] is no power law
#: over our grid -- a non-positive one means no decay, one above 2 means the term collapses into
#: L∞ within a factor of a few in N or D (published neural scaling exponents are below 1).
MAX_EXPONENT = 2.0


def fit_problems(entry: dict[str, Any]) -> list[str]:
    """Reasons the ``L(N, D)`` fit of one architecture cannot carry a verdict (empty if none):
    too few learned cells to fit (``entry["cells_problem"]``), an exponent outside
    (0, MAX_EXPONENT], no bootstrap CI (fewer than 2 seeds), or more than MAX_NONFINITE of the
    bootstrap draws of α, β or a non-finite."""
    if entry.get("cells_problem"):
        return [entry["cells_problem"]]
    problems = []
    for name in ("alpha", "beta"):
        value = entry[name]
        if not (np.isfinite(value) and 0 < value <= MAX_EXPONENT):
            problems.append(f"{name} = {value:.3g} outside (0, {MAX_EXPONENT:g}]")
        if name not in entry["ci"]:
            problems.append(f"no bootstrap CI for {name} (one seed)")
    for name, fraction in entry.get("nonfinite_draws", {}).items():
        if name in ("alpha", "beta", "a") and fraction > MAX_NONFINITE:
            problems.append(
                f"{fraction:.0%} of the bootstrap draws of {name} non-finite "
                f"(> {MAX_NONFINITE:.0%})"
            )
    return problems


def learned_cells(
    cells: list[tuple[int, int]], n_params: np.ndarray, mean_loss: np.ndarray, max_loss: float
) -> tuple[np.ndarray, str]:
    """The cells (width, D) whose seed-mean loss is at most ``max_loss`` (the per-cell
    "learned" rule: a cell still on the trivial predictor's plateau is no point of a power
    law; ``inf`` keeps every cell), as a boolean mask, and the reason the rest cannot be fitted
    ("" if they can): fewer than 5 cells, or fewer than MIN_LEVELS distinct N or D values."""
    keep = np.asarray(mean_loss) <= max_loss
    kept = [c for c, k in zip(cells, keep, strict=True) if k]
    n_levels = len({float(n) for n, k in zip(n_params, keep, strict=True) if k})
    d_levels = len({c[1] for c in kept})
    if len(kept) < 5 or n_levels < MIN_LEVELS or d_levels < MIN_LEVELS:
        which = (
            "cells" if max_loss == np.inf else f"cells learned (seed-mean loss <= {max_loss:.3g})"
        )
        return keep, (
            f"only {len(kept)} of {len(cells)} {which}, spanning {n_levels} N and {d_levels} D "
            f"values: need >= 5 cells and >= {MIN_LEVELS} of each"
        )
    return keep, ""


def _cells(rows: list[dict[str, Any]]) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Sorted (width, D) cells of one architecture and their losses (cells, seeds)."""
    seeds = sorted({r["seed"] for r in rows})
    cells = sorted({(r["width"], r["D"]) for r in rows})
    losses = np.full((len(cells), len(seeds)), np.nan)
    for r in rows:
        losses[cells.index((r["width"], r["D"])), seeds.index(r["seed"])] = r["loss"]
    if np.isnan(losses).any():
        raise ValueError("sweep: every (width, D) cell needs a run for every seed")
    return cells, losses


def fit_sweep(
    records: list[dict[str, Any]],
    n_boot: int,
    seed: int = 0,
    frontiers: bool = True,
    max_loss: float | None = None,
) -> dict[str, Any]:
    """Per architecture: the ``L(N, D)`` fit (α, β, a, b, γ) and the compute-frontier fit (γ_c)
    on seed-mean losses with CIs from a bootstrap over seeds, the train-time frontier (γ_t),
    the mean measured κ, the final loss at the largest N and D, and the fit's problems.
    ``max_loss``: only cells with a seed-mean loss at most this enter the ``L(N, D)`` fit
    (:func:`learned_cells`; the others are listed in ``dropped_cells``); when too few remain
    (or the grid itself is too small) there is no fit (NaN exponents, the reason in
    ``problems``). The frontiers use every cell.
    ``frontiers=False`` skips the two frontier fits (no claim rests on them)."""
    out: dict[str, Any] = {}
    for arch in dict.fromkeys(r["arch"] for r in records):
        rows = [r for r in records if r["arch"] == arch]
        cells, losses = _cells(rows)
        first = {(r["width"], r["D"]): r for r in rows}
        n = np.array([first[c]["n_params"] for c in cells], float)
        d = np.array([c[1] for c in cells], float)
        groups = np.array([c[0] for c in cells])
        compute = np.array([first[c]["compute"] for c in cells], float)
        seconds = np.array(
            [
                np.mean([r["train_seconds"] for r in rows if (r["width"], r["D"]) == c])
                for c in cells
            ]
        )
        bound = np.inf if max_loss is None else max_loss
        keep, cells_problem = learned_cells(cells, n, losses.mean(axis=1), bound)
        largest = cells.index((max(c[0] for c in cells), max(c[1] for c in cells)))
        entry: dict[str, Any] = {
            "alpha": float("nan"),
            "beta": float("nan"),
            **compute_optimal(float("nan"), float("nan")),
            "loss_floor": float("nan"),
            "ci": {},
            "kappa": float(np.mean([r["kappa"] for r in rows])),
            "final_loss": float(losses[largest].mean()),
            "seeds": losses.shape[1],
            "fitted_cells": int(keep.sum()),
            "dropped_cells": [
                [int(w), int(dd)] for (w, dd), k in zip(cells, keep, strict=True) if not k
            ],
        }
        if cells_problem:
            entry["cells_problem"] = cells_problem
        else:
            x = np.stack([np.log(n), np.log(d)], 1)[keep]
            nd = seed_bootstrap_fit(x, losses[keep], groups[keep], ("alpha", "beta"), n_boot, seed)
            alpha, beta = (float(v) for v in nd.exponents)
            entry.update(alpha=alpha, beta=beta, **compute_optimal(alpha, beta))
            entry.update(loss_floor=nd.loss_floor, ci=dict(nd.ci))
            entry["nonfinite_draws"] = {k: round(v, 4) for k, v in nd.nonfinite.items()}
            entry["_nd_fit"] = nd
        for key, cost in (("gamma_c", compute), ("gamma_t", seconds)) if frontiers else ():
            fit = frontier_fit(cost, losses, groups, n_boot, seed)
            if fit is not None:
                entry[key] = float(fit.exponents[0])
                if "gamma" in fit.ci:
                    entry["ci"][key] = fit.ci["gamma"]
                entry[f"_{key}_fit"] = fit
        entry["problems"] = fit_problems(entry)
        out[arch] = entry
    return out
