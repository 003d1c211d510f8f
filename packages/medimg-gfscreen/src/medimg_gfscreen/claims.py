"""The claims of the ``medimg-gfscreen.glance_focus`` experiment and their controls, judged on
the numbers of :func:`medimg_gfscreen.measurement.measure` (:func:`build_claims`), with the
thresholds fixed here before the run; when the separability control failed and nothing was
trained, the same claims untested (:func:`untested_claims`). The control's one definition,
:func:`separable`, is also the gate the experiment checks before any training
(:func:`medimg_gfscreen.experiment.run`). The report's prose and the plot are
:mod:`medimg_gfscreen.experiment`'s.
"""

from __future__ import annotations

import math
from typing import Any

from iclr26_common import Claim, Precondition
from iclr26_common.effects import paired_effect, points_effect
from medimg_gfscreen.measurement import OVERLAP, Measurement, seed_mean
from medimg_gfscreen.metrics import FP_MIN_VOXELS

# Pre-registered criteria and controls (README, "Criteria", records when each was set).
RECALL_MAX_DROP = 0.05
TOTAL_FLOP_REDUCTION_MIN = 3.0
MIN_SLIDING_RECALL = 0.5
MIN_SLIDING_DSC = 0.1
MIN_BASELINE_FP_VOXELS = float(FP_MIN_VOXELS)  # one false-positive case's worth
MIN_SEPARABILITY_AUROC = 0.7  # the CE-only Glance's tile AUROC (separability control)
MIN_FP_VOXELS_REMOVED = 1.0  # (c): "fewer" as at least one voxel per healthy case
CLAIM_LABELS = ("a", "b1", "c")
CLAIM_TEXTS = (
    "Glance-then-Focus keeps lesion recall close to Focus on every tile.",
    "The Glance gate cuts total screening compute by a large factor (paper: 5.7x).",
    "Glance-then-Focus gives fewer false positives on healthy cases.",
)
EFFECT_NAMES = (
    "per-case lesion recall, glance-focus minus sliding window",
    f"GFLOPs per volume, glance-focus minus sliding window / {TOTAL_FLOP_REDUCTION_MIN:g}",
    "predicted lesion voxels per healthy case removed (sliding window minus glance-focus)",
)


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


def separable(control: dict[str, float]) -> Precondition:
    """The separability control on :func:`~medimg_gfscreen.control.separability`'s result: the
    one definition that :func:`run`'s gate (before any training) and every claim's
    preconditions use. NaN (a class missing) fails."""
    auroc = control.get("auroc", float("nan"))
    return Precondition(
        "a supervised Glance separates lesion tiles",
        f"a Glance trained by cross-entropy alone on tiles of the training volumes "
        f"({control.get('steps', 0):.0f} steps, fixed before the run; no Focus, no "
        f"RL) reaches tile AUROC >= {MIN_SEPARABILITY_AUROC} for lesion vs no-lesion tiles of "
        "the test volumes",
        {"auroc": _finite(auroc), "steps": control.get("steps")},
        auroc >= MIN_SEPARABILITY_AUROC,  # NaN fails
    )


