"""The measurement of the ``medimg-gfscreen.glance_focus`` experiment: settings, data,
training and evaluation, returning numbers only (:func:`measure` -> :class:`Measurement`).

Per seed: synthetic CT (``medimg_gfscreen.synth``, written as NIfTI + Decathlon datalist and read
back through the real MONAI pipeline) -> Focus + Glance trained jointly with the GF-Screen
objective -> on the held-out volumes, glance-focus at overlap :data:`OVERLAP` (the Glance gate
``p > GATE`` on that tile grid) and Focus on every tile (MONAI sliding window) at
:data:`OVERLAP` and :data:`COARSE_OVERLAP`, with FLOPs per volume; the first seed of a full run
also retrains the Glance against the fixed Focus for each :data:`ABLATIONS` objective. The
claims, the report prose and the plot are :mod:`medimg_gfscreen.experiment`'s.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from iclr26_common import seed_everything
from iclr26_common.device import choose_device
from medimg_gfscreen.settings import (
    FocusSettings,
    GlanceSettings,
    InferenceSettings,
    ObjectiveSettings,
    OptimSettings,
)

GATE = 0.9  # the paper's gate, medimg_gfscreen.constants.GATE_THRESHOLD
ROI = (32, 32, 16)  # Focus / Glance sub-volume (voxels at 1x1x3 mm)
VOLUME = (96, 96, 32)  # synthetic CT volume
OVERLAP = 0.75  # the paper's inference overlap: glance-focus and the sliding window
COARSE_OVERLAP = 0.5  # the cheaper plain sliding window (b) must also beat
PAPER_EPOCHS = 500  # upstream max_epochs: the cosine horizon the miniature trains the start of
#: ``GFScreenModule`` arguments of the miniature
MODEL_KW: dict[str, Any] = {
    "focus": FocusSettings(arch="unet", unet_channels=(11, 22, 44, 88)),
    "glance": GlanceSettings(
        backbone="resnet18", widths=(8, 16, 32, 64), conv1_stride=2, norm="group"
    ),
    "objective": ObjectiveSettings(),
    "optim": OptimSettings(lr=1e-3, cosine_epochs=PAPER_EPOCHS),
    # sw_batch_size: tiles per inference batch (4: per-call overhead dominated on the CPU)
    "inference": InferenceSettings(overlap=OVERLAP, threshold=GATE, sw_batch_size=16),
    "roi_size": ROI,
    "num_samples": 4,
}
#: label -> ``ObjectiveSettings`` fields changed from the paper's objective
ABLATIONS: dict[str, dict[str, Any]] = {
    "paper objective (detection reward, group = CT)": {},
    "CE-only glance (no RL)": {"rl_weight": 0.0},
    "Dice reward": {"reward": "dice"},
    "group = batch (16 sub-volumes)": {"group_by": "batch"},
}
METHODS = ("sliding_window", "glance_focus", "sliding_window_coarse")  # order of tables / bars


def settings(quick: bool) -> dict[str, Any]:
    """Scale of a run: cases per seed (``n_train`` / ``n_test``), joint-training ``epochs``,
    ``glance_epochs`` of each ablation, ``seeds``, and whether the ablations run."""
    if quick:
        return {
            "n_train": 8,
            "n_test": 2,
            "epochs": 3,
            "glance_epochs": 1,
            "seeds": [0],
            "ablations": False,
        }
    return {
        "n_train": 16,
        "n_test": 12,
        "epochs": 80,
        "glance_epochs": 4,
        "seeds": [0, 1, 2],
        "ablations": True,
    }


def make_trainer(epochs: int):
    """One device from iclr26_common.device (CUDA when PyTorch sees it; ICLR26_DEVICE=cpu
    forces the CPU, where the budget is defined), no logger / checkpoints / validation,
    deterministic algorithms where torch has them."""
    from iclr26_common.lightning import quiet_trainer

    return quiet_trainer(max_epochs=epochs, limit_val_batches=0, deterministic="warn")


def evaluate(module, volumes, flops: dict[str, int], sliding: bool = True) -> dict[str, Any]:
    """Glance-focus (overlap 0.75) and, if ``sliding``, Focus on every tile at 0.75 and 0.5 on
    the test volumes -> per-method metric summaries with FLOPs per volume."""
    from medimg_gfscreen.inference import sliding_window_focus, tile_slices
    from medimg_gfscreen.metrics import case_metrics, summarize

    device = choose_device()
    module = module.to(device).eval()
    spacing = module.hparams.spacing
    voxel_ml = spacing[0] * spacing[1] * spacing[2] / 1000.0
    cases: dict[str, list] = {m: [] for m in METHODS}
    tiles = {m: 0 for m in METHODS}
    selected = 0
    for name, cpu_image, label in volumes:
        image = cpu_image.to(device)
        result = module.screen(image, device="cpu")
        tiles["glance_focus"] += result.n_tiles
        selected += result.n_selected
        cases["glance_focus"].append(
            case_metrics(name, result.mask, label, spacing, selection_rate=result.selection_rate)
        )
        if sliding:
            for method, overlap in (
                ("sliding_window", OVERLAP),
                ("sliding_window_coarse", COARSE_OVERLAP),
            ):
                probs = sliding_window_focus(
                    image,
                    module.focus,
                    ROI,
                    overlap,
                    MODEL_KW["inference"].sw_batch_size,
                    device="cpu",
                )
                cases[method].append(case_metrics(name, probs[0].argmax(0), label, spacing))
                tiles[method] += len(tile_slices(image.shape[2:], ROI, overlap))
    n = len(volumes)
    gf = summarize(cases["glance_focus"], voxel_ml)
    gf["focus_gflops_per_volume"] = selected * flops["focus"] / n / 1e9
    gf["glance_gflops_per_volume"] = tiles["glance_focus"] * flops["glance"] / n / 1e9
    gf["total_gflops_per_volume"] = gf["focus_gflops_per_volume"] + gf["glance_gflops_per_volume"]
    gf["tiles_per_volume"] = tiles["glance_focus"] / n
    gf["pooled_selection_rate"] = selected / max(tiles["glance_focus"], 1)
    out = {"glance_focus": gf}
    if sliding:
        for method in ("sliding_window", "sliding_window_coarse"):
            summary = summarize(cases[method], voxel_ml)
            summary["focus_gflops_per_volume"] = tiles[method] * flops["focus"] / n / 1e9
            summary["total_gflops_per_volume"] = summary["focus_gflops_per_volume"]
            summary["tiles_per_volume"] = tiles[method] / n
            out[method] = summary
    return out


@dataclass
class SeedMeasurement:
    """One seed's numbers (JSON-ready: ``dataclasses.asdict`` is the result's ``per_seed`` entry).

    ``main``: method (:data:`METHODS`) -> metric summary (``metrics.summarize`` plus GFLOPs per
    volume and tiles per volume; glance-focus also its pooled selection rate); ``ablations``:
    objective label (:data:`ABLATIONS`, first seed of a full run only) -> the glance-focus
    summary of the Glance retrained against the fixed Focus.
    """

    seed: int
    main: dict[str, dict[str, float]]
    train_s: float  # wall time of the joint training
    ablations: dict[str, dict[str, float]]
    final_train_reward: float  # last epoch's mean detection reward on the training sub-volumes
    eval_s: float  # wall time of the evaluation of the jointly trained model (no ablation)
    focus_tile_gflops: float  # Focus GFLOPs per ROI tile
    glance_tile_gflops: float  # Glance GFLOPs per ROI tile


@dataclass
class Measurement:
    """Everything :func:`measure` measured: the settings it ran with, one
    :class:`SeedMeasurement` per seed (in ``config["seeds"]`` order) and the torch threads."""

    config: dict[str, Any]
    per_seed: list[SeedMeasurement]
    torch_threads: int

    def mains(self) -> list[dict[str, dict[str, float]]]:
        """The per-seed ``main`` summaries (what
        :func:`medimg_gfscreen.experiment.build_claims` judges)."""
        return [s.main for s in self.per_seed]

    def method_means(self) -> dict[str, dict[str, float]]:
        """Seed mean (NaN dropped) of every metric of every method."""
        first = self.per_seed[0].main
        return {
            m: {k: seed_mean([s[m][k] for s in self.mains()]) for k in first[m]} for m in METHODS
        }


def _volumes(dm) -> list[tuple[str, Any, Any]]:
    loader = dm.test_dataloader()
    return [(str(b["name"][0]), b["image"], b["label"][0, 0]) for b in loader]


def _datamodule(seed: int, config: dict[str, Any], root: Path):
    """Writes the seed's synthetic CT under ``root / seed{seed}`` (its datalist's ``validation``
    list is the held-out test set) and returns the data module reading it."""
    from medimg_gfscreen.data import GFScreenDataModule
    from medimg_gfscreen.synth import generate_dataset

    n_cases = config["n_train"] + config["n_test"]
    datalist = generate_dataset(
        root / f"seed{seed}",
        n_cases=n_cases,
        shape=VOLUME,
        seed=seed,
        val_fraction=config["n_test"] / n_cases,
    )
    return GFScreenDataModule(
        str(datalist),
        roi_size=ROI,
        num_samples=MODEL_KW["num_samples"],
        batch_size=4,
        cache_dir=str(root / "cache"),
    )


def _ablations(
    module, dm, volumes, flops: dict[str, int], seed: int, config: dict[str, Any]
) -> dict[str, dict[str, float]]:
    """Each :data:`ABLATIONS` objective: a fresh Glance trained for ``glance_epochs`` against the
    trained, fixed Focus of ``module``, evaluated glance-focus only."""
    from medimg_gfscreen.lit_module import GFScreenModule

    out = {}
    for label, overrides in ABLATIONS.items():
        seed_everything(seed + 1000)
        objective = replace(MODEL_KW["objective"], **overrides, train_focus=False)
        variant = GFScreenModule(**{**MODEL_KW, "objective": objective})
        variant.focus.load_state_dict(module.focus.state_dict())
        make_trainer(config["glance_epochs"]).fit(variant, datamodule=dm)
        out[label] = evaluate(variant, volumes, flops, sliding=False)["glance_focus"]
    return out


def _measure_seed(seed: int, config: dict[str, Any], root: Path, out_dir: Path) -> SeedMeasurement:
    """Data, joint training, FLOP counts and evaluation of one seed; the first seed also saves
    its weights to ``out_dir`` and runs the ablations (when ``config["ablations"]``)."""
    import torch

    from medimg_gfscreen.inference import count_flops
    from medimg_gfscreen.lit_module import GFScreenModule

    seed_everything(seed)
    dm = _datamodule(seed, config, root)
    t0 = time.perf_counter()
    module = GFScreenModule(**MODEL_KW)
    trainer = make_trainer(config["epochs"])
    trainer.fit(module, datamodule=dm)
    train_s = time.perf_counter() - t0
    final_reward = float(trainer.callback_metrics.get("train/reward_epoch", float("nan")))
    flops = {"focus": count_flops(module.focus, ROI), "glance": count_flops(module.glance, ROI)}
    volumes = _volumes(dm)
    t0 = time.perf_counter()
    main = evaluate(module, volumes, flops)
    eval_s = time.perf_counter() - t0
    ablations: dict[str, dict[str, float]] = {}
    if seed == config["seeds"][0]:
        pre = {"region": dm.region, "prenormalized": dm.prenormalized}
        torch.save(module.cpu().export_weights(pre), out_dir / f"gfscreen_weights_seed{seed}.pt")
        if config["ablations"]:
            ablations = _ablations(module, dm, volumes, flops, seed, config)
    return SeedMeasurement(
        seed=seed,
        main=main,
        train_s=train_s,
        ablations=ablations,
        final_train_reward=final_reward,
        eval_s=eval_s,
        focus_tile_gflops=flops["focus"] / 1e9,
        glance_tile_gflops=flops["glance"] / 1e9,
    )


def measure(config: dict[str, Any], out_dir: Path) -> Measurement:
    """Runs every seed of ``config`` (:func:`settings`) on fresh synthetic data in a temporary
    folder; writes the first seed's weights into ``out_dir``; no plot, no prose."""
    import torch

    with tempfile.TemporaryDirectory(prefix="gfscreen-data-") as scratch:
        per_seed = [_measure_seed(seed, config, Path(scratch), out_dir) for seed in config["seeds"]]
    return Measurement(config=config, per_seed=per_seed, torch_threads=torch.get_num_threads())


def seed_mean(values: list[float]) -> float:
    """Mean of ``values`` with NaN dropped (NaN when none is left): the seed means."""
    values = [v for v in values if v == v]  # drop NaN
    return statistics.fmean(values) if values else float("nan")
