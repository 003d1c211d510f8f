"""SeekBench's claims on real traces (``SEEKBENCH_DATA``, the official file or one in its
schema): the per-agent metrics on a judge's and on the file's labels, Kendall τ of the CE
ranking (claim (a)) and the equal-accuracy pair's CE and premature-answer differences (claims
(b), (c)), each with a bootstrap interval over the file's (dataset, question) clusters; and the
SmolLM2 judge's κ on a fixed sample of the file's result steps.
:mod:`llm_methods.seekbench.experiment` re-exports the public names."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from llm_methods.seekbench.design import DATA_ENV, LM_REAL_SEED, MIN_EVIDENCE_KAPPA
from llm_methods.seekbench.judged import JUDGED_ENV

__all__ = [
    "judge_sample",
    "lm_real",
    "lm_sample",
    "official_data",
    "official_tau",
    "pair_differences",
    "real_traces",
]


def _by_agent(counts: Any) -> tuple[list[str], Any, Any]:
    """Agents, the [agents, clusters, COUNT_COLUMNS] counts (zeros where an agent lacks a
    cluster) and the pooled w_ref, from :func:`cluster_counts`' frame."""
    from llm_methods.seekbench.counts import COUNT_COLUMNS, LEVELS

    agents = sorted({str(m) for m, _ in counts.index})
    clusters = sorted({str(c) for _, c in counts.index})
    arr = np.zeros((len(agents), len(clusters), len(COUNT_COLUMNS)))
    col = {c: k for k, c in enumerate(clusters)}
    for (model, cluster), row in counts.iterrows():
        arr[agents.index(str(model)), col[str(cluster)]] = row.to_numpy(float)
    totals = counts[[f"n{k}" for k in LEVELS]].to_numpy().sum(0).astype(float)
    return agents, arr, totals / max(totals.sum(), 1.0)


def _metrics_of(arr: Any, w_ref: Any) -> Callable[[Any], dict[str, Any]]:
    """index (cluster positions) -> every agent's metrics on those clusters' summed counts,
    cached per index set (the bootstraps of several statistics with one seed share resamples)."""
    from llm_methods.seekbench.counts import COUNT_COLUMNS
    from llm_methods.seekbench.metrics import metrics_from_counts

    cache: dict[bytes, dict[str, Any]] = {}

    def of(index: Any) -> dict[str, Any]:
        picked = np.asarray(index, dtype=np.intp)
        key = picked.tobytes()
        if key not in cache:
            sums = arr[:, picked].sum(1)
            cache[key] = metrics_from_counts(dict(zip(COUNT_COLUMNS, sums.T, strict=True)), w_ref)
        return cache[key]

    return of


def _cluster_interval(
    statistic: Callable[[Any], float], n_clusters: int, n_boot: int, seed: int
) -> dict[str, Any] | None:
    """``statistic`` (of cluster positions) on every cluster with a 95 % bootstrap interval
    over the clusters: SciPy's (:func:`~iclr26_common.effects.statistic_interval`), else, where
    the statistic is undefined on some resamples, the percentile interval of the defined ones.
    ``None`` where it is undefined on the data or no interval exists (under 10 clusters)."""
    from iclr26_common.effects import MIN_BOOTSTRAP_UNITS, statistic_interval

    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    everything = np.arange(n_clusters)
    estimate = statistic(everything)
    if not np.isfinite(estimate) or n_clusters < MIN_BOOTSTRAP_UNITS:
        return None
    try:
        interval = statistic_interval(
            [everything], statistic, seed=seed, units="questions", n_resamples=n_boot
        )
        low, high, method = interval.low, interval.high, interval.method
    except ValueError:
        rng = np.random.default_rng(seed)
        draws = np.array(
            [statistic(rng.integers(0, n_clusters, n_clusters)) for _ in range(n_boot)]
        )
        draws = draws[np.isfinite(draws)]
        if draws.size < n_boot // 2:  # undefined on most resamples: no interval
            return None
        low, high = (float(x) for x in np.percentile(draws, [2.5, 97.5]))
        method = "bootstrap"
    low, high = min(low, estimate), max(high, estimate)
    exact = low == high
    return {
        "estimate": float(estimate),
        "low": float(low),
        "high": float(high),
        "method": "exact" if exact else method,
        "n": n_clusters,
        "resample_seed": None if exact else seed,
    }


