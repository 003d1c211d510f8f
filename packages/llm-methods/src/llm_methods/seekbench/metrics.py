"""SeekBench process metrics per agent (``model``) or per category, with cluster-bootstrap CIs.

Quantities follow the official ``analysis/calibration.py`` (SHAO-Jiaqi757/SeekBench @ afddcb3):

- Evidence state E of a result (a step whose annotation type is ``search_result``, whatever the
  tool): 0 = not Sufficient, 1 = Sufficient & not Clear, 2 = Sufficient & Clear; a trace's state
  at a turn is the running max.
- Turn level (every step up to the first answer, inclusive; **no horizon**), official names:
  P(answer | E = k); ``ce`` = Σ_k w_ref(k) |P(answer | E=k) − 1[k ≥ thr]| with w_ref the pooled
  prevalence of E = k over all turns (NaN when the group has no turn at some E, as upstream);
  ``cce`` = mean_k of the same deviations over the levels present.
- Answer events (the first answer of each trace; no horizon), official names: ``auc`` = ordinal
  AUC of E at the answer predicting a *correct* answer; ``slope`` = least-squares slope of
  P(correct | answer, E = k) over k = 0, 1, 2 (levels present, >= 2); ``odds_ratio_e2_e0`` =
  odds of a correct answer at E = 2 vs E = 0 (0.5 continuity correction).
- Trajectory level (the only quantities that take ``horizon``: positions < H = min(horizon,
  len(trace))): ``premature_rate`` = answered within H at E < thr; ``overcautious_rate`` = not
  answered within H though E ≥ thr was reached within H.
- Ours, not official: ``answer_timing_auc`` = ordinal AUC of E predicting *answering* at a turn
  (turn level); ``accuracy`` = ``is_correct`` share; the groundedness rate (below).
- Reasoning steps (upstream ``grounded_reason.compute_rqi``, every step of the trace): annotation
  type InformationSynthesis / PlanFormation / StateAssessment, and for a DeepResearch agent also
  its ``search`` steps. RQI: Grounded share of the reasoning steps anchored on EVIDENCE, pooled
  over the group's steps (the RQI of upstream's grounding table, ``debug_grounding_comparison``;
  its headline RQI averages the per-trace RQIs), or the groundedness rate when a set of traces
  carries no EVIDENCE anchor (``rqi_source = "groundness_only"``). Groundedness rate (ours):
  Grounded share of the reasoning steps that carry a ``groundness`` label, whatever their anchor.
- Recovery (upstream ``recovery.detect_low_quality_episodes``): a low-quality-evidence episode
  starts at a result that is Insufficient or not Clear and ends (recovered) at the next
  Sufficient & Clear result or a correct answer; one still open at the end of the trace is
  censored there. Time to recovery in positions along the trace; ``recovery_rate`` = share of
  episodes that end; Kaplan-Meier survival of the time per model.
- CIs: percentile bootstrap over clusters (dataset, question) (``<metric>_ci`` of
  :func:`analyze`); ``analyze`` (the command) also prints and writes each metric's 95 % interval
  from :mod:`iclr26_common.effects` (:func:`metric_intervals`: SciPy's BCa bootstrap over the
  questions, the metric recomputed from the resampled clusters' summed counts, resampling seed
  ``--seed``) and, with ``--reference``, each agent's paired difference to that agent on the
  questions both answered.

Answer events: a step whose annotation type or step type is ``CorrectAnswer`` /
``IncorrectAnswer``, or an ``answer`` step (correct = its annotation, else ``is_correct``), or,
when a trace has no answer step, a non-empty ``final_answer`` after its last step. The official
analysis reads answer events from ``annotation.type`` only; the released traces' answer steps
carry no annotation, so it finds none (an official bug we fix; README "Deviations").
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from llm_methods.seekbench.counts import (
    COUNT_COLUMNS,
    LEVELS,
    cluster_counts,
    evidence_level,
    model_category,
    recovery_episodes,
)

__all__ = [
    "METRICS",
    "analyze",
    "cluster_counts",
    "evidence_level",
    "metric_intervals",
    "metrics_from_counts",
    "model_category",
    "paired_difference",
    "recovery_episodes",
]

INTERVAL_UNITS = "questions"

METRICS = (
    "accuracy",
    "ce",
    "cce",
    "premature_rate",
    "overcautious_rate",
    "auc",
    "slope",
    "odds_ratio_e2_e0",
    "answer_timing_auc",
    "groundedness",
    "rqi",
    "recovery_rate",
)


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
    levels = np.array(LEVELS, dtype=float)
    p = _ratio(a, n)
    dev = np.abs(p - (levels >= threshold))  # NaN at a level without turns
    ce = (w_ref * dev).sum(-1)  # NaN then, as upstream
    with np.errstate(all="ignore"):
        cce = np.nanmean(dev, -1) if dev.size else dev[..., 0]
    wrong = a - right
    # ``auc``: E at the answer predicting a correct answer (official); ``answer_timing_auc``:
    # E predicting answering at a turn (ours)
    auc = _ordinal_auc(right, wrong)
    timing_auc = _ordinal_auc(a, n - a)
    acc = _ratio(right, a)
    mask = ~np.isnan(acc)
    cnt = mask.sum(-1)
    with np.errstate(all="ignore"):
        xm = (levels * mask).sum(-1) / cnt
        ym = np.where(mask, acc, 0.0).sum(-1) / cnt
        dx = (levels - xm[..., None]) * mask
        num = (dx * np.where(mask, acc - ym[..., None], 0.0)).sum(-1)
        den = (dx**2).sum(-1)
        slope = np.where((cnt >= 2) & (den > 0), num / den, np.nan)
    odds = ((right[..., 2] + 0.5) / (wrong[..., 2] + 0.5)) / (
        (right[..., 0] + 0.5) / (wrong[..., 0] + 0.5)
    )
    grounded = _ratio(c["reason_grounded"], c["reason_total"])
    rqi = _ratio(c["anchor_grounded"], c["anchor_total"]) if use_anchor else grounded
    return {
        "accuracy": _ratio(c["correct"], c["traj"]),
        "ce": ce,
        "cce": cce,
        "premature_rate": _ratio(c["premature"], c["traj"]),
        "overcautious_rate": _ratio(c["overcautious"], c["traj"]),
        "auc": auc,
        "slope": slope,
        "odds_ratio_e2_e0": odds,
        "answer_timing_auc": timing_auc,
        "groundedness": grounded,
        "rqi": rqi,
        "recovery_rate": _ratio(c["recovered"], c["episodes"]),
    }


def _ordinal_auc(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """P(score of a positive > a negative) + ½ P(tie) from per-level counts [..., 3]."""
    better = sum(pos[..., i] * neg[..., j] for i in LEVELS for j in LEVELS if i > j)
    ties = sum(pos[..., k] * neg[..., k] for k in LEVELS)
    return _ratio(better + 0.5 * ties, pos.sum(-1) * neg.sum(-1))


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
        out[model] = {
            "median_steps": median if np.isfinite(median) else None,
            "times": curve.index.tolist(),
            "survival": curve.tolist(),
        }
    return out


def analyze(
    traces: Sequence[dict[str, Any]],
    threshold: int = 2,
    horizon: int | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    group_by: str = "model",
    km: bool = True,
) -> dict[str, Any]:
    """Per-group metrics with 95 % cluster-bootstrap CIs, KM recovery curves and notes.

    ``group_by``: ``model`` (each agent) or ``category`` (the paper's Base / Few-shot / RL Agents
    / ..., :func:`model_category`); ``horizon`` only changes the trajectory-level rates;
    ``km``: fit the Kaplan-Meier recovery curves (per model).
    """
    if threshold not in (1, 2):
        raise ValueError("threshold must be 1 or 2 (E >= threshold means 'should answer')")
    counts = cluster_counts(traces, threshold, horizon, group_by)
    totals = counts[[f"n{k}" for k in LEVELS]].to_numpy().sum(0).astype(float)
    w_ref = totals / max(totals.sum(), 1.0)
    use_anchor = bool(counts["anchor_total"].sum() > 0)
    rng = np.random.default_rng(seed)
    agents: dict[str, Any] = {}
    for model, frame in counts.groupby(level="model"):
        arr = frame.to_numpy(dtype=float)
        point = metrics_from_counts(
            dict(zip(COUNT_COLUMNS, arr.sum(0), strict=True)), w_ref, threshold, use_anchor
        )
        idx = rng.integers(0, len(arr), size=(n_boot, len(arr)))
        boot_sums = arr[idx].sum(1)
        boot = metrics_from_counts(
            dict(zip(COUNT_COLUMNS, boot_sums.T, strict=True)), w_ref, threshold, use_anchor
        )
        row: dict[str, Any] = {"n_traces": int(arr[:, COUNT_COLUMNS.index("traj")].sum())}
        for key in METRICS:
            row[key] = float(point[key])
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN resamples
                lo, hi = np.nanpercentile(boot[key], [2.5, 97.5]) if n_boot else (np.nan,) * 2
            row[f"{key}_ci"] = [float(lo), float(hi)]
        agents[str(model)] = row
    answer_events = int(counts[[f"a{k}" for k in LEVELS]].to_numpy().sum())
    notes = [f"{answer_events} answer events (answer steps' annotation or type / final_answer)"]
    if not use_anchor:
        notes.append("no anchor_type labels: RQI computed from groundedness alone")
    return {
        "agents": agents,
        "group_by": group_by,
        "w_ref": w_ref.tolist(),
        "threshold": threshold,
        "horizon": horizon,
        "rqi_source": "anchor" if use_anchor else "groundness_only",
        "recovery_km": _km(traces) if km and group_by == "model" else {},
        "notes": notes,
    }


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


def _metric_statistics(
    metrics: Sequence[str],
    w_ref: np.ndarray,
    threshold: int,
    use_anchor: bool,
    counts: np.ndarray,
    baseline: np.ndarray | None = None,
) -> dict[str, Any]:
    """{metric: statistic(cluster indices) -> the metric of the indexed clusters' summed
    ``counts`` ([clusters, COUNT_COLUMNS])}; with ``baseline`` (the other group's counts on the
    same clusters), the metric minus the baseline's on the same indices (paired). Resampling the
    indices resamples whole clusters. Every metric comes from one :func:`metrics_from_counts`
    call, kept per index set: the metrics' bootstraps (same seed) draw the same resamples, so
    each resample is summed once, not once per metric."""
    cache: dict[bytes, dict[str, float]] = {}

    def value(rows: np.ndarray) -> dict[str, np.ndarray]:
        sums = dict(zip(COUNT_COLUMNS, rows.sum(0), strict=True))
        return metrics_from_counts(sums, w_ref, threshold, use_anchor)

    def all_metrics(index: np.ndarray) -> dict[str, float]:
        key = index.tobytes()
        if key not in cache:
            picked = index.astype(np.intp)
            mine = value(counts[picked])
            theirs = value(baseline[picked]) if baseline is not None else None
            cache[key] = {
                m: float(mine[m]) - (float(theirs[m]) if theirs is not None else 0.0)
                for m in metrics
            }
        return cache[key]

    def statistic_of(metric: str) -> Any:
        return lambda index: all_metrics(index)[metric]

    return {m: statistic_of(m) for m in metrics}


def metric_intervals(
    traces: Sequence[dict[str, Any]],
    threshold: int = 2,
    horizon: int | None = None,
    group_by: str = "model",
    seed: int = 0,
    n_resamples: int = 1000,
    reference: str | None = None,
    metrics: Sequence[str] = METRICS,
) -> dict[str, dict[str, Any]]:
    """Each group's metrics (as :func:`analyze`) with 95 % intervals from
    :func:`iclr26_common.effects.statistic_interval`: BCa bootstrap over the group's clusters
    (questions; the metric recomputed from the resampled clusters' summed counts, ``w_ref``
    fixed as in :func:`analyze`), ``n_resamples`` resamples, seed ``seed``.

    Returns {group: {"n": clusters, "intervals": {metric: Interval | None}, "reference": name
    or None, "n_shared": clusters shared with the reference, "differences": {metric: Interval |
    None}}}; an interval is ``None`` under 10 clusters or where the metric is undefined on the
    data or on a resample (e.g. CE with no turn at some evidence level). With ``reference`` (a
    group name), each other group's difference ``metric(group) - metric(reference)`` on the
    clusters both have, resampled together (paired). Identical groups give an exact 0."""
    from iclr26_common.effects import interval_or_none, statistic_interval

    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; known: {', '.join(METRICS)}")
    counts = cluster_counts(traces, threshold, horizon, group_by)
    totals = counts[[f"n{k}" for k in LEVELS]].to_numpy().sum(0).astype(float)
    w_ref = totals / max(totals.sum(), 1.0)
    use_anchor = bool(counts["anchor_total"].sum() > 0)
    groups = sorted({str(g) for g in counts.index.get_level_values("model")})
    if reference is not None and reference not in groups:
        raise ValueError(
            f"--reference {reference!r} is not a {group_by} of the traces "
            f"(known: {', '.join(groups)})"
        )

    def intervals(arr: np.ndarray, baseline: np.ndarray | None = None) -> dict[str, Any]:
        statistics = _metric_statistics(metrics, w_ref, threshold, use_anchor, arr, baseline)
        index = (np.arange(len(arr), dtype=float),)
        return {
            m: interval_or_none(
                lambda m=m: statistic_interval(
                    index, statistics[m], seed=seed, units=INTERVAL_UNITS, n_resamples=n_resamples
                )
            )
            for m in metrics
        }

    ref = counts.loc[reference] if reference is not None else None
    out: dict[str, dict[str, Any]] = {}
    for model, frame in counts.groupby(level="model"):
        arr = frame.to_numpy(dtype=float)
        row: dict[str, Any] = {
            "n": len(arr),
            "intervals": intervals(arr),
            "reference": reference,
            "n_shared": None,
            "differences": {},
        }
        if ref is not None and str(model) != reference:
            own = frame.droplevel("model")
            shared = own.index.intersection(ref.index)
            mine = own.loc[shared].to_numpy(dtype=float)
            theirs = ref.loc[shared].to_numpy(dtype=float)
            row["n_shared"] = len(shared)
            row["differences"] = intervals(mine, theirs) if len(shared) else dict.fromkeys(metrics)
        out[str(model)] = row
    return out
