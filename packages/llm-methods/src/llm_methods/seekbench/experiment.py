"""Miniature SeekBench experiment ``llm-methods.seekbench``.

Synthetic search agents with known behaviour (``synth.PROFILES``) answer the same questions;
the SeekBench metrics are computed per agent with cluster-bootstrap CIs, and two judges (the
rule judge and SmolLM2 through the core) re-annotate traces whose gold labels are known.

Claims and thresholds, fixed here before any run:

  (a) the calibration error CE ranks the agents of the designed calibration chain
      (calibrated < hasty < premature < reckless: strictly more answering at E < 2) in their
      true order: Kendall τ between seed-mean CE and the chain order >= CLAIM_A_MIN_TAU;
  (b) answer accuracy alone does not separate ``calibrated`` from ``premature`` (designed with
      equal population accuracy) while the process metrics do: in at least CLAIM_B_MIN_SHARE of
      the seeds, the 95 % paired cluster-bootstrap CI of the accuracy difference contains 0 and
      the CIs of the CE and premature-answer-rate differences exclude 0.

Judge agreement (Cohen's κ per field vs the synthetic gold labels) is reported, not a claim.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common import Claim, Experiment, Result, seed_everything

__all__ = ["EXPERIMENT", "run", "settings"]

PAPER = (
    "SeekBench: Beyond Correctness, Evaluating LLM Search Agents' Epistemic Competence "
    "(arXiv 2509.22391)"
)
CLAIM_A_MIN_TAU = 1.0
CLAIM_B_MIN_SHARE = 0.6
PAIR = ("calibrated", "premature")


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"n_questions": 80, "seeds": (0, 1, 2), "n_boot": 300, "lm_steps": 6}
    return {"n_questions": 200, "seeds": (0, 1, 2, 3, 4), "n_boot": 1000, "lm_steps": 40}


def _kendall(values: list[float]) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau(values, list(range(len(values)))).statistic)


def _judge_kappas(traces: list[dict[str, Any]], lm_steps: int, seed: int) -> dict[str, Any]:
    from llm_methods.seekbench.judge import LMJudge, RuleJudge, agreement, annotate

    rule = RuleJudge()
    out: dict[str, Any] = {"rule": agreement(traces, annotate(traces, rule))}
    if lm_steps <= 0:
        return out
    from iclr26_common.device import choose_device
    from llm_methods.lm import load_lm

    order = np.random.default_rng(seed).permutation(len(traces))
    sample = [traces[i] for i in order[: max(1, lm_steps // 4)]]
    lm = load_lm("smollm2", choose_device(), "float32")
    judge = LMJudge(lm)
    start = time.perf_counter()
    judged = annotate(sample, judge, max_steps=lm_steps)
    out["smollm2"] = agreement(sample, judged)
    out["smollm2_s_per_call"] = (time.perf_counter() - start) / max(judge.calls, 1)
    out["smollm2_calls"] = judge.calls
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


def run(quick: bool, out_dir: Path) -> Result:
    from llm_methods.lm.threads import one_thread
    from llm_methods.seekbench.metrics import METRICS, analyze, paired_difference
    from llm_methods.seekbench.synth import CALIBRATION_CHAIN, PROFILES, synth_traces

    cfg = settings(quick)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with one_thread():
        agents = list(PROFILES)
        analyses, pair_ok, n_traces, t_analyze = [], [], 0, 0.0
        diffs: dict[str, list[tuple[float, float, float]]] = {}
        for seed in cfg["seeds"]:
            seed_everything(seed)
            traces = synth_traces(cfg["n_questions"], agents, seed=seed)
            start = time.perf_counter()
            analyses.append(analyze(traces, n_boot=cfg["n_boot"], seed=seed))
            t_analyze += time.perf_counter() - start
            n_traces += len(traces)
            seed_diff = {
                m: paired_difference(traces, *PAIR, m, n_boot=cfg["n_boot"], seed=seed)
                for m in ("accuracy", "ce", "premature_rate")
            }
            for m, d in seed_diff.items():
                diffs.setdefault(m, []).append(d)
            acc_lo, acc_hi = seed_diff["accuracy"][1:]
            pair_ok.append(
                acc_lo <= 0.0 <= acc_hi
                and all(not (d[1] <= 0.0 <= d[2]) for m, d in seed_diff.items() if m != "accuracy")
            )
            if seed == cfg["seeds"][0]:
                kappas = _judge_kappas(traces, cfg["lm_steps"], seed)
        mean = {
            n: {k: float(np.mean([a["agents"][n][k] for a in analyses])) for k in METRICS}
            for n in agents
        }
        _plot(out_dir, analyses, agents)
    tau_ce = _kendall([mean[n]["ce"] for n in CALIBRATION_CHAIN])
    tau_cce = _kendall([mean[n]["cce"] for n in CALIBRATION_CHAIN])
    share = float(np.mean(pair_ok))
    metrics: dict[str, Any] = {
        "kendall_tau_ce_chain": tau_ce,
        "kendall_tau_cce_chain": tau_cce,
        "pair_seed_share": share,
        "traces_per_s_analyze": n_traces / max(t_analyze, 1e-9),
        "per_agent_seed_mean": mean,
        "pair_differences": {m: [list(d) for d in v] for m, v in diffs.items()},
        "judge_kappa": kappas,
        "rqi_source": analyses[0]["rqi_source"],
        "notes": analyses[0]["notes"],
    }
    acc_gap = float(np.mean([d[0] for d in diffs["accuracy"]]))
    ce_gap = float(np.mean([d[0] for d in diffs["ce"]]))
    claims = [
        Claim(
            text="The calibration metrics rank the agents in their true calibration order.",
            criterion=f"Kendall tau(seed-mean CE, designed order calibrated<hasty<premature"
            f"<reckless) >= {CLAIM_A_MIN_TAU}",
            measured={
                "kendall_tau_ce": tau_ce,
                "kendall_tau_cce": tau_cce,
                **{f"ce_{n}": mean[n]["ce"] for n in CALIBRATION_CHAIN},
            },
            verdict=tau_ce >= CLAIM_A_MIN_TAU,
        ),
        Claim(
            text="Answer accuracy alone does not separate agents that the process metrics "
            "separate (calibrated vs premature).",
            criterion=f"share of seeds with accuracy-difference 95% CI containing 0 and CE and "
            f"premature-rate difference CIs excluding 0 >= {CLAIM_B_MIN_SHARE}",
            measured={"seed_share": share, "accuracy_diff_mean": acc_gap, "ce_diff_mean": ce_gap},
            verdict=share >= CLAIM_B_MIN_SHARE,
        ),
    ]
    rule_k = kappas["rule"]
    summary = (
        f"{len(agents)} synthetic agents x {cfg['n_questions']} questions x "
        f"{len(cfg['seeds'])} seeds. CE order tau={tau_ce:.2f}; calibrated vs premature: "
        f"accuracy diff {acc_gap:+.3f}, CE diff {ce_gap:+.3f} (CIs in metrics). Rule-judge "
        f"kappa: "
        + ", ".join(f"{k} {v['kappa']:.2f}" for k, v in rule_k.items())
        + (
            "; SmolLM2 judge kappa: "
            + ", ".join(f"{k} {v['kappa']:.2f}" for k, v in kappas["smollm2"].items())
            if "smollm2" in kappas
            else ""
        )
    )
    return Result(
        summary=summary,
        metrics=metrics,
        seeds=list(cfg["seeds"]),
        scale=f"{cfg['n_questions']} questions per agent, {len(agents)} agents, "
        f"{cfg['n_boot']} bootstrap resamples, SmolLM2 judge on {cfg['lm_steps']} steps",
        claims=claims,
    )


EXPERIMENT = Experiment(
    name="llm-methods.seekbench",
    paper=PAPER,
    claim=(
        "Process-level metrics of search agents (evidence-conditioned calibration, grounded "
        "reasoning, recovery) separate agents that answer accuracy cannot, and rank them by "
        "their calibration."
    ),
    run=run,
)
