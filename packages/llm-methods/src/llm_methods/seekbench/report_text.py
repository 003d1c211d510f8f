"""The SeekBench report's text and figure: the per-agent tables, the real-trace and SmolLM2
judge paragraphs, the pipeline checks and the metric plot.
:mod:`llm_methods.seekbench.experiment` calls them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from llm_methods.seekbench.design import (
    ACCURACY_MARGIN,
    DATA_CONTROL,
    DATA_ENV,
    HOW_TO_RUN,
    MIN_EVIDENCE_KAPPA,
    PIPELINE_TITLE,
)

if TYPE_CHECKING:
    from llm_methods.seekbench.experiment import Check


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
