"""Miniature GF-Screen experiment for ``iclr26 reproduce`` (entry point
``medimg-gfscreen.glance_focus``).

Synthetic CT (``medimg_gfscreen.synth``, written as NIfTI + Decathlon datalist and read back
through the real MONAI pipeline) -> train Focus + Glance jointly with the GF-Screen objective
-> on held-out volumes compare Focus on every tile (MONAI sliding window, the paper's overlap
0.75, and the cheaper overlap 0.5) with the Glance gate (p > 0.9) on the 0.75 tile grid.
The measurement (settings, data, training, evaluation -> numbers) is
:func:`medimg_gfscreen.measurement.measure`; :mod:`medimg_gfscreen.claims` judges the claims on
those numbers (:func:`build_claims`); this module runs both, draws the plot and writes the
report's prose (:func:`report_text`). Three claims, each decided by a paired 95 % interval over
the shared test cases x seeds (``iclr26_common.effects.paired_effect``) against a threshold
fixed before the run (:mod:`medimg_gfscreen.claims`' constants), each gated by pre-registered
positive controls (a failed control makes the claim "inconclusive"):

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

The separability control first (a change for the budget, 2026-12-07, recorded before the run
with it): it is method-free (no Focus, no RL) and gates every claim, so :func:`run` trains it
before anything else, on the first seed's data with the same seed and steps as before (so the
same AUROC), and judges it with :func:`~medimg_gfscreen.claims.separable`, the definition
:func:`build_claims` uses. Failed: the joint training, its evaluation and the ablations are not
run; every claim is ``Claim.untested`` carrying that control with its AUROC
(:func:`untested_claims`; (b1) also its perfect-gate control), and the report gives what needs
no trained model (the perfect-gate bound on the test volumes, the FLOPs per tile, the (b2) cost
finding) and says what was not run. The verdicts are those of the full design: a failed
control makes every claim inconclusive whatever the method does. Passed: everything runs as
before, with the same numbers (the joint training is reseeded after the control).

Ablations (seed 0, reported, no verdict): the Glance retrained against the trained, fixed
Focus with the paper's objective, Dice instead of detection reward, and advantages over the
whole batch (16 sub-volumes) instead of per CT (4). Scale (volume count, sizes, epochs, seeds)
was set by the time budget (full <= 10 min, quick <= 60 s on 2 CPU cores); the network sizes
by the paper's Glance / Focus cost ratio (see the README).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from iclr26_common import Claim, Experiment, Result
from iclr26_common.effects import format_effect
from medimg_gfscreen.claims import (
    CLAIM_LABELS,
    LAST_FOCUS_RUN,
    MIN_BASELINE_FP_VOXELS,
    MIN_SEPARABILITY_AUROC,
    NOT_RUN,
    TOTAL_FLOP_REDUCTION_MIN,
    build_claims,
    other_controls,
    separable,
    untested_claims,
)
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

__all__ = ["EXPERIMENT", "build_claims", "report_text", "run", "untested_claims"]

PAPER = (
    "GF-Screen: Glance and Focus Reinforcement Learning for Pan-cancer Screening (arXiv 2601.19103)"
)
CLAIM = (
    "A Glance policy trained with group-relative RL on Focus rewards sends only a small fraction "
    "of CT sub-volumes to the segmentation model, keeping lesion recall and DSC close to running "
    "Focus everywhere at a fraction of the compute (paper: 5.7x less, 16.7 % selected)."
)


def untested_summary(m: Measurement, values: dict[str, Any], claims: list[Claim]) -> str:
    """The report's paragraph when the separability control failed: the control, what was not
    run and why, and the numbers that need no trained model."""
    v = values
    verdicts = "; ".join(
        f"({k}) {c.verdict} [{c.reason}]" for k, c in zip(CLAIM_LABELS, claims, strict=True)
    )
    return (
        f"Not run: {NOT_RUN}. The separability control, which every claim needs, failed: a "
        f"Glance trained by cross-entropy alone ({m.separability.get('steps', 0):.0f} steps, no "
        f"Focus, no RL) reached tile AUROC {v['separability_auroc']:.3f} on the test volumes "
        f"(threshold {MIN_SEPARABILITY_AUROC}; {v['separability_train_tile_auroc']:.3f} on its "
        "own training tiles), so no claim can be decided whatever the method does, and the "
        "method's training was skipped (budget). Numbers that need no trained model: Focus on "
        f"every tile at overlap {OVERLAP} {v['sw_total']:.2f} GFLOP per volume, the Glance on "
        f"every tile {v['glance_only']:.2f} (no tile selected: {v['ceiling']:.2f}x at most), a "
        f"perfect gate {v['perfect_gate_reduction']:.2f}x (Glance / Focus FLOPs per tile "
        f"{v['glance_tile_gflops'] / v['focus_tile_gflops']:.2f}). Cost finding (no claim): the "
        f"Glance alone on the {OVERLAP} grid costs {v['glance_only']:.2f} GFLOP against "
        f"{v['coarse_total']:.2f} for Focus on every tile at {COARSE_OVERLAP}, so glance-focus at "
        f"{OVERLAP} cannot cost less whatever it selects. {blocked_text(v)} Claims: "
        f"{verdicts}."
    )


def blocked_text(values: dict[str, Any]) -> str:
    """What blocks the claims besides the separability control when nothing was trained
    (:func:`~medimg_gfscreen.claims.other_controls`): the controls this run could not measure,
    said so, with their last measurement, and (b1)'s perfect gate, measured here."""
    controls = other_controls(values["perfect_gate_reduction"])
    (focus,) = controls["a"]
    fp = controls["c"][1]
    last, last_fp = focus["last_measured"], fp["last_measured"]
    reachable = values["perfect_gate_reduction"] >= TOTAL_FLOP_REDUCTION_MIN
    b1 = (
        f"(b1) is unreachable in this geometry: a perfect gate (Focus on exactly the lesion "
        f"tiles, gold labels) reaches {values['perfect_gate_reduction']:.2f}x < "
        f"{TOTAL_FLOP_REDUCTION_MIN:g}x, measured in this run, so it stays blocked whatever "
        "the Glance selects"
        if not reachable
        else f"(b1)'s perfect gate reaches {values['perfect_gate_reduction']:.2f}x (passed in "
        "this run)"
    )
    return (
        "The separability control is not the only block: even if it passed, (a) and (c) need a "
        "Focus that learns (Focus learned: not measured in this run, since Focus is trained "
        "only after the separability control passes; last measured: sliding-window per-case "
        f"lesion recall {last['sliding_window_recall']:.3f}, DSC "
        f"{last['dsc_lesion_cases']:.3f}, {'passed' if last['passed'] else 'failed'}, in every "
        f"full run that trained Focus, the latest the {LAST_FOCUS_RUN}); (c) also needs a "
        "sliding window with false positives on healthy cases (not measured in this run; last "
        f"measured {last_fp['sliding_window_fp_voxels_per_healthy_case']:.1f} voxels per healthy "
        f"case against >= {MIN_BASELINE_FP_VOXELS:g}, "
        f"{'passed' if last_fp['passed'] else 'failed'}, the same run); {b1}."
    )


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
    """``iclr26 reproduce``: :func:`measure` with :func:`separable` as its gate, then
    :func:`build_claims`, the plot and :func:`report_text`; when the gate failed (nothing
    trained), :func:`untested_claims` and :func:`untested_summary`."""
    started = time.perf_counter()
    config = settings(quick)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    m = measure(config, out_dir, proceed=lambda control: separable(control).passed)
    if not m.per_seed:
        return _untested_result(m, started)
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
            "separability_control": m.separability,
            "total_flop_reduction": values["reduction"],
        },
        seeds=list(config["seeds"]),
        scale=text.scale,
        claims=claims,
        plots=[plot],
        details=text.details,
    )


