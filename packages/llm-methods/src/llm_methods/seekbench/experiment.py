"""Miniature SeekBench experiment ``llm-methods.seekbench``.

**Claims: the paper's empirical findings on real agents' traces.** They run only on a trace
file the user supplies: ``SEEKBENCH_DATA`` set to the official ``data/seekbench_data.jsonl``
(SHAO-Jiaqi757/SeekBench; no licence, so not shipped) or any file in its schema whose labels are
expert (or trusted) annotations. Unset, each claim is **inconclusive (control failed:
SEEKBENCH_DATA names a trace file)**, not measured, and the report says how to run them.
Thresholds, fixed here before any run (issue 42):

  (a) CE computed on a judge's labels ranks the agents as CE on the file's own labels does:
      Kendall τ >= CLAIM_A_MIN_TAU, bootstrap over the file's (dataset, question) clusters.
      The judge: the paper's LLM judge where ``SEEKBENCH_JUDGED`` names a judged copy of the
      file (``llm-methods seekbench judge $SEEKBENCH_DATA --judge http ... --out FILE``: the
      same traces, ids and steps, every result step judged; else one line, exit 2), otherwise
      the rule judge re-annotates every step. Controls: the file is supplied; the judge's
      evidence level agrees with the file's (κ_E of those labels >= MIN_EVIDENCE_KAPPA, the
      paper's judge-expert bar); CE is defined for >= 3 agents on both labels. The per-agent
      metrics on the judge's labels and its κ per field are reported beside them.
  (b) CE separates two real agents that accuracy does not: on the file's labels, the pair of
      agents with the narrowest accuracy-difference interval (the largest |bound| smallest);
      control "an equal-accuracy pair exists": that interval lies within ±ACCURACY_MARGIN. The
      effect is CE(higher) − CE(lower), the order taken from the point estimate, its whole 95 %
      cluster-bootstrap interval >= CLAIM_B_MIN_CE_GAP.
  (c) So does the premature-answer rate (same pair and control): >= CLAIM_C_MIN_PREMATURE_GAP.

**Pipeline checks on the synthetic proxy** (not claims): six synthetic agents with designed
behaviour (``synth.PROFILES``) answer the same questions, the rule judge re-annotates every
step, and the same three quantities are computed on its labels over seeds. Their outcome is
designed into the testbed (the agents' answer probabilities set the calibration order, equal
accuracy of calibrated/premature is built in, and the fixed rule judge reads the templated
results exactly), so they test our judge and metrics, not the paper: they are reported in the
report's "Pipeline checks" section and never decide the verdict.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common import Claim, Experiment, Precondition, Result, seed_everything
from iclr26_common.effects import Effect, format_effect, t_effect, units_needed
from llm_methods.seekbench.judged import JUDGED_ENV, judged_copy

__all__ = [
    "EXPERIMENT",
    "Check",
    "claims",
    "effect_text",
    "judge_sample",
    "lm_sample",
    "official_tau",
    "pair_differences",
    "proxy_checks",
    "real_traces",
    "run",
    "settings",
]

PAPER = (
    "SeekBench: Beyond Correctness, Evaluating LLM Search Agents' Epistemic Competence "
    "(arXiv 2509.22391)"
)
CLAIM_A_MIN_TAU = 2 / 3
CLAIM_B_MIN_CE_GAP = 0.02
CLAIM_C_MIN_PREMATURE_GAP = 0.10
ACCURACY_MARGIN = 0.05
# the judge's control: Cohen's kappa of the evidence level E, judge vs the file's (gold) labels;
# 0.7 is the paper's own bar for its LLM judge against the expert labels (experts: > 0.8)
MIN_EVIDENCE_KAPPA = 0.7
PAIR = ("calibrated", "premature")
PROXY = "synthetic proxy (designed agents, rule-judge labels), not the paper's real traces"
DATA_ENV = "SEEKBENCH_DATA"
# the claims' first control: one name whatever its outcome (the outcome is in passed/measured)
DATA_CONTROL = f"{DATA_ENV} names a trace file"
NO_DATA = f"not measured: {DATA_ENV} unset"
HOW_TO_RUN = (
    f"{DATA_ENV}=path/to/seekbench_data.jsonl iclr26 reproduce llm-methods.seekbench "
    "(the official file: SHAO-Jiaqi757/SeekBench data/seekbench_data.jsonl)"
)
PIPELINE_TITLE = (
    "Pipeline checks on the synthetic proxy (designed outcome; they test our judge and "
    "metrics, not the paper)"
)
CLUSTER_UNITS = "questions (the file's (dataset, question) clusters)"
# the SmolLM2 judge's sample of real result steps: fixed seed (issue 42: its kappa_E against the
# experts, beside the rule judge's)
LM_REAL_SEED = 0


def settings(quick: bool) -> dict[str, Any]:
    """``lm_results`` / ``lm_other``: result steps / other steps of seed 0 the SmolLM2 judge
    labels (a random sample: its κ per field and κ_E). ``lm_real``: expert-labelled result
    steps of the trace file (``SEEKBENCH_DATA``) it labels (a random sample, seed
    :data:`LM_REAL_SEED`: its κ_E against the experts). ``n_boot``: resamples of every
    bootstrap (the real-trace claims' too)."""
    if quick:
        return {
            "n_questions": 80,
            "seeds": (0, 1, 2),
            "n_boot": 300,
            "lm_results": 4,
            "lm_other": 2,
            "lm_real": 4,
        }
    # 12 seeds: the 5-seed pilot (2026-12-07) had a per-seed accuracy-difference SD of 0.06, so
    # 5 seeds could not show |difference| <= ACCURACY_MARGIN (t-interval +-0.08); 12 give +-0.04
    return {
        "n_questions": 200,
        "seeds": tuple(range(12)),
        "n_boot": 1000,
        "lm_results": 24,
        "lm_other": 16,
        "lm_real": 40,
    }


def _kendall(values: list[float]) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau(values, list(range(len(values)))).statistic)


