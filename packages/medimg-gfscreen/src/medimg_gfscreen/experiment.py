"""Miniature GF-Screen experiment for ``iclr26 reproduce`` (entry point
``medimg-gfscreen.glance_focus``).

Synthetic CT (``medimg_gfscreen.synth``, written as NIfTI + Decathlon datalist and read back
through the real MONAI pipeline) -> train Focus + Glance jointly with the GF-Screen objective
-> on held-out volumes compare Focus on every tile (MONAI sliding window, the paper's overlap
0.75, and the cheaper overlap 0.5) with the Glance gate (p > 0.9) on the 0.75 tile grid.
The measurement (settings, data, training, evaluation -> numbers) is
:func:`medimg_gfscreen.measurement.measure`; this module judges the claims on those numbers
(:func:`build_claims`), draws the plot and writes the report's prose (:func:`report_text`).
Four claims, each judged by a rule fixed here before the run (module constants), each with
pre-registered positive controls (a failed control makes the claim "inconclusive"):

  (a) lesion recall of glance-focus >= sliding-window recall - ``RECALL_MAX_DROP`` (5 points);
  (b1) total FLOPs per volume (Glance on every tile + Focus on the selected tiles, as the paper
      counts its 5.7x) reduced >= ``TOTAL_FLOP_REDUCTION_MIN`` x against Focus on every tile at
      overlap 0.75 (the most any selection can give, Focus everywhere / Glance alone, recorded);
  (b2) total FLOPs per volume below Focus on every tile at overlap 0.5 (the Glance alone on the
      0.75 grid is recorded beside it: where it already costs more, (b2) cannot hold whatever
      the gate selects);
  (c) fewer predicted lesion voxels on healthy cases than the sliding window (strictly).

(b1) and (b2) were one claim (b) until 2026-12-04; split so that the half that cannot hold at
this cost ratio and overlap (README, "Criteria and setup changes") has its own verdict.

Controls: Focus learned (sliding-window lesion recall >= ``MIN_SLIDING_RECALL`` and DSC on
lesion cases >= ``MIN_SLIDING_DSC``); the gate selects some but not all tiles in every seed;
for (c) the sliding window has false positives to remove (>= ``MIN_BASELINE_FP_VOXELS`` per
healthy case). Seed means over ``settings()["seeds"]``.

Ablations (seed 0, reported, no verdict): the Glance retrained against the trained, fixed
Focus with the paper's objective, CE only (no RL), Dice instead of detection reward, and
advantages over the whole batch (16 sub-volumes) instead of per CT (4). Scale (volume count,
sizes, epochs, seeds) was set by the time budget (full <= 10 min, quick <= 60 s on 2 CPU
cores); the network sizes by the paper's Glance / Focus cost ratio (see the README).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from iclr26_common import Claim, Experiment, Precondition, Result
from medimg_gfscreen.measurement import (
    COARSE_OVERLAP,
    METHODS,
    MODEL_KW,
    OVERLAP,
    PAPER_EPOCHS,
    ROI,
    VOLUME,
    Measurement,
    measure,
    seed_mean,
    settings,
)
from medimg_gfscreen.metrics import FP_MIN_VOXELS

PAPER = (
    "GF-Screen: Glance and Focus Reinforcement Learning for Pan-cancer Screening (arXiv 2601.19103)"
)
CLAIM = (
    "A Glance policy trained with group-relative RL on Focus rewards sends only a small fraction "
    "of CT sub-volumes to the segmentation model, keeping lesion recall and DSC close to running "
    "Focus everywhere at a fraction of the compute (paper: 5.7x less, 16.7 % selected)."
)
# Pre-registered criteria and controls (README, "Criteria", records when each was set).
RECALL_MAX_DROP = 0.05
TOTAL_FLOP_REDUCTION_MIN = 3.0
MIN_SLIDING_RECALL = 0.5
MIN_SLIDING_DSC = 0.1
MIN_BASELINE_FP_VOXELS = float(FP_MIN_VOXELS)  # one false-positive case's worth
CLAIM_LABELS = ("a", "b1", "b2", "c")


def _finite(value: float) -> float | None:
    """JSON-safe measured value: NaN / inf (e.g. no healthy case in a test set) -> None."""
    return value if isinstance(value, int | float) and math.isfinite(value) else None


def build_claims(
    mains: list[dict[str, dict[str, float]]],
) -> tuple[list[Claim], dict[str, Any]]:
    """The four pre-registered claims with their controls from the per-seed ``main`` metric
    summaries (``Measurement.mains()``; seed means), and the aggregated numbers the report
    prints."""

    def agg(method: str, key: str) -> float:
        return seed_mean([main[method][key] for main in mains])

    sw_recall, gf_recall = (
        agg("sliding_window", "lesion_recall"),
        agg("glance_focus", "lesion_recall"),
    )
    sw_dsc = agg("sliding_window", "dsc_lesion_cases")
    sw_total = agg("sliding_window", "total_gflops_per_volume")
    coarse_total = agg("sliding_window_coarse", "total_gflops_per_volume")
    gf_total = agg("glance_focus", "total_gflops_per_volume")
    glance_only = agg("glance_focus", "glance_gflops_per_volume")
    reduction = sw_total / gf_total if gf_total > 0 else float("inf")
    ceiling = sw_total / glance_only if glance_only > 0 else float("inf")
    sw_fp, gf_fp = (
        agg("sliding_window", "fp_voxels_healthy"),
        agg("glance_focus", "fp_voxels_healthy"),
    )
    rates = [main["glance_focus"]["pooled_selection_rate"] for main in mains]
    values = {
        "sw_recall": sw_recall,
        "gf_recall": gf_recall,
        "sw_dsc": sw_dsc,
        "reduction": reduction,
        "gf_total": gf_total,
        "sw_total": sw_total,
        "coarse_total": coarse_total,
        "sw_fp": sw_fp,
        "gf_fp": gf_fp,
        "glance_only": glance_only,
        "ceiling": ceiling,
        "selection_rates": rates,
    }
    focus_learned = Precondition(
        "Focus learned",
        f"sliding window (overlap {OVERLAP}): seed-mean lesion recall >= {MIN_SLIDING_RECALL} "
        f"and DSC on lesion cases >= {MIN_SLIDING_DSC}",
        {"lesion_recall": _finite(sw_recall), "dsc_lesion_cases": _finite(sw_dsc)},
        sw_recall >= MIN_SLIDING_RECALL and sw_dsc >= MIN_SLIDING_DSC,
    )
    gate_works = Precondition(
        "the gate selects some but not all tiles",
        "0 < selected / all tiles < 1 over each seed's test set",
        {"selection_rate_per_seed": rates},
        all(0.0 < r < 1.0 for r in rates),
    )
    baseline_fp = Precondition(
        "the sliding window has false positives to remove",
        f"seed-mean predicted lesion voxels per healthy case (sliding window) >= "
        f"{MIN_BASELINE_FP_VOXELS:g}",
        {"sliding_window": _finite(sw_fp)},
        sw_fp >= MIN_BASELINE_FP_VOXELS,  # NaN (no healthy case) fails
    )
    claims = [
        Claim.judge(
            text="Glance-then-Focus keeps lesion recall close to Focus on every tile.",
            criterion=f"seed-mean lesion recall: glance-focus >= sliding window - "
            f"{RECALL_MAX_DROP} (both on the overlap-{OVERLAP} tile grid)",
            measured={"glance_focus": _finite(gf_recall), "sliding_window": _finite(sw_recall)},
            holds=gf_recall >= sw_recall - RECALL_MAX_DROP,
            preconditions=[focus_learned, gate_works],
        ),
        Claim.judge(
            text="The Glance gate cuts total screening compute by a large factor (paper: 5.7x).",
            criterion=f"seed-mean total GFLOPs per volume (Glance on every tile + Focus on the "
            f"selected): sliding window at {OVERLAP} / glance-focus at {OVERLAP} >= "
            f"{TOTAL_FLOP_REDUCTION_MIN} (no selection rate gives more than sliding window / "
            "Glance alone: ceiling_no_tile_selected)",
            measured={
                "reduction_vs_overlap_0.75": _finite(reduction),
                "ceiling_no_tile_selected": _finite(ceiling),
                "glance_focus_gflops": _finite(gf_total),
                "sliding_window_gflops": _finite(sw_total),
            },
            holds=reduction >= TOTAL_FLOP_REDUCTION_MIN,
            preconditions=[focus_learned, gate_works],
        ),
        Claim.judge(
            text=f"Glance-then-Focus at overlap {OVERLAP} costs less than Focus on every tile "
            f"at the cheaper overlap {COARSE_OVERLAP}.",
            criterion=f"seed-mean total GFLOPs per volume: glance-focus at {OVERLAP} < sliding "
            f"window at {COARSE_OVERLAP} (cannot hold whatever the gate selects when the Glance "
            f"alone on the {OVERLAP} grid costs at least as much: glance_only_gflops)",
            measured={
                "glance_focus_gflops": _finite(gf_total),
                "glance_only_gflops": _finite(glance_only),
                "sliding_window_0.5_gflops": _finite(coarse_total),
            },
            holds=gf_total < coarse_total,
            preconditions=[focus_learned, gate_works],
        ),
        Claim.judge(
            text="Glance-then-Focus gives fewer false positives on healthy cases.",
            criterion="seed-mean predicted lesion voxels per healthy case: glance-focus < "
            "sliding window (strictly)",
            measured={"glance_focus": _finite(gf_fp), "sliding_window": _finite(sw_fp)},
            holds=gf_fp < sw_fp,
            preconditions=[focus_learned, gate_works, baseline_fp],
        ),
    ]
    return claims, values


@dataclass
class ReportText:
    """The prose of the report: a paragraph with the headline numbers, the scale that ran, and
    the markdown tables, rewards and times under "details"."""

    summary: str
    scale: str
    details: str


def report_text(
    m: Measurement, values: dict[str, Any], claims: list[Claim], total_s: float
) -> ReportText:
    """The report's prose as a function of the numbers only: ``m`` (:func:`measure`),
    ``values`` and ``claims`` (:func:`build_claims`) and the run's total seconds."""
    config, per_seed, v = m.config, m.per_seed, values
    verdicts = ", ".join(f"({k}) {c.verdict}" for k, c in zip(CLAIM_LABELS, claims, strict=True))
    summary = (
        f"Lesion recall {v['gf_recall']:.3f} (glance-focus) vs {v['sw_recall']:.3f} (sliding "
        f"window, DSC {v['sw_dsc']:.3f}); total compute {v['gf_total']:.2f} vs {v['sw_total']:.2f}"
        f" GFLOP per volume ({v['reduction']:.2f}x, at most {v['ceiling']:.2f}x; Glance alone "
        f"{v['glance_only']:.2f}; sliding window at {COARSE_OVERLAP}: "
        f"{v['coarse_total']:.2f}), selection rate per seed "
        f"{', '.join(f'{r:.3f}' for r in v['selection_rates'])}; FP voxels per healthy case "
        f"{v['gf_fp']:.1f} vs {v['sw_fp']:.1f}. Claims: {verdicts}."
    )
    ratio = per_seed[0].glance_tile_gflops / per_seed[0].focus_tile_gflops
    scale = (
        f"{config['n_train']} train / {config['n_test']} test synthetic CT volumes of {VOLUME} "
        f"voxels at 1x1x3 mm per seed; ROI {ROI}, overlap {OVERLAP} (and {COARSE_OVERLAP}); "
        f"Focus = MONAI UNet {MODEL_KW['focus'].unet_channels}, Glance = ResNet-18 widths "
        f"{MODEL_KW['glance'].widths}, stem stride 2, GroupNorm (Glance / Focus FLOPs per tile "
        f"{ratio:.2f}, paper pair 0.31); {config['epochs']} epochs x {config['n_train'] // 4} "
        f"steps of 4x4 sub-volumes (the first epochs of a {PAPER_EPOCHS}-epoch cosine); seeds "
        f"{config['seeds']}"
    )
    rewards = ", ".join(f"{s.final_train_reward:.3f}" for s in per_seed)
    details = "\n".join(_tables(m)) + (
        f"\n\nLast-epoch mean detection reward on the training sub-volumes (Focus), per seed: "
        f"{rewards}.\n\nTime: training {sum(s.train_s for s in per_seed):.0f} s, evaluation "
        f"{sum(s.eval_s for s in per_seed):.0f} s, total {total_s:.0f} s; torch threads "
        f"{m.torch_threads}."
    )
    return ReportText(summary=summary, scale=scale, details=details)