def _untested_result(m: Measurement, started: float) -> Result:
    """The result when the separability control failed: untested claims, the control, the
    method-free numbers and what was not run (no plot: nothing was trained)."""
    claims, values = untested_claims(m)
    config, seed = m.config, m.config["seeds"][0]
    wall = time.perf_counter() - started
    return Result(
        summary=untested_summary(m, values, claims),
        metrics={
            "separability_control": m.separability,
            "method_free": {
                **{k: v for k, v in values.items() if not k.startswith("separability")},
                "cases": m.method_free["cases"],
            },
            "other_controls": other_controls(values["perfect_gate_reduction"]),
            "not_run": {
                "what": NOT_RUN,
                "seeds": list(config["seeds"]),
                "why": f"the separability control failed (tile AUROC "
                f"{values['separability_auroc']:.3f} < {MIN_SEPARABILITY_AUROC}): every claim "
                "needs it, so none can be decided whatever the method does (budget)",
            },
        },
        seeds=[seed],
        scale=(
            f"separability control only: {config['n_train']} training volumes of seed {seed}, "
            f"{config['n_test']} shared test volumes (seed {TEST_SEED}) of {VOLUME} voxels; "
            f"CE-only Glance {config['separability_steps']} steps of 8 + 8 grid tiles (ROI "
            f"{ROI}, overlap {OVERLAP}); joint training not run (seeds {config['seeds']})"
        ),
        claims=claims,
        details=f"Time: total {wall:.0f} s (the control and the method-free counts); torch "
        f"threads {m.torch_threads}.",
    )


EXPERIMENT = Experiment(name="medimg-gfscreen.glance_focus", paper=PAPER, claim=CLAIM, run=run)