def judge_control(kappas: list[float], where: str = "every seed") -> Precondition:
    """The judge's control: κ_E (judge vs gold evidence level) >= MIN_EVIDENCE_KAPPA."""
    return Precondition(
        "judge's evidence levels agree with gold",
        f"Cohen's kappa(judge, gold) of the evidence level E (0/1/2) of the result steps >= "
        f"{MIN_EVIDENCE_KAPPA} in {where} (the paper's judge-expert bar)",
        {"kappa_evidence": [round(float(k), 3) for k in kappas]},
        bool(kappas) and min(float(k) for k in kappas) >= MIN_EVIDENCE_KAPPA,
    )


def effect_text(effect: Effect | dict[str, Any], control_failed: bool = False) -> str:
    """:func:`format_effect`'s line; where a control failed, without its "deciding this effect
    needs ~N" (more units would decide nothing: the setup could not test it)."""
    return format_effect(effect, advice=not control_failed)


# ------------------------------------------------------------ pipeline checks (synthetic proxy)


@dataclass(frozen=True)
class Check:
    """A pipeline check: an effect with its interval and controls, like a claim, but about our
    judge and metrics on a testbed whose outcome is designed in, so it never enters the
    experiment's verdict. ``outcome``: "passed" / "failed" (the whole interval on one side of
    the threshold), "undecided" (it straddles), or "control failed: NAME"."""

    name: str
    effect: Effect
    controls: tuple[Precondition, ...] = ()

    @property
    def outcome(self) -> str:
        failed = [p.name for p in self.controls if not p.passed]
        if failed:
            return "control failed: " + ", ".join(failed)
        decision = self.effect.decide()
        return {"held": "passed", "not held": "failed"}.get(decision, "undecided")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "outcome": self.outcome,
            "effect": self.effect.to_dict(),
            "controls": [p.to_dict() for p in self.controls],
        }

    def line(self) -> str:
        controls = "; ".join(
            f"{p.name}: {'passed' if p.passed else 'FAILED'} ({p.measured})" for p in self.controls
        )
        failed = any(not p.passed for p in self.controls)
        return (
            f"- {self.name}: **{self.outcome}**: {effect_text(self.effect, failed)}"
            + (f". Controls: {controls}" if controls else "")
            + "."
        )