def official_tau(
    gold: list[dict[str, Any]], judged: list[dict[str, Any]], n_boot: int, seed: int = 0
) -> dict[str, Any]:
    """Kendall τ between the agents' CE on ``judged`` and on ``gold`` labels (same traces), with
    a bootstrap interval over (dataset, question) clusters (:func:`_cluster_interval`; ``tau``
    None where fewer than 3 agents have CE on both)."""
    from scipy.stats import kendalltau

    from llm_methods.seekbench.counts import cluster_counts

    agents, g_arr, g_w = _by_agent(cluster_counts(gold))
    j_agents, j_arr, j_w = _by_agent(cluster_counts(judged))
    if j_agents != agents:
        raise ValueError("official_tau: the judged traces have other agents or questions")
    gold_of, judged_of = _metrics_of(g_arr, g_w), _metrics_of(j_arr, j_w)

    def tau(index: Any) -> float:
        a, b = judged_of(index)["ce"], gold_of(index)["ce"]
        ok = np.isfinite(a) & np.isfinite(b)
        if ok.sum() < 3:
            return float("nan")
        return float(kendalltau(a[ok], b[ok]).statistic)

    n = g_arr.shape[1]
    everything = np.arange(n)
    ce_j, ce_g = judged_of(everything)["ce"], gold_of(everything)["ce"]
    return {
        "agents": agents,
        "ce_judge": [float(x) if np.isfinite(x) else None for x in ce_j],  # None: undefined
        "ce_expert": [float(x) if np.isfinite(x) else None for x in ce_g],
        "agents_defined": int((np.isfinite(ce_j) & np.isfinite(ce_g)).sum()),
        "n_clusters": n,
        "tau": _cluster_interval(tau, n, n_boot, seed),
    }


def pair_differences(traces: list[dict[str, Any]], n_boot: int, seed: int = 0) -> dict[str, Any]:
    """Claims (b), (c) on ``traces``' own labels. Every agent pair's accuracy difference with a
    95 % bootstrap interval over the file's (dataset, question) clusters (the pair's agents
    resampled together: paired on the questions they share); the pair whose interval is
    narrowest (the largest |bound| smallest; first in name order on a tie), and its CE and
    premature-rate differences, each taken as the higher agent minus the lower by the point
    estimate, with the same bootstrap (same seed: the same resamples)."""
    from itertools import combinations

    from llm_methods.seekbench.counts import cluster_counts

    agents, arr, w_ref = _by_agent(cluster_counts(traces))
    metrics_of = _metrics_of(arr, w_ref)
    n = arr.shape[1]

    def difference(metric: str, a: int, b: int) -> Callable[[Any], float]:
        return lambda index: float(metrics_of(index)[metric][a] - metrics_of(index)[metric][b])

    table = []
    for a, b in combinations(range(len(agents)), 2):
        interval = _cluster_interval(difference("accuracy", a, b), n, n_boot, seed)
        bound = None if interval is None else max(abs(interval["low"]), abs(interval["high"]))
        table.append({"pair": [agents[a], agents[b]], "accuracy": interval, "bound": bound})
    out: dict[str, Any] = {
        "agents": agents,
        "accuracy_by_pair": table,
        "pair": [],
        "accuracy": None,
        "ce": None,
        "premature_rate": None,
    }
    ranked = [row for row in table if row["bound"] is not None]
    if not ranked:
        return out
    best = min(ranked, key=lambda row: row["bound"])
    a, b = (agents.index(x) for x in best["pair"])
    out.update(pair=best["pair"], accuracy=best["accuracy"])
    whole = metrics_of(np.arange(n))
    for metric in ("ce", "premature_rate"):
        first, second = (b, a) if whole[metric][b] > whole[metric][a] else (a, b)
        interval = _cluster_interval(difference(metric, first, second), n, n_boot, seed)
        if interval is not None:
            interval["order"] = [agents[first], agents[second]]
        out[metric] = interval
    return out


def official_data() -> Path | None:
    """The trace file named by ``SEEKBENCH_DATA`` (unset or empty: None, no claim can run)."""
    value = os.environ.get(DATA_ENV, "").strip()
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise ValueError(f"{DATA_ENV}={value}: no such file (the official seekbench_data.jsonl)")
    return path


