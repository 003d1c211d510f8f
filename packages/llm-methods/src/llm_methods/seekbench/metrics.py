"""SeekBench process metrics per agent (``model``), with cluster-bootstrap CIs.

- Evidence state E of a result: 0 = Insufficient, 1 = Sufficient & Unclear (or no clarity),
  2 = Sufficient & Clear; a trace's state at a turn is the running max (paper §4.3, upstream
  ``calibration.py``).
- Groundedness rate: Grounded share of reasoning steps; RQI: Grounded share of reasoning steps
  anchored on EVIDENCE (upstream ``grounded_reason.py``), or the groundedness rate when a set of
  traces carries no ``anchor_type`` (``rqi_source = "groundness_only"``).
- Recovery: an episode starts at an Insufficient result and ends at the next Sufficient one
  (time-to-recovery in steps; censored at the answer / end of the trace); Kaplan-Meier survival.
- Calibration: turn-level P(answer | E = k) over the turns up to the first answer,
  CE = Σ_k w_ref(k) |P(answer | E=k) − 1[k ≥ thr]| with w_ref the pooled prevalence of E = k,
  CCE = mean_k |P(answer | E=k) − 1[k ≥ thr]|; premature-answer rate (answered at E < thr) and
  over-cautious rate (not answered though E ≥ thr was reached); ordinal AUC of answering vs E;
  odds ratio of a correct answer at E = 2 vs E = 0 (0.5 continuity correction).
- CIs: percentile bootstrap over clusters (dataset, question).

Answer events come from the answer step's ``type`` (``CorrectAnswer`` / ``IncorrectAnswer`` /
``answer``), or, when a trace has no answer step, from a non-empty ``final_answer`` after its
last step (the official code looks for them in ``annotation.type`` and finds none).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from llm_methods.seekbench.data import ANSWER_STEP_TYPES, REASONING_TYPES

__all__ = [
    "METRICS",
    "analyze",
    "cluster_counts",
    "evidence_level",
    "metrics_from_counts",
    "paired_difference",
    "recovery_episodes",
]

LEVELS = (0, 1, 2)
METRICS = ("accuracy", "ce", "cce", "premature_rate", "overcautious_rate", "answer_auc",
           "odds_ratio_e2_e0", "groundedness", "rqi", "recovery_rate")  # fmt: skip
COUNT_COLUMNS = (
    [f"n{k}" for k in LEVELS] + [f"a{k}" for k in LEVELS] + [f"c{k}" for k in LEVELS]
    + ["traj", "correct", "premature", "overcautious", "reason_total", "reason_grounded",
       "anchor_total", "anchor_grounded", "episodes", "recovered"]
)  # fmt: skip


def evidence_level(step: dict[str, Any]) -> int | None:
    """E of one annotated search_result step; None for any other step."""
    annotation = step.get("annotation") or {}
    if step.get("type") != "search_result" or annotation.get("type") != "search_result":
        return None
    attributes = annotation.get("attributes") or {}
    if attributes.get("information_quality") != "Sufficient":
        return 0
    return 2 if attributes.get("information_clarity") == "Clear" else 1


def _answer(trace: dict[str, Any]) -> tuple[int | None, int]:
    """(position of the answer event in ``trace['trace']`` or len(trace) for a final-answer-only
    trace, None when unanswered; correctness 0/1)."""
    steps = trace["trace"]
    for i, step in enumerate(steps):
        if step["type"] in ANSWER_STEP_TYPES:
            if step["type"] == "answer":
                return i, int(bool(trace["is_correct"]))
            return i, int(step["type"] == "CorrectAnswer")
    if (trace.get("final_answer") or "").strip():
        return len(steps), int(bool(trace["is_correct"]))
    return None, 0


def recovery_episodes(trace: dict[str, Any]) -> list[tuple[int, bool]]:
    """(duration in steps, recovered) of each low-quality episode before the answer."""
    end, _ = _answer(trace)
    steps = trace["trace"][: len(trace["trace"]) if end is None else end]
    episodes, start = [], None
    for step in steps:
        level = evidence_level(step)
        if level is None:
            continue
        if level == 0 and start is None:
            start = step["step_index"]
        elif level > 0 and start is not None:
            episodes.append((step["step_index"] - start, True))
            start = None
    if start is not None:
        last = steps[-1]["step_index"] if steps else start
        episodes.append((max(last - start, 0), False))
    return episodes


def _trace_counts(trace: dict[str, Any], threshold: int, horizon: int | None) -> dict[str, int]:
    row = dict.fromkeys(COUNT_COLUMNS, 0)
    position, correct = _answer(trace)
    steps = trace["trace"]
    state, ever_high = 0, False
    stop = len(steps) if position is None else min(position + 1, len(steps))
    for step in steps[:stop]:
        level = evidence_level(step)
        state = max(state, level or 0)
        ever_high |= state >= threshold and (horizon is None or step["step_index"] < horizon)
        row[f"n{state}"] += 1
        annotation = step.get("annotation") or {}
        attributes = annotation.get("attributes") or {}
        if annotation.get("type") in REASONING_TYPES and "groundness" in attributes:
            grounded = int(attributes["groundness"] == "Grounded")
            row["reason_total"] += 1
            row["reason_grounded"] += grounded
            if attributes.get("anchor_type") == "EVIDENCE":
                row["anchor_total"] += 1
                row["anchor_grounded"] += grounded
    if position is not None and position >= len(steps):
        row[f"n{state}"] += 1  # the final answer as its own turn
    answered = position is not None and (horizon is None or position < horizon)
    if answered:
        row[f"a{state}"] += 1
        row[f"c{state}"] += correct
        row["premature"] += int(state < threshold)
    elif ever_high:
        row["overcautious"] += 1
    row["traj"] = 1
    row["correct"] = int(bool(trace["is_correct"]))
    episodes = recovery_episodes(trace)
    row["episodes"] = len(episodes)
    row["recovered"] = sum(ok for _, ok in episodes)
    return row


def cluster_counts(
    traces: Sequence[dict[str, Any]], threshold: int = 2, horizon: int | None = None
) -> pd.DataFrame:
    """One row per (model, cluster) with the summed counts every metric is a function of."""
    rows = []
    for trace in traces:
        row = _trace_counts(trace, threshold, horizon)
        row["model"] = trace["model"]
        row["cluster"] = f"{trace['dataset']}\x1f{trace.get('question_id', trace['question'])}"
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame.groupby(["model", "cluster"], sort=True)[list(COUNT_COLUMNS)].sum()


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)


def metrics_from_counts(
    c: dict[str, np.ndarray], w_ref: np.ndarray, threshold: int = 2, use_anchor: bool = True
) -> dict[str, np.ndarray]:
    """All metrics from summed counts (arrays of any common shape: a point or B bootstraps)."""
    n = np.stack([c[f"n{k}"] for k in LEVELS], -1).astype(float)
    a = np.stack([c[f"a{k}"] for k in LEVELS], -1).astype(float)
    right = np.stack([c[f"c{k}"] for k in LEVELS], -1).astype(float)
    p = _ratio(a, n)
    target = (np.array(LEVELS) >= threshold).astype(float)
    dev = np.abs(np.nan_to_num(p, nan=0.0) - target)
    ce = (w_ref * dev).sum(-1)
    cce = np.nanmean(np.where(n > 0, dev, np.nan), -1) if n.size else n
    pos, neg = a, n - a
    better = sum(pos[..., i] * neg[..., j] for i in LEVELS for j in LEVELS if i > j)
    ties = sum(pos[..., k] * neg[..., k] for k in LEVELS)
    auc = _ratio(better + 0.5 * ties, pos.sum(-1) * neg.sum(-1))
    wrong = a - right
    odds = ((right[..., 2] + 0.5) / (wrong[..., 2] + 0.5)) / (
        (right[..., 0] + 0.5) / (wrong[..., 0] + 0.5)
    )
    grounded = _ratio(c["reason_grounded"], c["reason_total"])
    rqi = _ratio(c["anchor_grounded"], c["anchor_total"]) if use_anchor else grounded
    return {
        "accuracy": _ratio(c["correct"], c["traj"]), "ce": ce, "cce": cce,
        "premature_rate": _ratio(c["premature"], c["traj"]),
        "overcautious_rate": _ratio(c["overcautious"], c["traj"]), "answer_auc": auc,
        "odds_ratio_e2_e0": odds, "groundedness": grounded, "rqi": rqi,
        "recovery_rate": _ratio(c["recovered"], c["episodes"]),
    }  # fmt: skip


def _km(traces: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Kaplan-Meier time-to-recovery per model (lifelines)."""
    from lifelines import KaplanMeierFitter

    out: dict[str, Any] = {}
    for model in sorted({t["model"] for t in traces}):
        episodes = [e for t in traces if t["model"] == model for e in recovery_episodes(t)]
        if not episodes:
            continue
        durations = [d for d, _ in episodes]
        events = [ok for _, ok in episodes]
        fitter = KaplanMeierFitter().fit(durations, events)
        median = float(fitter.median_survival_time_)
        curve = fitter.survival_function_.iloc[:, 0]
        out[model] = {"median_steps": median if np.isfinite(median) else None,
                      "times": curve.index.tolist(), "survival": curve.tolist()}  # fmt: skip
    return out