def _perfect_gate(n_tiles, lesion_tiles, sw_flops, glance_g: float, focus_g: float):
    """Per-case arrays of tiles, lesion tiles and the sliding window's GFLOPs -> the bounds that
    need no trained Glance (a perfect gate: the Glance on every tile, Focus on exactly the
    lesion tiles; no tile selected: the Glance alone) and (b1)'s control on the first."""
    glance_only = n_tiles * glance_g
    perfect = glance_only + lesion_tiles * focus_g
    sw_total = float(sw_flops.mean())
    bound = sw_total / float(perfect.mean())
    values = {
        "sw_total": sw_total,
        "perfect_gate_reduction": bound,
        "ceiling": sw_total / float(glance_only.mean()),
        "glance_only": float(glance_only.mean()),
    }
    reachable = Precondition(
        f"a perfect gate reaches {TOTAL_FLOP_REDUCTION_MIN:g}x",
        f"sliding window / (Glance on every tile + Focus on exactly the lesion tiles) >= "
        f"{TOTAL_FLOP_REDUCTION_MIN:g} on the test volumes (gold labels)",
        {"perfect_gate_reduction": _finite(bound)},
        bound >= TOTAL_FLOP_REDUCTION_MIN,
    )
    return values, reachable


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
    bounds, reachable = _perfect_gate(
        _per_case(m, "glance_focus", lambda r: r["n_tiles"], _every),
        _per_case(m, "glance_focus", lambda r: r["lesion_tiles"], _every),
        sw_flops,
        glance_g,
        focus_g,
    )
    sw_fp = _per_case(m, "sliding_window", lambda r: r["pred_voxels"], _healthy)
    gf_fp = _per_case(m, "glance_focus", lambda r: r["pred_voxels"], _healthy)
    sw_dsc = float(np.mean(_per_case(m, "sliding_window", lambda r: r["dsc"], _lesion_case)))
    pooled_sw_recall = float(sw_recall.mean())
    sw_total, gf_total = bounds["sw_total"], float(gf_flops.mean())
    values = {
        "sw_recall": pooled_sw_recall,
        "gf_recall": float(gf_recall.mean()),
        "sw_dsc": sw_dsc,
        "reduction": sw_total / gf_total if gf_total > 0 else float("inf"),
        "perfect_gate_reduction": bounds["perfect_gate_reduction"],
        "ceiling": bounds["ceiling"],
        "gf_total": gf_total,
        "sw_total": sw_total,
        "coarse_total": agg("sliding_window_coarse", "total_gflops_per_volume"),
        "glance_only": bounds["glance_only"],
        "sw_fp": float(sw_fp.mean()) if sw_fp.size else float("nan"),
        "gf_fp": float(gf_fp.mean()) if gf_fp.size else float("nan"),
        "selection_rates": [main["glance_focus"]["pooled_selection_rate"] for main in m.mains()],
        "glance_auroc": [main["glance_focus"]["glance_tile_auroc"] for main in m.mains()],
        "separability_auroc": m.separability.get("auroc", float("nan")),
    }
    focus_learned = Precondition(
        "Focus learned",
        f"sliding window (overlap {OVERLAP}): mean per-case lesion recall >= "
        f"{MIN_SLIDING_RECALL} and DSC on lesion cases >= {MIN_SLIDING_DSC} (cases x seeds)",
        {"lesion_recall": _finite(pooled_sw_recall), "dsc_lesion_cases": _finite(sw_dsc)},
        pooled_sw_recall >= MIN_SLIDING_RECALL and sw_dsc >= MIN_SLIDING_DSC,
    )
    separable_ = separable(m.separability)
    baseline_fp = Precondition(
        "the sliding window has false positives to remove",
        f"mean predicted lesion voxels per healthy case (sliding window) >= "
        f"{MIN_BASELINE_FP_VOXELS:g}",
        {"sliding_window": _finite(values["sw_fp"])},
        values["sw_fp"] >= MIN_BASELINE_FP_VOXELS,  # NaN (no healthy case) fails
    )
    claims = [
        Claim.test(
            text=CLAIM_TEXTS[0],
            effect=points_effect(
                gf_recall,
                sw_recall,
                name=EFFECT_NAMES[0],
                threshold=-100.0 * RECALL_MAX_DROP,
                direction=">=",
                seed=0,
            ),
            preconditions=[focus_learned, separable_],
            measured={
                "glance_focus": _finite(values["gf_recall"]),
                "sliding_window": _finite(pooled_sw_recall),
            },
        ),
        Claim.test(
            text=CLAIM_TEXTS[1],
            effect=paired_effect(
                gf_flops,
                sw_flops / TOTAL_FLOP_REDUCTION_MIN,
                name=EFFECT_NAMES[1],
                unit="GFLOP",
                threshold=0.0,
                direction="<=",
                seed=0,
            ),
            preconditions=[focus_learned, separable_, reachable],
            measured={
                "reduction_vs_overlap_0.75": _finite(values["reduction"]),
                "perfect_gate_reduction": _finite(values["perfect_gate_reduction"]),
                "ceiling_no_tile_selected": _finite(values["ceiling"]),
            },
        ),
        Claim.test(
            text=CLAIM_TEXTS[2],
            effect=paired_effect(
                sw_fp,
                gf_fp,
                name=EFFECT_NAMES[2],
                unit="voxels",
                threshold=MIN_FP_VOXELS_REMOVED,
                direction=">=",
                seed=0,
            ),
            preconditions=[focus_learned, separable_, baseline_fp],
            measured={
                "glance_focus": _finite(values["gf_fp"]),
                "sliding_window": _finite(values["sw_fp"]),
            },
        ),
    ]
    return claims, values