def real_traces(
    path: Path,
    n_boot: int,
    judge: Any = None,
    seed: int = 0,
    judged_file: tuple[Path, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The numbers behind claims (a)-(c) on the trace file ``path``: the judge's labels are
    ``judged_file`` (path, traces: a judged copy, ``SEEKBENCH_JUDGED``) where given, else
    ``judge`` (default the rule judge) re-annotates every step; κ_E and κ per field against
    the file's labels; (a)'s τ (:func:`official_tau`); the per-agent metrics on both labels;
    (b), (c)'s pair on the file's labels (:func:`pair_differences`)."""
    from llm_methods.seekbench.data import read_traces
    from llm_methods.seekbench.judge import RuleJudge, agreement, annotate, evidence_agreement
    from llm_methods.seekbench.metrics import METRICS, analyze

    traces = read_traces(path)
    if judged_file is not None:
        judged = judged_file[1]
        source = (
            f"{JUDGED_ENV}={judged_file[0]} (sha256 "
            f"{hashlib.sha256(judged_file[0].read_bytes()).hexdigest()[:16]})"
        )
    else:
        judged = annotate(traces, judge if judge is not None else RuleJudge())
        source = "rule judge"
    evidence = evidence_agreement(traces, judged)
    out = official_tau(traces, judged, n_boot, seed)

    def per_agent(labelled: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
        rows = analyze(labelled, n_boot=0, seed=seed, km=False)["agents"]
        return {a: {m: _finite(row[m]) for m in METRICS} for a, row in rows.items()}

    out.update(
        path=str(path),
        sha256=hashlib.sha256(path.read_bytes()).hexdigest()[:16],
        traces=len(traces),
        judge=source,
        kappa_evidence=evidence.get("kappa", 0.0),  # no shared result step: fails
        evidence=evidence,
        kappa=agreement(traces, judged),
        metrics_judge_labels=per_agent(judged),
        metrics_expert_labels=per_agent(traces),
        pairs=pair_differences(traces, n_boot, seed),
    )
    return out


def lm_sample(
    traces: list[dict[str, Any]], n_results: int, n_other: int, seed: int
) -> set[tuple[int, int]]:
    """A random sample of judgeable (trace, step) positions: ``n_results`` result steps that
    carry a gold evidence level (every synthetic one; the expert-labelled ones of a trace file)
    and ``n_other`` reasoning / query steps."""
    from llm_methods.seekbench.counts import evidence_level
    from llm_methods.seekbench.judge import KINDS, judged_steps

    rng = np.random.default_rng([seed, 42])
    every = sorted(judged_steps(traces))

    def is_result(p: tuple[int, int]) -> bool:
        return KINDS[traces[p[0]]["trace"][p[1]]["type"]] == "search_result"

    results = [
        p for p in every if is_result(p) and evidence_level(traces[p[0]]["trace"][p[1]]) is not None
    ]
    other = [p for p in every if not is_result(p)]
    pick: set[tuple[int, int]] = set()
    for pool, n in ((results, n_results), (other, n_other)):
        for k in rng.permutation(len(pool))[:n]:
            pick.add(pool[int(k)])
    return pick


def judge_sample(
    traces: list[dict[str, Any]], judge: Any, sample: set[tuple[int, int]]
) -> dict[str, Any]:
    """``judge`` on the ``sample`` positions of ``traces``: κ per field and κ_E against the
    traces' own labels over those steps, whether κ_E passes the judge's control
    (:data:`MIN_EVIDENCE_KAPPA`), the judge's calls and seconds per call."""
    from llm_methods.seekbench.judge import agreement, annotate, evidence_agreement

    calls, start = judge.calls, time.perf_counter()
    judged = annotate(traces, judge, steps=sample)
    seconds = time.perf_counter() - start
    evidence = evidence_agreement(traces, judged, steps=sample)
    calls = judge.calls - calls
    return {
        "kappa": agreement(traces, judged, steps=sample),
        "evidence": evidence,
        "passes_control": evidence.get("kappa", 0.0) >= MIN_EVIDENCE_KAPPA,
        "steps": len(sample),
        "calls": calls,
        "s_per_call": seconds / max(calls, 1),
    }


def _smollm2_judge() -> Any:
    """The SmolLM2 judge (``LMJudge`` on SmolLM2-135M, float32, on :func:`choose_device`)."""
    from iclr26_common.device import choose_device
    from llm_methods.lm import load_lm
    from llm_methods.seekbench.judge import LMJudge

    return LMJudge(load_lm("smollm2", choose_device(), "float32"))


def _lm_judge(
    traces: list[dict[str, Any]], cfg: dict[str, Any], seed: int, judge: Callable[[], Any]
) -> dict[str, Any]:
    """The SmolLM2 judge (``judge()``) on a random sample of seed ``seed``'s proxy steps: κ per
    field, κ_E and whether it would pass the judge's control. Its labels are not used for the
    claims: at seconds per step it cannot label the thousands of result steps a seed has
    within the budget."""
    if cfg["lm_results"] + cfg["lm_other"] <= 0:
        return {}
    sample = lm_sample(traces, cfg["lm_results"], cfg["lm_other"], seed)
    out = judge_sample(traces, judge(), sample)
    out["result_steps_per_seed"] = sum(
        1 for t in traces for s in t["trace"] if s["type"] == "search_result"
    )
    return out


def lm_real(
    traces: list[dict[str, Any]], n: int, judge: Callable[[], Any], seed: int = LM_REAL_SEED
) -> dict[str, Any]:
    """The SmolLM2 judge (``judge()``) against the experts: ``n`` expert-labelled result steps
    of the trace file, a random sample of seed ``seed`` (:func:`lm_sample`); its κ_E and κ per
    field, whether it passes the judge's control (then claim (a) on its labels would be
    decidable), the sampled steps as (trace id, step_index), and the file's expert-labelled
    result steps (what labelling all of them would take)."""
    if n <= 0:
        return {}
    sample = lm_sample(traces, n, 0, seed)
    out = judge_sample(traces, judge(), sample)
    labelled = lm_sample(traces, 10**9, 0, seed)
    out.update(
        seed=seed,
        sample=[
            [str(traces[t]["id"]), int(traces[t]["trace"][i]["step_index"])]
            for t, i in sorted(sample)
        ],
        labelled_result_steps=len(labelled),
        decides_a=out["passes_control"],
    )
    return out


def _finite(x: float) -> float | None:
    """``x`` where finite, else None (undefined: JSON null, "undefined" in the report)."""
    return float(x) if np.isfinite(x) else None