def proxy_checks(per_seed: dict[str, list[float]]) -> list[Check]:
    """The three pipeline checks from per-seed values on the proxy's judge labels: ``tau_ce``
    (Kendall τ of CE vs the designed chain), ``ce_gap``, ``premature_gap``, ``accuracy_gap``
    (premature − calibrated) and ``kappa_evidence`` (κ_E, judge vs gold); each a t-interval
    over the seeds against the claims' thresholds."""
    judge_ok = judge_control(per_seed["kappa_evidence"])
    acc = t_effect(
        per_seed["accuracy_gap"],
        name="accuracy difference",
        threshold=ACCURACY_MARGIN,
        direction="within",
        binary=False,
    )
    equal_accuracy = Precondition(
        "accuracy does not separate the pair",
        f"|accuracy(premature) - accuracy(calibrated)| <= {ACCURACY_MARGIN}: the whole 95 % "
        "t-interval over seeds",
        {"estimate": round(acc.estimate, 4), "low": round(acc.low, 4), "high": round(acc.high, 4)},
        acc.decide() == "held",
    )
    return [
        Check(
            "CE on rule-judge labels orders the designed chain calibrated < hasty < premature "
            "< reckless",
            t_effect(
                per_seed["tau_ce"],
                name="Kendall tau(CE, designed calibration order)",
                threshold=CLAIM_A_MIN_TAU,
                binary=False,
            ),
            (judge_ok,),
        ),
        Check(
            "CE separates the designed equal-accuracy pair",
            t_effect(
                per_seed["ce_gap"],
                name="CE(premature) - CE(calibrated)",
                threshold=CLAIM_B_MIN_CE_GAP,
                binary=False,
            ),
            (equal_accuracy, judge_ok),
        ),
        Check(
            "the premature-answer rate separates the same pair",
            t_effect(
                per_seed["premature_gap"],
                name="premature rate(premature) - (calibrated)",
                threshold=CLAIM_C_MIN_PREMATURE_GAP,
                binary=False,
            ),
            (equal_accuracy, judge_ok),
        ),
    ]


# ------------------------------------------------------------------ claims on real traces


def data_control(real: dict[str, Any] | None) -> Precondition:
    """The claims' first control, :data:`DATA_CONTROL`: a trace file was supplied
    (``SEEKBENCH_DATA``); the same name whatever the outcome."""
    criterion = (
        f"{DATA_ENV} names a trace file in the official schema with expert labels "
        "(the official data/seekbench_data.jsonl)"
    )
    if real is None:
        return Precondition(DATA_CONTROL, criterion, f"{DATA_ENV} unset: run {HOW_TO_RUN}", False)
    return Precondition(
        DATA_CONTROL,
        criterion,
        {"file": Path(real.get("path", "?")).name, "traces": real.get("traces")},
        True,
    )


def interval_effect(
    interval: dict[str, Any] | None, name: str, threshold: float, direction: str = ">="
) -> Effect | None:
    """An effect from a :func:`_cluster_interval` dict; ``None`` where the quantity is undefined
    on the file (the claim's control on definedness fails then: :func:`_claim`)."""
    if interval is None:
        return None
    n, exact = int(interval["n"]), interval["method"] == "exact"
    # the per-question spread the interval implies, and the questions that would decide it
    spread = 0.0 if exact else (interval["high"] - interval["low"]) / (2 * 1.959964) * n**0.5
    needed = n if exact else units_needed(spread, interval["estimate"], threshold, direction)  # type: ignore[arg-type]
    return Effect(
        name=name,
        unit="",
        estimate=interval["estimate"],
        low=interval["low"],
        high=interval["high"],
        threshold=threshold,
        direction=direction,  # type: ignore[arg-type]
        method=interval["method"],
        n=n,
        units=CLUSTER_UNITS,
        resample_seed=interval.get("resample_seed"),
        spread=spread,
        n_needed=needed,
    )


def official_effect(tau: dict[str, Any] | None) -> Effect | None:
    """(a)'s effect from :func:`official_tau`'s interval."""
    return interval_effect(
        tau, "Kendall tau(CE on judge labels, CE on expert labels)", CLAIM_A_MIN_TAU
    )