NOT_RUN = "the joint Glance-Focus training of every seed, its evaluation and the ablations"

#: The controls a run whose separability control failed does not reach (Focus is trained only
#: after that control passes), as last measured: the latest full run that trained Focus (README,
#: "Result of the miniature (fourth follow-up of issue 37 ...)"). Every full run that trained
#: Focus on the issue-37 testbed (2026-12-07 01:25, 18:13 and 21:09 UTC) measured sliding-window
#: per-case lesion recall 0.000. A record of earlier runs, not a number of this run: the report
#: says "not measured in this run" beside it (:func:`other_controls`).
LAST_FOCUS_RUN = (
    "full run 2026-12-07 21:09-21:19 UTC, source digest 43f0f5f39b1300b5, seeds 0, 1, 2"
)
LAST_FOCUS_RECALL = 0.0  # sliding-window per-case lesion recall, every full run that trained Focus
LAST_FOCUS_DSC = 0.0  # sliding-window DSC on lesion cases, the same run
LAST_SW_FP_VOXELS = 0.0  # sliding-window predicted voxels per healthy case, the same run
NOT_MEASURED = (
    "not measured in this run (Focus is trained only after the separability control passes)"
)


def other_controls(perfect_gate_reduction: float) -> dict[str, list[dict[str, Any]]]:
    """What each claim needs besides the separability control when that control failed and
    nothing was trained: per claim label, its other controls with their status in this run
    (``this_run``) and, where this run could not measure one, the last measurement
    (``last_measured``, from :data:`LAST_FOCUS_RUN`; never a verdict of this run). The
    perfect-gate control needs no model, so it is this run's."""
    focus = {
        "control": "Focus learned",
        "this_run": NOT_MEASURED,
        "last_measured": {
            "run": LAST_FOCUS_RUN,
            "sliding_window_recall": LAST_FOCUS_RECALL,
            "dsc_lesion_cases": LAST_FOCUS_DSC,
            "passed": LAST_FOCUS_RECALL >= MIN_SLIDING_RECALL and LAST_FOCUS_DSC >= MIN_SLIDING_DSC,
            "note": "recall 0.000 in every full run that trained Focus on the issue-37 testbed "
            "(2026-12-07 01:25, 18:13, 21:09 UTC)",
        },
    }
    fp = {
        "control": "the sliding window has false positives to remove",
        "this_run": NOT_MEASURED,
        "last_measured": {
            "run": LAST_FOCUS_RUN,
            "sliding_window_fp_voxels_per_healthy_case": LAST_SW_FP_VOXELS,
            "passed": LAST_SW_FP_VOXELS >= MIN_BASELINE_FP_VOXELS,
        },
    }
    reachable = perfect_gate_reduction >= TOTAL_FLOP_REDUCTION_MIN
    gate = {
        "control": f"a perfect gate reaches {TOTAL_FLOP_REDUCTION_MIN:g}x",
        "this_run": f"{'passed' if reachable else 'failed'} in this run (gold labels, no model): "
        f"{perfect_gate_reduction:.2f}x {'>=' if reachable else '<'} "
        f"{TOTAL_FLOP_REDUCTION_MIN:g}x"
        + ("" if reachable else ", unreachable in this geometry whatever the Glance selects"),
    }
    return {"a": [focus], "b1": [focus, gate], "c": [focus, fp]}


