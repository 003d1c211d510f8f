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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common import Claim, Experiment, Precondition, Result, seed_everything
from iclr26_common.effects import Effect, format_effect, t_effect, units_needed
from llm_methods.seekbench.design import (
    ACCURACY_MARGIN,
    CLAIM_A_MIN_TAU,
    CLAIM_B_MIN_CE_GAP,
    CLAIM_C_MIN_PREMATURE_GAP,
    CLUSTER_UNITS,
    DATA_CONTROL,
    DATA_ENV,
    HOW_TO_RUN,
    LM_REAL_SEED,
    MIN_EVIDENCE_KAPPA,
    NO_DATA,
    PAIR,
    PAPER,
    PIPELINE_TITLE,
    PROXY,
)
from llm_methods.seekbench.judged import JUDGED_ENV, judged_copy
from llm_methods.seekbench.real import (
    _lm_judge,
    _smollm2_judge,
    judge_sample,
    lm_real,
    lm_sample,
    official_data,
    official_tau,
    pair_differences,
    real_traces,
)
from llm_methods.seekbench.report_text import (
    _agent_table,
    _details,
    _fmt_kappas,
    _plot,
    _real_text,
)

__all__ = [
    "CLAIM_A_MIN_TAU",
    "DATA_CONTROL",
    "EXPERIMENT",
    "LM_REAL_SEED",
    "MIN_EVIDENCE_KAPPA",
    "PIPELINE_TITLE",
    "PROXY",
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
