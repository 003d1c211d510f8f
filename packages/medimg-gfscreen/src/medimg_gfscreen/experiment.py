"""Miniature GF-Screen experiment for ``iclr26 reproduce`` (entry point
``medimg-gfscreen.glance_focus``).

Synthetic CT (``medimg_gfscreen.synth``, written as NIfTI + Decathlon datalist and read back
through the real MONAI pipeline) -> train Focus + Glance jointly with the GF-Screen objective
-> on held-out volumes compare Focus on every tile (MONAI sliding window, the paper's overlap
0.75, and the cheaper overlap 0.5) with the Glance gate (p > 0.9) on the 0.75 tile grid.
The measurement (settings, data, training, evaluation -> numbers) is
:func:`medimg_gfscreen.measurement.measure`; this module judges the claims on those numbers
(:func:`build_claims`), draws the plot and writes the report's prose (:func:`report_text`).
Three claims, each decided by a paired 95 % interval over the shared test cases x seeds
(``iclr26_common.effects.paired_effect``) against a threshold fixed here before the run
(module constants), each gated by pre-registered positive controls (a failed control makes the
claim "inconclusive"):

  (a) per-case lesion recall, glance-focus minus sliding window >= -``RECALL_MAX_DROP``
      (5 points), lesion cases;
  (b1) per-case total GFLOPs (Glance on every tile + Focus on the selected tiles, as the paper
      counts its 5.7x) minus the sliding window's / ``TOTAL_FLOP_REDUCTION_MIN`` <= 0, i.e. a
      reduction of at least 3x against Focus on every tile at overlap 0.75;
  (c) predicted lesion voxels per healthy case removed (sliding window minus glance-focus)
      >= ``MIN_FP_VOXELS_REMOVED``.

(b2) "below Focus on every tile at overlap 0.5" is a reported cost finding, not a claim (it
was added in review, is no paper claim, and cannot hold at the paper's cost ratio: issue 37).

Controls: Focus learned (sliding-window lesion recall >= ``MIN_SLIDING_RECALL`` and DSC on
lesion cases >= ``MIN_SLIDING_DSC``; all claims); a supervised Glance separates lesion tiles
(a Glance trained by cross-entropy alone on tiles of the training volumes reaches tile AUROC >=
``MIN_SEPARABILITY_AUROC``; all claims: it does not depend on the RL method, so a Glance-RL
that selects nothing is then a finding about the method); (b1) a perfect gate reaches the 3x
on the test volumes (gold labels); (c) the sliding window has false positives to remove
(>= ``MIN_BASELINE_FP_VOXELS`` per healthy case).

Ablations (seed 0, reported, no verdict): the Glance retrained against the trained, fixed
Focus with the paper's objective, Dice instead of detection reward, and advantages over the
whole batch (16 sub-volumes) instead of per CT (4). Scale (volume count, sizes, epochs, seeds)
was set by the time budget (full <= 10 min, quick <= 60 s on 2 CPU cores); the network sizes
by the paper's Glance / Focus cost ratio (see the README).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from iclr26_common import Claim, Experiment, Precondition, Result
from iclr26_common.effects import format_effect, paired_effect, points_effect
from medimg_gfscreen.measurement import (
    COARSE_OVERLAP,
    METHODS,
    MODEL_KW,
    OVERLAP,
    PAPER_EPOCHS,
    ROI,
    TEST_SEED,
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
MIN_SEPARABILITY_AUROC = 0.7  # the CE-only Glance's tile AUROC (separability control)
MIN_FP_VOXELS_REMOVED = 1.0  # (c): "fewer" as at least one voxel per healthy case
CLAIM_LABELS = ("a", "b1", "c")


def _finite(value: float) -> float | None:
    """JSON-safe measured value: NaN / inf (e.g. no healthy case in a test set) -> None."""
    return value if isinstance(value, int | float) and math.isfinite(value) else None


def _per_case(m: Measurement, method: str, key, keep) -> Any:
    """``(seeds, cases)`` array of ``key(record)`` over the records ``keep(record)`` selects (the
    same test cases in every seed, :func:`measurement._datamodule`)."""
    import numpy as np

    return np.array([[key(r) for r in s.cases[method] if keep(r)] for s in m.per_seed], dtype=float)


def _recall(r: dict[str, Any]) -> float:
    return r["detected"] / r["lesions"]


def _lesion_case(r: dict[str, Any]) -> bool:
    return not r["healthy"]


def _healthy(r: dict[str, Any]) -> bool:
    return bool(r["healthy"])


def _every(r: dict[str, Any]) -> bool:
    return True


def build_claims(m: Measurement) -> tuple[list[Claim], dict[str, Any]]:
    """The three pre-registered claims with their controls, each decided by a paired 95 %
    interval over the shared test cases x seeds (``iclr26_common.effects.paired_effect``), from
    the per-case records of ``m`` (:class:`SeedMeasurement` ``cases``), and the aggregated
    numbers the report prints (including the (b2) cost finding, no claim)."""
    import numpy as np

    def agg(method: str, key: str) -> float:
        return seed_mean([main[method][key] for main in m.mains()])

    first = m.per_seed[0]
    glance_g, focus_g = first.glance_tile_gflops, first.focus_tile_gflops
    sw_recall = _per_case(m, "sliding_window", _recall, _lesion_case)
    gf_recall = _per_case(m, "glance_focus", _recall, _lesion_case)
    sw_flops = _per_case(m, "sliding_window", lambda r: r["gflops"], _every)
    gf_flops = _per_case(m, "glance_focus", lambda r: r["gflops"], _every)
    perfect = _per_case(
        m,
        "glance_focus",
        lambda r: r["n_tiles"] * glance_g + r["lesion_tiles"] * focus_g,
        _every,
    )
    glance_only = _per_case(m, "glance_focus", lambda r: r["n_tiles"] * glance_g, _every)
    sw_fp = _per_case(m, "sliding_window", lambda r: r["pred_voxels"], _healthy)
    gf_fp = _per_case(m, "glance_focus", lambda r: r["pred_voxels"], _healthy)
    sw_dsc = float(np.mean(_per_case(m, "sliding_window", lambda r: r["dsc"], _lesion_case)))
    pooled_sw_recall = float(sw_recall.mean())
    sw_total, gf_total = float(sw_flops.mean()), float(gf_flops.mean())
    perfect_bound = sw_total / float(perfect.mean())
    auroc = first.separability.get("auroc", float("nan"))
    values = {
        "sw_recall": pooled_sw_recall,
        "gf_recall": float(gf_recall.mean()),
        "sw_dsc": sw_dsc,
        "reduction": sw_total / gf_total if gf_total > 0 else float("inf"),
        "perfect_gate_reduction": perfect_bound,
        "ceiling": sw_total / float(glance_only.mean()),
        "gf_total": gf_total,
        "sw_total": sw_total,
        "coarse_total": agg("sliding_window_coarse", "total_gflops_per_volume"),
        "glance_only": float(glance_only.mean()),
        "sw_fp": float(sw_fp.mean()) if sw_fp.size else float("nan"),
        "gf_fp": float(gf_fp.mean()) if gf_fp.size else float("nan"),
        "selection_rates": [main["glance_focus"]["pooled_selection_rate"] for main in m.mains()],
        "glance_auroc": [main["glance_focus"]["glance_tile_auroc"] for main in m.mains()],
        "separability_auroc": auroc,
    }
    focus_learned = Precondition(
        "Focus learned",
        f"sliding window (overlap {OVERLAP}): mean per-case lesion recall >= "
        f"{MIN_SLIDING_RECALL} and DSC on lesion cases >= {MIN_SLIDING_DSC} (cases x seeds)",
        {"lesion_recall": _finite(pooled_sw_recall), "dsc_lesion_cases": _finite(sw_dsc)},
        pooled_sw_recall >= MIN_SLIDING_RECALL and sw_dsc >= MIN_SLIDING_DSC,
    )
    separable = Precondition(
        "a supervised Glance separates lesion tiles",
        f"a Glance trained by cross-entropy alone on tiles of the training volumes "
        f"({first.separability.get('steps', 0):.0f} steps, fixed before the run; no Focus, no "
        f"RL) reaches tile AUROC >= {MIN_SEPARABILITY_AUROC} for lesion vs no-lesion tiles of "
        "the test volumes",
        {"auroc": _finite(auroc), "steps": first.separability.get("steps")},
        auroc >= MIN_SEPARABILITY_AUROC,  # NaN fails
    )
    reachable = Precondition(
        f"a perfect gate reaches {TOTAL_FLOP_REDUCTION_MIN:g}x",
        f"sliding window / (Glance on every tile + Focus on exactly the lesion tiles) >= "
        f"{TOTAL_FLOP_REDUCTION_MIN:g} on the test volumes (gold labels)",
        {"perfect_gate_reduction": _finite(perfect_bound)},
        perfect_bound >= TOTAL_FLOP_REDUCTION_MIN,
    )
    baseline_fp = Precondition(
        "the sliding window has false positives to remove",
        f"mean predicted lesion voxels per healthy case (sliding window) >= "
        f"{MIN_BASELINE_FP_VOXELS:g}",
        {"sliding_window": _finite(values["sw_fp"])},
        values["sw_fp"] >= MIN_BASELINE_FP_VOXELS,  # NaN (no healthy case) fails
    )
    claims = [
        Claim.test(
            text="Glance-then-Focus keeps lesion recall close to Focus on every tile.",
            effect=points_effect(
                gf_recall,
                sw_recall,
                name="per-case lesion recall, glance-focus minus sliding window",
                threshold=-100.0 * RECALL_MAX_DROP,
                direction=">=",
                seed=0,
            ),
            preconditions=[focus_learned, separable],
            measured={
                "glance_focus": _finite(values["gf_recall"]),
                "sliding_window": _finite(pooled_sw_recall),
            },
        ),
        Claim.test(
            text="The Glance gate cuts total screening compute by a large factor (paper: 5.7x).",
            effect=paired_effect(
                gf_flops,
                sw_flops / TOTAL_FLOP_REDUCTION_MIN,
                name=f"GFLOPs per volume, glance-focus minus sliding window / "
                f"{TOTAL_FLOP_REDUCTION_MIN:g}",
                unit="GFLOP",
                threshold=0.0,
                direction="<=",
                seed=0,
            ),
            preconditions=[focus_learned, separable, reachable],
            measured={
                "reduction_vs_overlap_0.75": _finite(values["reduction"]),
                "perfect_gate_reduction": _finite(perfect_bound),
                "ceiling_no_tile_selected": _finite(values["ceiling"]),
            },
        ),
        Claim.test(
            text="Glance-then-Focus gives fewer false positives on healthy cases.",
            effect=paired_effect(
                sw_fp,
                gf_fp,
                name="predicted lesion voxels per healthy case removed (sliding window minus "
                "glance-focus)",
                unit="voxels",
                threshold=MIN_FP_VOXELS_REMOVED,
                direction=">=",
                seed=0,
            ),
            preconditions=[focus_learned, separable, baseline_fp],
            measured={
                "glance_focus": _finite(values["gf_fp"]),
                "sliding_window": _finite(values["sw_fp"]),
            },
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
    verdicts = "; ".join(
        f"({k}) {c.verdict}" + (f" [{c.reason}]" if c.verdict == "inconclusive" else "")
        for k, c in zip(CLAIM_LABELS, claims, strict=True)
    )
    summary = (
        f"Per-case lesion recall {v['gf_recall']:.3f} (glance-focus) vs {v['sw_recall']:.3f} "
        f"(sliding window, DSC {v['sw_dsc']:.3f}); total compute {v['gf_total']:.2f} vs "
        f"{v['sw_total']:.2f} GFLOP per volume ({v['reduction']:.2f}x; a perfect gate "
        f"{v['perfect_gate_reduction']:.2f}x, no tile selected {v['ceiling']:.2f}x); selection "
        f"rate per seed {', '.join(f'{r:.3f}' for r in v['selection_rates'])}; Glance tile "
        f"AUROC per seed {', '.join(f'{a:.3f}' for a in v['glance_auroc'])}, CE-only control "
        f"Glance {v['separability_auroc']:.3f}; FP voxels per healthy case {v['gf_fp']:.1f} vs "
        f"{v['sw_fp']:.1f}. Cost finding (no claim): glance-focus at {OVERLAP} "
        f"{v['gf_total']:.2f} GFLOP vs Focus on every tile at {COARSE_OVERLAP} "
        f"{v['coarse_total']:.2f} (the Glance alone {v['glance_only']:.2f}). Claims: {verdicts}."
        + "".join(
            f" ({k}) {format_effect(c.effect)}."
            for k, c in zip(CLAIM_LABELS, claims, strict=True)
            if c.effect is not None
        )
    )
    ratio = per_seed[0].glance_tile_gflops / per_seed[0].focus_tile_gflops
    scale = (
        f"{config['n_train']} train / {config['n_test']} test synthetic CT volumes of {VOLUME} "
        f"voxels at 1x1x3 mm per seed; ROI {ROI}, overlap {OVERLAP} (and {COARSE_OVERLAP}); "
        f"Focus = MONAI UNet {MODEL_KW['focus'].unet_channels}, Glance = ResNet-18 widths "
        f"{MODEL_KW['glance'].widths}, stem stride 2, GroupNorm (Glance / Focus FLOPs per tile "
        f"{ratio:.2f}, paper pair 0.31); {config['epochs']} epochs x {config['n_train'] // 4} "
        f"steps of 4x4 sub-volumes, negative crops lesion-free (the first epochs of a "
        f"{PAPER_EPOCHS}-epoch cosine); CE-only control Glance {config['separability_steps']} "
        f"steps of 8 + 8 grid tiles of the training volumes; training cases per seed, one shared "
        f"test set (seed {TEST_SEED}); seeds "
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
    claims, values = build_claims(m)
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