def _control_line(control: dict[str, Any]) -> str:
    """One control of :func:`other_controls` in a sentence (the claims table's "also needs")."""
    last = control.get("last_measured")
    if last is None:
        return f"{control['control']}: {control['this_run']}"
    numbers = ", ".join(
        f"{k.replace('_', ' ')} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
        for k, v in last.items()
        if k not in ("run", "passed", "note")
    )
    return (
        f"{control['control']}: not measured in this run; last measured {numbers} "
        f"({'passed' if last['passed'] else 'failed'}; {last['run']})"
    )


def also_needs(perfect_gate_reduction: float) -> dict[str, str]:
    """Per claim label, :func:`other_controls` as one line each ("; " between controls)."""
    return {
        label: "; ".join(_control_line(c) for c in controls)
        for label, controls in other_controls(perfect_gate_reduction).items()
    }


def untested_claims(m: Measurement) -> tuple[list[Claim], dict[str, Any]]:
    """The three claims when the separability control failed and nothing was trained
    (``m.per_seed`` empty): ``Claim.untested``, each carrying that control with its AUROC ((b1)
    also its perfect-gate control, which needs no trained model), and the numbers that need
    none (``m.method_free``: the perfect-gate bound, the no-tile ceiling, the (b2) cost
    finding's FLOPs). Each claim's ``measured`` also says what else it needs
    (``also_needs``, :func:`also_needs`): the controls this run could not reach, "not measured
    in this run" with their last measurement, and (b1)'s perfect gate, measured here."""
    import numpy as np

    gate = separable(m.separability)
    if gate.passed:
        raise ValueError("the separability control passed: the claims are measured (build_claims)")
    free = m.method_free
    glance_g, focus_g = free["glance_tile_gflops"], free["focus_tile_gflops"]
    n_tiles = np.array([c["n_tiles"] for c in free["cases"]], dtype=float)
    lesion_tiles = np.array([c["lesion_tiles"] for c in free["cases"]], dtype=float)
    coarse = np.array([c["n_tiles_coarse"] for c in free["cases"]], dtype=float)
    values, reachable = _perfect_gate(n_tiles, lesion_tiles, n_tiles * focus_g, glance_g, focus_g)
    values |= {
        "coarse_total": float((coarse * focus_g).mean()),
        "separability_auroc": m.separability.get("auroc", float("nan")),
        "separability_train_tile_auroc": m.separability.get("train_tile_auroc", float("nan")),
        "glance_tile_gflops": glance_g,
        "focus_tile_gflops": focus_g,
    }
    rules = (
        (">=", -100.0 * RECALL_MAX_DROP, " pts"),
        ("<=", 0.0, " GFLOP"),
        (">=", MIN_FP_VOXELS_REMOVED, " voxels"),
    )
    needs = also_needs(values["perfect_gate_reduction"])
    claims = [
        Claim.untested(
            text=text,
            criterion=f"{name} {direction} {threshold:g}{unit}: the whole 95 % paired interval "
            "over the shared test cases x seeds on that side (not measured: nothing was trained)",
            preconditions=[gate, reachable] if label == "b1" else [gate],
            measured=(
                {
                    "perfect_gate_reduction": _finite(values["perfect_gate_reduction"]),
                    "ceiling_no_tile_selected": _finite(values["ceiling"]),
                }
                if label == "b1"
                else {}
            )
            | {"also_needs": needs[label]},
        )
        for label, text, name, (direction, threshold, unit) in zip(
            CLAIM_LABELS, CLAIM_TEXTS, EFFECT_NAMES, rules, strict=True
        )
    ]
    return claims, values