def _tables(m: Measurement) -> list[str]:
    """Markdown: seed means (per-seed values in brackets) of every method, and the ablations."""
    keys = (
        "lesion_recall",
        "case_recall",
        "dsc_all",
        "dsc_lesion_cases",
        "nsd_lesion_cases",
        "fp_voxels_healthy",
        "fp_case_rate_healthy",
        "selection_rate",
        "tiles_per_volume",
        "focus_gflops_per_volume",
        "total_gflops_per_volume",
    )

    def cell(method: str, key: str) -> str:
        values = [main[method].get(key, float("nan")) for main in m.mains()]
        mean = seed_mean(values)
        spread = "/".join(f"{v:.3g}" for v in values)
        return f"{mean:.4g} ({spread})" if len(values) > 1 else f"{mean:.4g}"

    table = [
        f"Seed means (per seed {m.config['seeds']} in brackets):",
        "",
        f"| metric | sliding window {OVERLAP} | glance-focus {OVERLAP} | "
        f"sliding window {COARSE_OVERLAP} |",
        "|---|---:|---:|---:|",
    ]
    for key in keys:
        table.append(f"| {key} | " + " | ".join(cell(method, key) for method in METHODS) + " |")
    first = m.per_seed[0]
    if first.ablations:
        table += [
            "",
            f"Ablations (seed {first.seed}; Glance retrained against the trained, fixed Focus):",
            "",
            "| glance objective | lesion recall | DSC (lesion cases) | FP voxels (healthy) "
            "| selection rate |",
            "|---|---:|---:|---:|---:|",
        ]
        for label, row in first.ablations.items():
            table.append(
                f"| {label} | {row['lesion_recall']:.3f} | {row['dsc_lesion_cases']:.3f} | "
                f"{row['fp_voxels_healthy']:.1f} | {row['pooled_selection_rate']:.3f} |"
            )
    return table