def analyze(
    traces: Sequence[dict[str, Any]],
    threshold: int = 2,
    horizon: int | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Per-agent metrics with 95 % cluster-bootstrap CIs, KM recovery curves and notes."""
    if threshold not in (1, 2):
        raise ValueError("threshold must be 1 or 2 (E >= threshold means 'should answer')")
    counts = cluster_counts(traces, threshold, horizon)
    totals = counts[[f"n{k}" for k in LEVELS]].to_numpy().sum(0).astype(float)
    w_ref = totals / max(totals.sum(), 1.0)
    use_anchor = bool(counts["anchor_total"].sum() > 0)
    rng = np.random.default_rng(seed)
    agents: dict[str, Any] = {}
    for model, frame in counts.groupby(level="model"):
        arr = frame.to_numpy(dtype=float)
        point = metrics_from_counts(dict(zip(COUNT_COLUMNS, arr.sum(0), strict=True)), w_ref,
                                    threshold, use_anchor)  # fmt: skip
        idx = rng.integers(0, len(arr), size=(n_boot, len(arr)))
        boot_sums = arr[idx].sum(1)
        boot = metrics_from_counts(dict(zip(COUNT_COLUMNS, boot_sums.T, strict=True)), w_ref,
                                   threshold, use_anchor)  # fmt: skip
        row: dict[str, Any] = {"n_traces": int(arr[:, COUNT_COLUMNS.index("traj")].sum())}
        for key in METRICS:
            row[key] = float(point[key])
            with np.errstate(all="ignore"):
                lo, hi = np.nanpercentile(boot[key], [2.5, 97.5]) if n_boot else (np.nan,) * 2
            row[f"{key}_ci"] = [float(lo), float(hi)]
        agents[str(model)] = row
    answer_events = int(counts[[f"a{k}" for k in LEVELS]].to_numpy().sum())
    notes = [f"{answer_events} answer events derived from answer step types / final_answer"]
    if not use_anchor:
        notes.append("no anchor_type labels: RQI computed from groundedness alone")
    return {"agents": agents, "w_ref": w_ref.tolist(), "threshold": threshold,
            "horizon": horizon, "rqi_source": "anchor" if use_anchor else "groundness_only",
            "recovery_km": _km(traces), "notes": notes}  # fmt: skip


def paired_difference(
    traces: Sequence[dict[str, Any]],
    model_a: str,
    model_b: str,
    metric: str,
    threshold: int = 2,
    n_boot: int = 1000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """metric(a) − metric(b) with a 95 % paired cluster-bootstrap CI (clusters both answered)."""
    counts = cluster_counts(traces, threshold)
    totals = counts[[f"n{k}" for k in LEVELS]].to_numpy().sum(0).astype(float)
    w_ref = totals / max(totals.sum(), 1.0)
    use_anchor = bool(counts["anchor_total"].sum() > 0)
    a, b = counts.loc[model_a], counts.loc[model_b]
    shared = a.index.intersection(b.index)
    if len(shared) == 0:
        raise ValueError(f"agents {model_a!r} and {model_b!r} share no questions")
    arr_a, arr_b = a.loc[shared].to_numpy(float), b.loc[shared].to_numpy(float)
    idx = np.random.default_rng(seed).integers(0, len(shared), size=(n_boot, len(shared)))

    def value(x: np.ndarray) -> np.ndarray:
        sums = dict(zip(COUNT_COLUMNS, np.moveaxis(x, -1, 0), strict=True))
        return metrics_from_counts(sums, w_ref, threshold, use_anchor)[metric]

    point = float(value(arr_a.sum(0)) - value(arr_b.sum(0)))
    diffs = value(arr_a[idx].sum(1)) - value(arr_b[idx].sum(1))
    lo, hi = np.nanpercentile(diffs, [2.5, 97.5])
    return point, float(lo), float(hi)
