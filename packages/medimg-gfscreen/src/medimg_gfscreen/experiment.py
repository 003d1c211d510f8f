"""Miniature GF-Screen experiment for ``iclr26 reproduce`` (entry point
``medimg-gfscreen.glance_focus``).

Synthetic CT (``medimg_gfscreen.synth``, written as NIfTI + Decathlon datalist and read back
through the real MONAI pipeline) -> train Focus + Glance jointly with the GF-Screen objective
-> on held-out volumes compare (a) Focus on every tile (MONAI sliding window) with (b) the
Glance gate (p > 0.9) on the same tile grid. Three claims, each judged on its own by a rule
fixed here before any run (module constants):

  (a) lesion recall of glance-focus >= sliding-window recall - ``RECALL_MAX_DROP`` (5 points),
      and the sliding window itself reaches ``MIN_SLIDING_RECALL`` (otherwise the comparison is
      vacuous: not held);
  (b) Focus FLOPs per volume reduced >= ``FOCUS_FLOP_REDUCTION_MIN`` x (paper: 5.7x), with at
      least one tile selected over the test set (a gate that selects nothing is not a screen);
  (c) fewer false-positive voxels on healthy cases than the sliding window (strictly fewer; if
      the sliding window has none the claim cannot be shown and counts as not held).

Ablations (reported, no verdict): Glance trained against the trained, fixed Focus with
the paper's objective, CE only (no RL), Dice instead of detection reward, and advantages over
the whole batch (16 sub-volumes) instead of per CT (4). Scale (volume count, sizes, epochs,
seeds) was chosen by timing against the budget (full <= 10 min, quick <= 60 s on 2 CPU cores),
not by outcome.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from iclr26_common import Claim, Experiment, Result, seed_everything
from iclr26_common.device import choose_device

PAPER = (
    "GF-Screen: Glance and Focus Reinforcement Learning for Pan-cancer Screening (arXiv 2601.19103)"
)
CLAIM = (
    "A Glance policy trained with group-relative RL on Focus rewards sends only a small fraction "
    "of CT sub-volumes to the segmentation model, keeping lesion recall and DSC close to running "
    "Focus everywhere at a fraction of the compute (paper: 5.7x less, 16.7 % selected)."
)
# Pre-registered thresholds (fixed before the first run).
RECALL_MAX_DROP = 0.05
# (a) is only a comparison when Focus on every tile finds lesions at all: with sliding-window
# recall below this, (a) is not held ("Focus did not learn"), never held vacuously (0 >= 0 - 5).
MIN_SLIDING_RECALL = 0.5
FOCUS_FLOP_REDUCTION_MIN = 3.0
GATE = 0.9  # the paper's gate, medimg_gfscreen.constants.GATE_THRESHOLD

ROI = (32, 32, 16)
VOLUME = (96, 96, 32)
OVERLAP = 0.5
MODEL_KW: dict[str, Any] = {
    "focus_arch": "unet",
    "unet_channels": (8, 16, 32, 64),
    "glance_backbone": "resnet18",
    "glance_widths": (8, 16, 32, 64),
    "glance_conv1_stride": 2,
    "roi_size": ROI,
    "num_samples": 4,
    "overlap": OVERLAP,
    "threshold": GATE,
    "lr": 1e-3,
}
ABLATIONS: dict[str, dict[str, Any]] = {
    "paper objective (detection reward, group = CT)": {},
    "CE-only glance (no RL)": {"rl_weight": 0.0},
    "Dice reward": {"reward": "dice"},
    "group = batch (16 sub-volumes)": {"group_by": "batch"},
}


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"n_train": 8, "n_test": 4, "epochs": 3, "glance_epochs": 1, "seeds": [0],
                "ablations": False}  # fmt: skip
    return {"n_train": 16, "n_test": 12, "epochs": 80, "glance_epochs": 4, "seeds": [0],
            "ablations": True}  # fmt: skip


def _trainer(epochs: int):
    """One device from iclr26_common.device (CUDA when PyTorch sees it; ICLR26_DEVICE=cpu
    forces the CPU, where the budget is defined), no logger / checkpoints / validation."""
    from iclr26_common.lightning import quiet_trainer

    return quiet_trainer(max_epochs=epochs, limit_val_batches=0)


def _evaluate(
    module, volumes, focus_tile: int, glance_tile: int, sliding: bool = True
) -> dict[str, Any]:
    """Glance-focus (and, if ``sliding``, Focus on every tile) on the test volumes -> per-method
    metric summaries."""
    from medimg_gfscreen.inference import sliding_window_focus
    from medimg_gfscreen.metrics import case_metrics, summarize

    device = choose_device()
    module = module.to(device)
    spacing = module.hparams.spacing
    voxel_ml = spacing[0] * spacing[1] * spacing[2] / 1000.0
    sw_cases, gf_cases = [], []
    tiles = selected = 0
    for name, cpu_image, label in volumes:
        image = cpu_image.to(device)
        result = module.screen(image)
        tiles += result.n_tiles
        selected += result.n_selected
        gf_cases.append(
            case_metrics(name, result.mask, label, spacing, selection_rate=result.selection_rate)
        )
        if sliding:
            probs = sliding_window_focus(image, module.focus.eval(), ROI, OVERLAP)
            sw_cases.append(case_metrics(name, probs[0].argmax(0), label, spacing))
    gf = summarize(gf_cases, voxel_ml)
    gf["focus_gflops_per_volume"] = selected * focus_tile / len(volumes) / 1e9
    gf["glance_gflops_per_volume"] = tiles * glance_tile / len(volumes) / 1e9
    gf["tiles_per_volume"] = tiles / len(volumes)
    out = {"glance_focus": gf}
    if sliding:
        sw = summarize(sw_cases, voxel_ml)
        sw["focus_gflops_per_volume"] = tiles * focus_tile / len(volumes) / 1e9
        sw["tiles_per_volume"] = tiles / len(volumes)
        out["sliding_window"] = sw
    return out


def _volumes(dm) -> list[tuple[str, Any, Any]]:
    loader = dm.test_dataloader()
    return [(str(b["name"][0]), b["image"], b["label"][0, 0]) for b in loader]


def _one_seed(seed: int, config: dict[str, Any], root: Path, out_dir: Path) -> dict[str, Any]:
    from medimg_gfscreen.data import GFScreenDataModule
    from medimg_gfscreen.inference import count_flops
    from medimg_gfscreen.lit_module import GFScreenModule
    from medimg_gfscreen.synth import generate_dataset

    seed_everything(seed)
    data = root / f"seed{seed}"
    n_cases = config["n_train"] + config["n_test"]
    datalist = generate_dataset(
        data, n_cases=n_cases, shape=VOLUME, seed=seed, val_fraction=config["n_test"] / n_cases
    )  # the datalist's 'validation' list is the held-out test set
    dm = GFScreenDataModule(
        str(datalist), roi_size=ROI, num_samples=MODEL_KW["num_samples"], batch_size=4
    )
    t0 = time.perf_counter()
    module = GFScreenModule(**MODEL_KW)
    trainer = _trainer(config["epochs"])
    trainer.fit(module, datamodule=dm)
    train_s = time.perf_counter() - t0
    # last epoch's mean detection reward on the training sub-volumes (how well Focus detects there)
    final_reward = float(trainer.callback_metrics.get("train/reward_epoch", float("nan")))
    focus_tile = count_flops(module.focus, ROI)
    glance_tile = count_flops(module.glance, ROI)
    volumes = _volumes(dm)
    t0 = time.perf_counter()
    main = _evaluate(module, volumes, focus_tile, glance_tile)
    eval_s = time.perf_counter() - t0
    out: dict[str, Any] = {"main": main, "train_s": train_s, "eval_s": eval_s, "ablations": {}}
    out["final_train_reward"] = final_reward
    if seed == config["seeds"][0]:
        import torch

        torch.save(module.cpu().export_weights(), out_dir / f"gfscreen_weights_seed{seed}.pt")
    out["focus_tile_gflops"] = focus_tile / 1e9
    out["glance_tile_gflops"] = glance_tile / 1e9
    if config["ablations"]:
        for label, overrides in ABLATIONS.items():
            seed_everything(seed + 1000)
            variant = GFScreenModule(**{**MODEL_KW, **overrides, "train_focus": False})
            variant.focus.load_state_dict(module.focus.state_dict())
            _trainer(config["glance_epochs"]).fit(variant, datamodule=dm)
            res = _evaluate(variant, volumes, focus_tile, glance_tile, sliding=False)
            res = res["glance_focus"]
            out["ablations"][label] = res
    return out


def _mean(values: list[float]) -> float:
    values = [v for v in values if v == v]  # drop NaN
    return statistics.fmean(values) if values else float("nan")


def _plot(per_seed: list[dict[str, Any]], path: Path, title: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ["lesion_recall", "dsc_lesion_cases", "selection_rate"]
    methods = ["sliding_window", "glance_focus"]
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    width = 0.38
    for j, method in enumerate(methods):
        vals = [_mean([s["main"][method][k] for s in per_seed]) for k in keys]
        ax.bar([i + (j - 0.5) * width for i in range(len(keys))], vals, width, label=method)
    ax.set_xticks(range(len(keys)), ["lesion recall", "DSC (lesion cases)", "selection rate"])
    ax.set_ylim(0, 1.05)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def build_claims(per_seed: list[dict[str, Any]]) -> tuple[list[Claim], dict[str, Any]]:
    """The three pre-registered claims from the per-seed ``main`` metric summaries (seed means),
    and the aggregated numbers the report prints."""

    def agg(method: str, key: str) -> float:
        return _mean([s["main"][method][key] for s in per_seed])

    sw_recall, gf_recall = (
        agg("sliding_window", "lesion_recall"),
        agg("glance_focus", "lesion_recall"),
    )
    sw_flops = agg("sliding_window", "focus_gflops_per_volume")
    gf_flops = agg("glance_focus", "focus_gflops_per_volume")
    glance_flops = agg("glance_focus", "glance_gflops_per_volume")
    # a gate that selects no tile at all saves everything and screens nothing: (b) needs >= 1
    selected_any = gf_flops > 0
    reduction = sw_flops / gf_flops if selected_any else None
    total_reduction = sw_flops / (gf_flops + glance_flops)
    sw_fp, gf_fp = (
        agg("sliding_window", "fp_voxels_healthy"),
        agg("glance_focus", "fp_voxels_healthy"),
    )
    values = {"sw_recall": sw_recall, "gf_recall": gf_recall, "reduction": reduction,
              "total_reduction": total_reduction, "sw_fp": sw_fp, "gf_fp": gf_fp}  # fmt: skip
    claims = [
        Claim(
            text="Glance-then-Focus keeps lesion recall close to Focus on every tile.",
            criterion=f"seed-mean lesion recall: glance-focus >= sliding window - {RECALL_MAX_DROP}, "
            f"and sliding window >= {MIN_SLIDING_RECALL} (else Focus did not learn: not held)",
            measured={"glance_focus": gf_recall, "sliding_window": sw_recall},
            verdict=gf_recall >= sw_recall - RECALL_MAX_DROP and sw_recall >= MIN_SLIDING_RECALL,
        ),
        Claim(
            text="The Glance gate cuts Focus compute by a large factor (paper: 5.7x).",
            criterion=f"Focus FLOPs per volume, sliding window / glance-focus >= "
            f"{FOCUS_FLOP_REDUCTION_MIN}, with at least one tile selected over the test set",
            measured={
                "reduction": reduction,
                "with_glance_flops": total_reduction,
                "selection_rate": agg("glance_focus", "selection_rate"),
            },
            verdict=selected_any and reduction >= FOCUS_FLOP_REDUCTION_MIN,
        ),
        Claim(
            text="Glance-then-Focus gives fewer false positives on healthy cases.",
            criterion="seed-mean predicted lesion voxels per healthy case: glance-focus < sliding "
            "window (strictly; none in the sliding window = not shown = not held)",
            measured={"glance_focus": gf_fp, "sliding_window": sw_fp},
            verdict=gf_fp < sw_fp,
        ),
    ]
    return claims, values


def run(quick: bool, out_dir: Path) -> Result:
    import torch

    started = time.perf_counter()
    config = settings(quick)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    per_seed = []
    with tempfile.TemporaryDirectory(prefix="gfscreen-data-") as scratch:
        for seed in config["seeds"]:
            per_seed.append(_one_seed(seed, config, Path(scratch), out_dir))

    claims, values = build_claims(per_seed)
    sw_recall, gf_recall = values["sw_recall"], values["gf_recall"]
    reduction, total_reduction = values["reduction"], values["total_reduction"]
    sw_fp, gf_fp = values["sw_fp"], values["gf_fp"]

    def agg(method: str, key: str) -> float:
        return _mean([s["main"][method][key] for s in per_seed])

    mode = "quick" if quick else "full"
    plots = [
        _plot(
            per_seed,
            out_dir / "recall_dsc_selection.png",
            f"GF-Screen miniature ({mode}), synthetic CT, seeds {config['seeds']}",
        )
    ]
    methods = ("sliding_window", "glance_focus")
    keys = ("lesion_recall", "case_recall", "dsc_all", "dsc_lesion_cases", "nsd_lesion_cases",
            "fp_voxels_healthy", "fp_case_rate_healthy", "selection_rate",
            "focus_gflops_per_volume")  # fmt: skip
    table = ["| metric | sliding window | glance-focus |", "|---|---:|---:|"]
    for key in keys:
        table.append(f"| {key} | {agg(methods[0], key):.4g} | {agg(methods[1], key):.4g} |")
    ablation_rows = {}
    if config["ablations"]:
        table += ["", "Ablations (Glance retrained against the trained Focus, fixed):", "",
                  "| glance objective | lesion recall | DSC (lesion cases) | FP voxels (healthy) "
                  "| selection rate |", "|---|---:|---:|---:|---:|"]  # fmt: skip
        for label in ABLATIONS:
            row = {k: _mean([s["ablations"][label][k] for s in per_seed])
                   for k in ("lesion_recall", "dsc_lesion_cases", "fp_voxels_healthy",
                             "selection_rate")}  # fmt: skip
            ablation_rows[label] = row
            table.append(
                f"| {label} | {row['lesion_recall']:.3f} | {row['dsc_lesion_cases']:.3f} | "
                f"{row['fp_voxels_healthy']:.1f} | {row['selection_rate']:.3f} |"
            )
    verdicts = ", ".join(f"({k}) {c.verdict}" for k, c in zip("abc", claims, strict=True))
    caveat = (
        f" Focus did not learn to detect the synthetic lesions at this scale (sliding-window "
        f"recall {sw_recall:.3f} < {MIN_SLIDING_RECALL}), so (b) and (c) measure a gate in front "
        "of a Focus that finds nothing; they are not evidence for the paper's claim."
        if sw_recall < MIN_SLIDING_RECALL
        else ""
    )
    reduction_text = (
        "without bound (no tile selected)" if reduction is None else f"{reduction:.1f}x"
    )
    summary = (
        f"Lesion recall {gf_recall:.3f} (glance-focus) vs {sw_recall:.3f} (sliding window); Focus "
        f"FLOPs reduced {reduction_text} ({total_reduction:.1f}x counting the Glance), selection "
        f"rate {agg('glance_focus', 'selection_rate'):.3f}; FP voxels per healthy case "
        f"{gf_fp:.1f} vs {sw_fp:.1f}. Claims: {verdicts}.{caveat}"
    )
    scale = (
        f"{config['n_train']} train / {config['n_test']} test synthetic CT volumes of "
        f"{VOLUME} voxels at 1x1x3 mm per seed; ROI {ROI}, tile overlap {OVERLAP}; Focus = MONAI "
        f"UNet {MODEL_KW['unet_channels']} (not SwinUNETR: too slow on CPU), Glance = ResNet-18 "
        f"widths {MODEL_KW['glance_widths']}, stem stride 2; {config['epochs']} epochs x "
        f"{config['n_train'] // 4} steps of 4x4 sub-volumes; seeds {config['seeds']}"
    )
    rewards = [s["final_train_reward"] for s in per_seed]
    details = "\n".join(table) + (
        f"\n\nLast-epoch mean detection reward on the training sub-volumes (Focus): "
        f"{', '.join(f'{r:.3f}' for r in rewards)}."
        f"\n\nTime: training {sum(s['train_s'] for s in per_seed):.0f} s, evaluation "
        f"{sum(s['eval_s'] for s in per_seed):.0f} s, total "
        f"{time.perf_counter() - started:.0f} s; torch threads {torch.get_num_threads()}."
    )
    return Result(
        summary=summary,
        metrics={
            "main": {m: {k: agg(m, k) for k in per_seed[0]["main"][m]} for m in methods},
            "per_seed": per_seed,
            "ablations": ablation_rows,
            "focus_flop_reduction": reduction,
            "total_flop_reduction": total_reduction,
        },
        seeds=list(config["seeds"]),
        scale=scale,
        claims=claims,
        plots=plots,
        details=details,
    )


EXPERIMENT = Experiment(name="medimg-gfscreen.glance_focus", paper=PAPER, claim=CLAIM, run=run)