def _plot(m: Measurement, path: Path, title: str) -> str:
    """Bar chart of seed-mean lesion recall, DSC on lesion cases and selection rate per method
    (NaN drawn as 0); returns the file name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ["lesion_recall", "dsc_lesion_cases", "selection_rate"]
    fig, ax = plt.subplots(figsize=(6.8, 3.4))
    width = 0.27
    for j, method in enumerate(METHODS):
        vals = [seed_mean([main[method].get(k, float("nan")) for main in m.mains()]) for k in keys]
        vals = [0.0 if v != v else v for v in vals]
        ax.bar([i + (j - 1) * width for i in range(len(keys))], vals, width, label=method)
    ax.set_xticks(range(len(keys)), ["lesion recall", "DSC (lesion cases)", "selection rate"])
    ax.set_ylim(0, 1.05)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def run(quick: bool, out_dir: Path) -> Result:
    """``iclr26 reproduce``: :func:`measure`, then :func:`build_claims`, the plot and
    :func:`report_text`."""
    started = time.perf_counter()
    config = settings(quick)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    m = measure(config, out_dir)
    claims, values = build_claims(m.mains())
    mode = "quick" if quick else "full"
    title = f"GF-Screen miniature ({mode}), synthetic CT, seeds {config['seeds']}"
    plot = _plot(m, out_dir / "recall_dsc_selection.png", title)
    text = report_text(m, values, claims, total_s=time.perf_counter() - started)
    per_seed = [asdict(s) for s in m.per_seed]
    return Result(
        summary=text.summary,
        metrics={
            "main": m.method_means(),
            "per_seed": per_seed,
            "total_flop_reduction": values["reduction"],
        },
        seeds=list(config["seeds"]),
        scale=text.scale,
        claims=claims,
        plots=[plot],
        details=text.details,
    )


EXPERIMENT = Experiment(name="medimg-gfscreen.glance_focus", paper=PAPER, claim=CLAIM, run=run)