def _claim(
    text: str, criterion: str, effect: Effect | None, preconditions: list[Precondition]
) -> Claim:
    """The claim decided by ``effect``'s interval, or not measured (``effect`` None: a failed
    control on definedness says why)."""
    if effect is None:
        return Claim.untested(text=text, criterion=criterion, preconditions=preconditions)
    return Claim.test(text=text, criterion=criterion, effect=effect, preconditions=preconditions)


def claims(real: dict[str, Any] | None) -> list[Claim]:
    """Claims (a)-(c) on real traces from :func:`real_traces`' dict (``None``: no trace file,
    every claim inconclusive, not measured, its control :data:`DATA_CONTROL` failed)."""
    supplied = data_control(real)
    text_a = (
        "On real agents' traces, CE computed on a judge's labels ranks the agents as CE on the "
        "expert labels does."
    )
    text_b = (
        "On real agents' traces, evidence-conditioned calibration (CE) separates two agents "
        "that answer accuracy does not."
    )
    text_c = "On real agents' traces, the premature-answer rate separates the same pair."
    tau_name = "Kendall tau(CE on judge labels, CE on expert labels)"
    ce_name = "CE(higher) - CE(lower) of the equal-accuracy pair"
    pre_name = "premature rate(higher) - (lower) of the equal-accuracy pair"
    # the criteria in words, fixed before any run (the same with or without a trace file)
    interval = "its whole 95 % bootstrap interval over the file's (dataset, question) clusters"
    crit_a = f"{tau_name} >= 2/3 over the file's agents: {interval}"
    crit_b = (
        f"{ce_name} >= {CLAIM_B_MIN_CE_GAP} (on the file's labels; the pair: the narrowest "
        f"accuracy-difference interval; higher/lower by the point estimate): {interval}"
    )
    crit_c = f"{pre_name} >= {CLAIM_C_MIN_PREMATURE_GAP} (same pair and labels): {interval}"
    if real is None:
        return [
            Claim.untested(text=text, criterion=crit, preconditions=[supplied])
            for text, crit in ((text_a, crit_a), (text_b, crit_b), (text_c, crit_c))
        ]
    pairs = real["pairs"]
    acc = pairs["accuracy"]
    bound = None if acc is None else max(abs(acc["low"]), abs(acc["high"]))
    equal_accuracy = Precondition(
        "an equal-accuracy pair exists",
        f"the agent pair with the narrowest accuracy-difference interval has |accuracy "
        f"difference| <= {ACCURACY_MARGIN}: its whole 95 % cluster-bootstrap interval",
        {
            "pair": list(pairs["pair"]),
            "accuracy_difference": None
            if acc is None
            else [round(acc["low"], 4), round(acc["high"], 4)],
        },
        bound is not None and bound <= ACCURACY_MARGIN,
    )
    pair_text = f" ({' vs '.join(pairs['pair'])})" if pairs["pair"] else ""
    return [
        _claim(
            text_a,
            crit_a,
            official_effect(real["tau"]),
            [
                supplied,
                judge_control([real["kappa_evidence"]], "the trace file"),
                Precondition(
                    "CE defined for the agents",
                    "CE finite for at least 3 agents on both the judge's and the expert labels",
                    {"agents": real["agents_defined"]},
                    real["agents_defined"] >= 3 and real["tau"] is not None,
                ),
            ],
        ),
        _claim(
            text_b + pair_text,
            crit_b,
            interval_effect(pairs["ce"], ce_name, CLAIM_B_MIN_CE_GAP),
            [
                supplied,
                equal_accuracy,
                Precondition(
                    "CE defined for the pair",
                    "CE and its interval finite for both agents of the pair",
                    {"ce": None if pairs["ce"] is None else pairs["ce"]["estimate"]},
                    pairs["ce"] is not None,
                ),
            ],
        ),
        _claim(
            text_c + pair_text,
            crit_c,
            interval_effect(pairs["premature_rate"], pre_name, CLAIM_C_MIN_PREMATURE_GAP),
            [
                supplied,
                equal_accuracy,
                Precondition(
                    "premature rate defined for the pair",
                    "the premature rate and its interval finite for both agents of the pair",
                    {
                        "premature_rate": None
                        if pairs["premature_rate"] is None
                        else pairs["premature_rate"]["estimate"]
                    },
                    pairs["premature_rate"] is not None,
                ),
            ],
        ),
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


def _plot(out_dir: Path, analyses: list[dict[str, Any]], agents: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for name in agents:
        km = analyses[0]["recovery_km"].get(name)
        if km:
            axes[0].step(km["times"], km["survival"], where="post", label=name)
    axes[0].set(
        xlabel="steps since a low-quality result",
        ylabel="P(not yet recovered)",
        title="Kaplan-Meier time to recovery (seed 0)",
    )
    axes[0].legend(fontsize=7)
    for ax, key in ((axes[1], "ce"), (axes[2], "accuracy")):
        means = [np.mean([a["agents"][n][key] for a in analyses]) for n in agents]
        lo = [analyses[0]["agents"][n][f"{key}_ci"][0] for n in agents]
        hi = [analyses[0]["agents"][n][f"{key}_ci"][1] for n in agents]
        ax.bar(agents, means, color="#8da0cb")
        ax.errorbar(
            agents,
            means,
            yerr=[np.subtract(means, lo).clip(0), np.subtract(hi, means).clip(0)],
            fmt="none",
            ecolor="k",
        )
        ax.set(title=f"{key} (seed mean; seed-0 95% CI)", ylabel=key)
        ax.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    fig.savefig(out_dir / "seekbench_metrics.png", dpi=100)
    plt.close(fig)


def _num(x: float | None) -> str:
    return "undefined" if x is None else f"{x:.3f}"


def _fmt_kappas(kappa: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v['kappa']:.2f}" for k, v in kappa.items())


def _agent_table(mean: dict[str, dict[str, float]], gold: dict[str, dict[str, float]]) -> str:
    rows = [
        "| agent | accuracy | CE | premature | RQI (gold) | recovery |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, m in mean.items():
        rows.append(
            f"| {name} | {m['accuracy']:.3f} | {m['ce']:.3f} | {m['premature_rate']:.3f} | "
            f"{m['rqi']:.2f} ({gold[name]['rqi']:.2f}) | {m['recovery_rate']:.2f} |"
        )
    return "\n".join(rows)


def _real_text(real: dict[str, Any]) -> str:
    pairs = real["pairs"]
    acc = pairs["accuracy"]
    pair = (
        f"narrowest accuracy-difference interval: {' vs '.join(pairs['pair'])} "
        f"{acc['estimate']:+.3f} [{acc['low']:+.3f}, {acc['high']:+.3f}] (control: within "
        f"±{ACCURACY_MARGIN})"
        if acc is not None
        else "no agent pair with an accuracy-difference interval"
    )
    judge = real.get("judge", "rule judge")
    return (
        f"Real traces: {judge} kappa_E {real['kappa_evidence']:.2f} vs the file's labels "
        f"(all {real.get('evidence', {}).get('n', '?')} expert-labelled result steps)"
        + _lm_real_text(real.get("lm_judge_smollm2") or {})
        + f"; CE per agent ({'judged copy' if judge != 'rule judge' else judge} / expert): "
        + ", ".join(
            f"{a} {_num(j)}/{_num(g)}"
            for a, j, g in zip(real["agents"], real["ce_judge"], real["ce_expert"], strict=True)
        )
        + f"; {pair}."
    )


def _lm_real_text(lm: dict[str, Any]) -> str:
    """The SmolLM2 judge against the experts (:func:`lm_real`), for the report."""
    if not lm:
        return ""
    e = lm["evidence"]
    kappa = e.get("kappa")
    verdict = (
        "passes the judge control (>= "
        f"{MIN_EVIDENCE_KAPPA}): claim (a) on its labels would be decidable (labelling all "
        f"{lm['labelled_result_steps']} result steps: ~{lm['labelled_result_steps'] * lm['s_per_call'] / 60:.0f} min)"
        if lm["passes_control"]
        else f"fails the judge control (>= {MIN_EVIDENCE_KAPPA}), so claim (a) would not be "
        "decidable on its labels either"
    )
    return (
        f"; SmolLM2 judge on a random sample of {e.get('n', 0)} of them (seed {lm['seed']}): "
        f"kappa_E {'undefined' if kappa is None else f'{kappa:.2f}'} (Sufficient & Clear: "
        f"judge {e.get('share_e2_judge', float('nan')):.0%}, experts "
        f"{e.get('share_e2_gold', float('nan')):.0%}), "
        + _fmt_kappas(lm["kappa"])
        + f", {lm['s_per_call']:.1f} s per step; it {verdict}"
    )


def _details(
    checks: list[Check],
    cfg: dict[str, Any],
    n_agents: int,
    table: str,
    real: dict[str, Any] | None,
) -> str:
    lines = [f"### {PIPELINE_TITLE}", ""]
    lines += [
        f"{n_agents} synthetic agents x {cfg['n_questions']} questions x {len(cfg['seeds'])} "
        "seeds; metrics on rule-judge labels; each check a t-interval over the seeds against "
        "the claims' thresholds. The outcome is designed into the testbed (the agents' answer "
        "probabilities set the calibration order, equal accuracy of the pair is built in, and "
        "the rule judge reads the templated results exactly), so a failure here is a defect of "
        "our judge or metrics, and a pass says nothing about the paper. They never enter the "
        "verdict.",
        "",
        *(c.line() for c in checks),
        "",
        "Seed means on rule-judge labels (RQI on gold labels in brackets: the rule judge writes "
        "no anchor_type):",
        "",
        table,
        "",
        "### The claims",
        "",
    ]
    if real is None:
        lines.append(
            f"The claims are about real agents' traces and run only on a trace file: {HOW_TO_RUN}. "
            f"With {DATA_ENV} unset, each is inconclusive (control failed: {DATA_CONTROL}), "
            "not measured."
        )
    else:
        lines.append(
            f"On {real['path']} (sha256 {real['sha256']}, {real['traces']} traces). "
            + _real_text(real)
        )
        lines += [
            "",
            "| pair | accuracy difference [95 % interval] |",
            "|---|---|",
            *(
                f"| {' vs '.join(row['pair'])} | "
                + (
                    "undefined"
                    if row["accuracy"] is None
                    else f"{row['accuracy']['estimate']:+.3f} [{row['accuracy']['low']:+.3f}, "
                    f"{row['accuracy']['high']:+.3f}]"
                )
                + " |"
                for row in real["pairs"]["accuracy_by_pair"]
            ),
            "",
            *_judge_table(real),
        ]
    return "\n".join(lines)


def _judge_table(real: dict[str, Any]) -> list[str]:
    """The per-agent metrics on the judge's labels (expert labels in brackets) and the judge's
    κ per field against the experts."""
    judge, expert = real.get("metrics_judge_labels"), real.get("metrics_expert_labels")
    if not judge or not expert:
        return []
    names = ("accuracy", "ce", "premature_rate", "overcautious_rate")
    names = tuple(n for n in names if n in next(iter(judge.values())))
    rows = [
        f"Per-agent metrics on the labels of the {real.get('judge', 'rule judge')} (on the "
        "expert labels in brackets); its kappa per field vs the experts: "
        + (_fmt_kappas(real["kappa"]) or "none")
        + ".",
        "",
        "| agent | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for agent, row in judge.items():
        cells = [f"{_num(row[n])} ({_num(expert[agent][n])})" for n in names]
        rows.append(f"| {agent} | " + " | ".join(cells) + " |")
    return rows


def _finite(x: float) -> float | None:
    """``x`` where finite, else None (undefined: JSON null, "undefined" in the report)."""
    return float(x) if np.isfinite(x) else None


def run(quick: bool, out_dir: Path) -> Result:
    from llm_methods.lm.threads import one_thread
    from llm_methods.seekbench.data import read_traces
    from llm_methods.seekbench.judge import RuleJudge, agreement, annotate, evidence_agreement
    from llm_methods.seekbench.metrics import METRICS, analyze, paired_difference
    from llm_methods.seekbench.synth import CALIBRATION_CHAIN, PROFILES, synth_traces

    cfg = settings(quick)
    data_path = official_data()  # a bad SEEKBENCH_DATA or SEEKBENCH_JUDGED: before any work
    judged_file = judged_copy(read_traces(data_path) if data_path is not None else None)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rule = RuleJudge()
    smollm2 = functools.cache(_smollm2_judge)  # loaded once, for the proxy and the real sample
    with one_thread():
        agents = list(PROFILES)
        analyses, gold_analyses, n_traces, t_analyze = [], [], 0, 0.0
        per_seed: dict[str, list[float]] = {
            k: []
            for k in (
                "tau_ce",
                "ce_gap",
                "premature_gap",
                "accuracy_gap",
                "kappa_evidence",
                "kappa_information_quality",
            )
        }
        diffs: dict[str, list[tuple[float, float, float]]] = {}
        rule_kappas, rule_evidence = [], []
        for seed in cfg["seeds"]:
            seed_everything(seed)
            traces = synth_traces(cfg["n_questions"], agents, seed=seed)
            judged = annotate(traces, rule)
            kappa = agreement(traces, judged)
            evidence = evidence_agreement(traces, judged)
            rule_kappas.append(kappa)
            rule_evidence.append(evidence)
            start = time.perf_counter()
            result = analyze(judged, n_boot=cfg["n_boot"], seed=seed)
            t_analyze += time.perf_counter() - start
            analyses.append(result)
            gold_analyses.append(analyze(traces, n_boot=0, seed=seed, km=False))
            n_traces += len(traces)
            seed_diff = {
                m: paired_difference(judged, *reversed(PAIR), m, n_boot=cfg["n_boot"], seed=seed)
                for m in ("accuracy", "ce", "premature_rate")
            }
            for m, d in seed_diff.items():
                diffs.setdefault(m, []).append(d)
            row = result["agents"]
            per_seed["tau_ce"].append(_kendall([row[n]["ce"] for n in CALIBRATION_CHAIN]))
            per_seed["ce_gap"].append(seed_diff["ce"][0])
            per_seed["premature_gap"].append(seed_diff["premature_rate"][0])
            per_seed["accuracy_gap"].append(seed_diff["accuracy"][0])
            per_seed["kappa_evidence"].append(evidence["kappa"])
            per_seed["kappa_information_quality"].append(kappa["information_quality"]["kappa"])
            if seed == cfg["seeds"][0]:
                lm_judge = _lm_judge(traces, cfg, seed, smollm2)
        mean = {
            n: {k: float(np.mean([a["agents"][n][k] for a in analyses])) for k in METRICS}
            for n in agents
        }
        gold_mean = {
            n: {k: float(np.mean([a["agents"][n][k] for a in gold_analyses])) for k in METRICS}
            for n in agents
        }
        _plot(out_dir, analyses, agents)
        real = (
            real_traces(data_path, cfg["n_boot"], judged_file=judged_file)
            if data_path is not None
            else None
        )
        lm_expert = (
            lm_real(read_traces(data_path), cfg.get("lm_real", 0), smollm2)
            if data_path is not None
            else {}
        )
        if real is not None:
            real["lm_judge_smollm2"] = lm_expert
    judged_claims = claims(real)
    checks = proxy_checks(per_seed)
    data = (
        f"no real traces ({DATA_ENV} unset): the claims need them; pipeline checks on the {PROXY}"
        if real is None
        else f"claims on the real traces {real['path']} (sha256 {real['sha256']}, "
        f"{real['traces']} traces, {len(real['agents'])} agents); pipeline checks on the {PROXY}"
    )
    metrics: dict[str, Any] = {
        "data": data,
        "data_env": (f"{DATA_ENV}={data_path}" if data_path is not None else f"{DATA_ENV} unset")
        + (f"; {JUDGED_ENV}={judged_file[0]}" if judged_file is not None else ""),
        "pipeline_checks": [c.to_dict() for c in checks],
        "labels": "proxy: rule judge (checks); gold labels only for kappa and the gold column",
        "per_seed_judge_labels": per_seed,
        "traces_per_s_analyze": n_traces / max(t_analyze, 1e-9),
        "per_agent_seed_mean_judge_labels": mean,
        "per_agent_seed_mean_gold_labels": gold_mean,
        "pair_differences_judge_labels": {m: [list(d) for d in v] for m, v in diffs.items()},
        "judge_kappa": {"rule": rule_kappas[0], "rule_evidence": rule_evidence[0]},
        "rule_judge_kappa_by_seed": rule_kappas,
        "rule_judge_evidence_by_seed": rule_evidence,
        "lm_judge_smollm2": lm_judge,
        "rqi_source": analyses[0]["rqi_source"],
        "notes": analyses[0]["notes"],
    }
    if real is not None:
        metrics["official"] = real
    lm_text = ""
    if lm_judge:
        lm_e = lm_judge["evidence"]
        lm_text = (
            f" SmolLM2 judge ({lm_judge['steps']} sampled proxy steps of seed "
            f"{cfg['seeds'][0]}): kappa_E {lm_e.get('kappa', float('nan')):.2f} on "
            f"{lm_e.get('n', 0)} result steps ({'passes' if lm_judge['passes_control'] else 'fails'}"
            " the judge control); "
            + _fmt_kappas(lm_judge["kappa"])
            + f"; {lm_judge['s_per_call']:.1f} s per step, so its labels are not used."
        )
    if real is None:
        claims_text = (
            f"Claims (a)-(c) are about real agents' traces: inconclusive (control failed: "
            f"{DATA_CONTROL}), {NO_DATA}; to test them run {HOW_TO_RUN}."
        )
    else:
        claims_text = (
            " ".join(
                f"({k}) {c.verdict}"
                + (f" ({c.reason})" if c.verdict == "inconclusive" else "")
                + (
                    f": {effect_text(c.effect, bool(c.failed_preconditions))}."
                    if c.effect is not None
                    else ": not measured."
                )
                for k, c in zip("abc", judged_claims, strict=True)
            )
            + " "
            + _real_text(real)
        )
    summary = (
        f"Data: {data}. "
        + claims_text
        + f" {PIPELINE_TITLE}: "
        + "; ".join(f"{c.name}: {c.outcome}" for c in checks)
        + f" (see Details). Rule judge vs gold on the proxy (seed {cfg['seeds'][0]}): kappa_E "
        f"{rule_evidence[0]['kappa']:.2f} (min over seeds {min(per_seed['kappa_evidence']):.2f}), "
        + _fmt_kappas(rule_kappas[0])
        + "."
        + lm_text
    )
    return Result(
        summary=summary,
        metrics=metrics,
        seeds=list(cfg["seeds"]),
        scale=(
            f"claims: {real['traces']} real traces, {cfg['n_boot']} cluster-bootstrap resamples"
            if real is not None
            else f"claims: no trace file ({DATA_ENV} unset)"
        )
        + f"; pipeline checks: {len(agents)} synthetic agents x {cfg['n_questions']} questions "
        f"x {len(cfg['seeds'])} seeds, SmolLM2 judge on {cfg['lm_results']} result + "
        f"{cfg['lm_other']} other steps"
        + (
            f"; SmolLM2 judge on {cfg.get('lm_real', 0)} expert-labelled result steps of the "
            "trace file"
            if real is not None and cfg.get("lm_real", 0) > 0
            else ""
        ),
        claims=judged_claims,
        details=_details(checks, cfg, len(agents), _agent_table(mean, gold_mean), real),
        plots=["seekbench_metrics.png"],
    )


EXPERIMENT = Experiment(
    name="llm-methods.seekbench",
    paper=PAPER,
    claim=(
        "On real search agents' traces, process-level metrics (evidence-conditioned "
        "calibration, premature answers) separate agents that answer accuracy cannot, and CE "
        "on a judge's labels ranks agents as on expert labels. Tested only on a trace file the "
        f"user supplies ({DATA_ENV}); the synthetic proxy gives pipeline checks, not verdicts."
    ),
    run=run,
)
