"""``llm-methods seekbench analyze|judge|synth``: SeekBench process metrics of search agents."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from iclr26_common.device import add_device_option
from iclr26_common.progress import add_quiet_option

ABOUT = "SeekBench process-level evaluation of LLM search agents (arXiv 2509.22391)"
PROG = "llm-methods seekbench"


def _parser():  # type: ignore[no-untyped-def]
    from llm_methods.method_cli import ArgumentParser, out_args, seed, show_defaults

    parser = ArgumentParser(prog=PROG, description=ABOUT)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    an = sub.add_parser(
        "analyze",
        help="per-agent metrics with cluster-bootstrap CIs",
        description="Per-agent (model) SeekBench metrics of labelled traces, each with a 95 % "
        "interval over the questions (BCa bootstrap of the clusters, --n-boot resamples, seed "
        "--seed); writes metrics.json (intervals: Interval.to_dict() per agent and metric) and "
        "per_agent.csv (<metric>_low/_high/_ci_method/_n) into --out. The traces must be "
        "judged (labelled, or annotated by `judge`): refused when no result step carries "
        "information_quality, a warning when only some do.",
    )
    an.add_argument("traces", type=Path, help="SeekBench .jsonl (e.g. seekbench_data.jsonl)")
    out_args(an, "output folder (metrics.json, per_agent.csv)", required=True)
    an.add_argument(
        "--threshold",
        type=int,
        default=2,
        choices=(1, 2),
        help="answer policy: should answer iff E >= threshold (default 2)",
    )
    an.add_argument(
        "--horizon",
        type=int,
        default=None,
        help="steps counted for the premature / over-cautious rates only "
        "(default: the whole trace; the official CLI uses 15)",
    )
    an.add_argument(
        "--group-by",
        choices=("model", "category"),
        default="model",
        help="per agent, or per category as the paper's tables (Base / Few-shot / RL Agents / ...)",
    )
    an.add_argument(
        "--n-boot",
        type=int,
        default=1000,
        help="bootstrap resamples of the CIs and the 95 %% intervals (0: neither)",
    )
    an.add_argument("--seed", type=seed, default=0, help="resampling seed (recorded)")
    an.add_argument(
        "--reference",
        default=None,
        metavar="AGENT",
        help="also give each agent's (or category's) paired difference to this one, metric by "
        "metric, with a 95 %% interval over the questions both answered",
    )
    an.add_argument(
        "--expert",
        type=Path,
        default=None,
        metavar="EXPERT_FILE",
        help="the expert-labelled traces these traces are a judged copy of (`judge EXPERT_FILE "
        "--out TRACES`): also print Kendall tau of the agents' CE on these labels vs on the "
        "expert labels (claim (a) of the experiment) with a 95 %% interval over the questions, "
        "and the judge's kappa of the evidence level and per field; into metrics.json's "
        "expert_comparison",
    )
    ju = sub.add_parser(
        "judge",
        help="annotate traces with an LLM or rule judge",
        description="Annotate every reasoning step, tool call and tool result; prints "
        "Cohen's kappa per field and of the evidence level when the input carries labels.",
    )
    ju.add_argument("traces", type=Path, help="SeekBench .jsonl to annotate")
    out_args(
        ju,
        "output file: the annotated .jsonl",
        required=True,
        overwrite="replace an existing --out",
    )
    add_quiet_option(ju, also="used by the lm / http judges")
    ju.add_argument(
        "--judge", choices=("rule", "lm", "http"), default="rule", help="which judge labels"
    )
    ju.add_argument("--model", default="smollm2", help="lm: model spec; http: model name")
    add_device_option(ju, also="used by the lm judge")
    ju.add_argument("--url", default=None, help="http: OpenAI-compatible base URL (.../v1)")
    ju.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="http: environment variable holding the key (must be set; '' for a server "
        "without a key)",
    )
    ju.add_argument("--cache-dir", type=Path, default=None, help="judge reply cache")
    ju.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="judge at most this many steps (the output is then partly judged)",
    )
    sy = sub.add_parser("synth", help="synthetic traces from agent profiles (known behaviour)")
    out_args(
        sy, "output file: the traces .jsonl", required=True, overwrite="replace an existing --out"
    )
    sy.add_argument("--questions", type=int, default=100, help="questions per agent")
    sy.add_argument("--agents", nargs="*", default=None, help="profiles (default: all)")
    sy.add_argument("--seed", type=seed, default=0, help="random seed")
    sy.add_argument("--unlabelled", action="store_true", help="drop the gold annotations")
    return show_defaults(parser)


def _judged_or_refuse(path: Path, traces: list) -> dict[str, int]:
    """``{"judged", "total"}`` result steps of ``traces`` (read from ``path``); refused when no
    result step is judged (every metric would read E = 0: premature rate 1, CE NaN), a warning
    on stderr when only some are."""
    from iclr26_common.cli_support import UsageError
    from llm_methods.seekbench.data import result_annotation_coverage

    judged, total = result_annotation_coverage(traces)
    coverage = {"judged": judged, "total": total}
    if judged == 0:
        raise UsageError(
            f"{path}: no result step carries information_quality (0 of {total} result steps "
            f"judged): run `{PROG} judge` on it first and analyze its --out"
        )
    if judged < total:
        print(f"{PROG} analyze: warning: {path}: {_partial_note(coverage)}", file=sys.stderr)
    return coverage


def _partial_note(coverage: dict[str, int]) -> str:
    judged, total = coverage["judged"], coverage["total"]
    return (
        f"only {judged} of {total} result steps ({judged / total:.1%}) carry "
        "information_quality; the others count as insufficient evidence (E = 0)"
    )


def _analyze(ns) -> int:  # type: ignore[no-untyped-def]
    import pandas as pd

    from iclr26_common.outputs import check_out_folder, write_text
    from llm_methods.seekbench.data import read_traces
    from llm_methods.seekbench.metrics import METRICS, analyze, metric_intervals

    if ns.n_boot < 0:
        raise ValueError("--n-boot must be >= 0")
    if ns.horizon is not None and ns.horizon < 1:
        raise ValueError("--horizon must be >= 1")
    if ns.reference is not None and ns.n_boot == 0:
        raise ValueError("--reference needs resamples (--n-boot > 0)")
    if ns.expert is not None and ns.n_boot == 0:
        raise ValueError("--expert needs resamples (--n-boot > 0)")
    out = check_out_folder(ns.out, overwrite=ns.overwrite)  # before the traces are analysed
    traces = read_traces(ns.traces)
    coverage = _judged_or_refuse(ns.traces, traces)
    expert = _expert_or_refuse(ns.expert, ns.traces, traces)
    result = analyze(traces, ns.threshold, ns.horizon, ns.n_boot, ns.seed, ns.group_by)
    result["judged_result_steps"] = coverage
    if coverage["judged"] < coverage["total"]:
        result["notes"].append(_partial_note(coverage))
    intervals = (
        metric_intervals(
            traces,
            ns.threshold,
            ns.horizon,
            ns.group_by,
            ns.seed,
            ns.n_boot,
            ns.reference,
        )
        if ns.n_boot
        else {}
    )
    result["intervals"] = (
        _intervals_json(result["agents"], intervals, ns.seed) if intervals else None
    )
    if expert is not None:
        result["expert_comparison"] = _expert_comparison(ns.expert, expert, traces, ns)
    table = pd.DataFrame(result["agents"]).T
    table.index.name = ns.group_by
    if intervals:
        extra = pd.DataFrame({g: _interval_row(row, ns.seed) for g, row in intervals.items()}).T
        table = table.join(extra)
    with out:
        write_text(out.path / "metrics.json", json.dumps(result, indent=1))
        write_text(out.path / "per_agent.csv", table.to_csv())
    print(table[["n_traces", *METRICS]].to_string(float_format=lambda x: f"{x:.3f}"))
    if intervals:
        _print_intervals(result["agents"], intervals, ns.seed)
    if expert is not None:
        print(result["expert_comparison"]["line"])
    for note in result["notes"]:
        print(f"note: {note}")
    print(f"wrote {ns.out / 'metrics.json'} and {ns.out / 'per_agent.csv'}")
    return 0


UNITS = "questions"
MISSING = "no interval: under 10 questions, or undefined on a resample"


def _expert_or_refuse(path: Path | None, traces_path: Path, traces: list) -> list | None:
    """The ``--expert`` file's traces, refused (one line) unless it carries expert labels and
    ``traces`` is a fully judged copy of it (:func:`~llm_methods.seekbench.judged.
    check_judged_copy`)."""
    from iclr26_common.cli_support import UsageError
    from llm_methods.seekbench.data import read_traces, result_annotation_coverage
    from llm_methods.seekbench.judged import JudgedFileError, check_judged_copy

    if path is None:
        return None
    expert = read_traces(path)
    if result_annotation_coverage(expert)[0] == 0:
        raise UsageError(f"--expert {path}: no result step carries information_quality (no labels)")
    try:
        check_judged_copy(
            expert,
            traces,
            str(traces_path),
            f"--expert {path}",
            f"write it with `{PROG} judge {path} --out FILE` and analyze FILE",
        )
    except JudgedFileError as error:
        raise UsageError(str(error)) from None
    return expert


def _expert_comparison(path: Path, expert: list, traces: list, ns) -> dict:  # type: ignore[no-untyped-def]
    """Claim (a)'s quantity on these traces: Kendall τ of the agents' CE on their labels vs on
    the ``--expert`` labels with its 95 % interval over the (dataset, question) clusters, κ_E
    and κ per field (the judge vs the experts), and the printed line."""
    from llm_methods.seekbench.experiment import MIN_EVIDENCE_KAPPA, official_tau
    from llm_methods.seekbench.judge import agreement, evidence_agreement

    tau = official_tau(expert, traces, ns.n_boot, ns.seed)
    evidence = evidence_agreement(expert, traces)
    interval = tau["tau"]
    text = (
        "undefined (CE finite for fewer than 3 agents on both labels, or under 10 questions)"
        if interval is None
        else f"{interval['estimate']:.3f} [{interval['low']:.3f}, {interval['high']:.3f}] "
        f"({interval['method']}, n={interval['n']} questions, resampling seed {ns.seed})"
    )
    kappa = evidence.get("kappa")
    line = (
        f"vs the expert labels of {path}: Kendall tau(CE on these labels, CE on the expert "
        f"labels) over {tau['agents_defined']} agents {text}; kappa_E "
        + ("undefined" if kappa is None else f"{kappa:.3f}")
        + f" (n={evidence['n']} result steps; the paper's judge-expert bar {MIN_EVIDENCE_KAPPA})"
    )
    return {
        "expert_file": str(path),
        **tau,
        "evidence": evidence,
        "kappa": agreement(expert, traces),
        "line": line,
    }


def _intervals_json(agents: dict, intervals: dict, seed: int) -> dict:
    """metrics.json's ``intervals``: {group: {n, metrics: {metric: Interval.to_dict()},
    reference, n_shared, differences: {metric: ...}}} and the resampling seed."""
    from iclr26_common.effects import interval_dict

    groups = {}
    for group, row in intervals.items():
        groups[group] = {
            "n": row["n"],
            "metrics": {
                m: interval_dict(i, row["n"], UNITS, agents[group][m])
                for m, i in row["intervals"].items()
            },
            "reference": row["reference"],
            "n_shared": row["n_shared"],
            "differences": {
                m: interval_dict(i, row["n_shared"] or 0, UNITS)
                for m, i in row["differences"].items()
            },
        }
    return {"confidence": 0.95, "units": UNITS, "resample_seed": seed, "groups": groups}


def _interval_row(row: dict, seed: int) -> dict:
    """per_agent.csv's interval columns of one group (after the existing ones)."""
    from iclr26_common.effects import interval_columns

    out: dict = {}
    for metric, interval in row["intervals"].items():
        out.update(interval_columns(metric, interval, row["n"]))
    if row["reference"] is not None:
        out["reference"] = row["reference"]
        for metric, interval in row["differences"].items():
            out[f"{metric}_diff"] = "" if interval is None else interval.estimate
            out.update(interval_columns(f"{metric}_diff", interval, row["n_shared"] or 0))
    out["resample_seed"] = seed
    return out


def _print_intervals(agents: dict, intervals: dict, seed: int) -> None:
    from iclr26_common.effects import interval_text
    from llm_methods.seekbench.metrics import METRICS

    print(f"95 % intervals over the questions (BCa bootstrap, resampling seed {seed}):")
    width = max(len(m) for m in METRICS)
    for group, row in intervals.items():
        reference = row["reference"]
        shared = f", {row['n_shared']} shared with {reference}" if row["n_shared"] else ""
        print(f"{group} ({row['n']} {UNITS}{shared})")
        for metric in METRICS:
            interval = row["intervals"][metric]
            line = f"  {metric:{width}s} {agents[group][metric]:.3f} " + interval_text(
                interval, row["n"], UNITS, missing=MISSING
            )
            if metric in row["differences"]:
                diff = row["differences"][metric]
                value = "" if diff is None else f"{diff.estimate:+.3f} "
                line += f"; vs {reference} {value}" + interval_text(
                    diff, row["n_shared"] or 0, UNITS, missing=MISSING
                )
            print(line)


def _judge(ns):  # type: ignore[no-untyped-def]
    from iclr26_common.cli_support import UsageError
    from iclr26_common.outputs import check_out_file
    from llm_methods.seekbench import judge as J
    from llm_methods.seekbench.data import read_traces, write_traces

    if ns.max_steps is not None and ns.max_steps < 1:
        raise UsageError(f"--max-steps {ns.max_steps}: must be >= 1")
    if ns.judge == "http":
        if not ns.url:
            raise ValueError("--judge http needs --url (an OpenAI-compatible base URL)")
        if ns.api_key_env and os.environ.get(ns.api_key_env) is None:
            raise UsageError(
                f"--api-key-env {ns.api_key_env}: the environment variable is not set; export "
                "it, or pass --api-key-env '' for a server that needs no key"
            )
    check_out_file(ns.out, overwrite=ns.overwrite)  # before the traces are judged
    device = None
    if ns.judge == "lm":
        from llm_methods.lm.loading import resolve_device

        device = resolve_device(ns.device)  # a bad --device: one line, before the traces
    traces = read_traces(ns.traces)
    if ns.judge == "rule":
        judge: J.Judge = J.RuleJudge()
    elif ns.judge == "lm":
        from llm_methods.lm import load_lm

        if not ns.quiet:
            print(f"seekbench judge: loading {ns.model} on {device}", file=sys.stderr, flush=True)
        judge = J.LMJudge(load_lm(ns.model, device), ns.cache_dir)
    else:
        key = os.environ.get(ns.api_key_env) if ns.api_key_env else None
        judge = J.HTTPJudge(ns.url, ns.model, key, ns.cache_dir)
    judged = J.annotate(traces, judge, ns.max_steps, quiet=ns.quiet or ns.judge == "rule")
    write_traces(judged, ns.out)
    print(
        f"{judge.calls} judge calls for {len(traces)} traces "
        f"({judge.calls / len(traces):.1f} per trace); wrote {ns.out}"
    )
    judgeable = sum(1 for t in traces for step in t["trace"] if J.step_fields(step))
    if ns.max_steps is not None and ns.max_steps < judgeable:
        print(
            f"note: {ns.out} is partly judged: {ns.max_steps} of {judgeable} judgeable steps "
            f"(--max-steps {ns.max_steps}); the others keep the input's annotations (none when "
            "it is unlabelled), and `analyze` warns with the judged fraction"
        )
    done = J.judged_steps(traces, ns.max_steps)  # the input's own labels are not the judge's
    for field, row in J.agreement(traces, judged, steps=done).items():
        print(
            f"kappa {field:20s} {row['kappa']:.3f} (agreement {row['agreement']:.3f}, n={row['n']})"
        )
    evidence = J.evidence_agreement(traces, judged, steps=done)
    if evidence["n"]:
        print(
            f"kappa {'evidence_level':20s} {evidence['kappa']:.3f} (agreement "
            f"{evidence['agreement']:.3f}, n={evidence['n']}; Sufficient & Clear: judge "
            f"{evidence['share_e2_judge']:.3f}, input {evidence['share_e2_gold']:.3f})"
        )
    return 0


def _synth(ns):  # type: ignore[no-untyped-def]
    from iclr26_common.outputs import check_out_file
    from llm_methods.seekbench.data import write_traces
    from llm_methods.seekbench.synth import synth_traces

    check_out_file(ns.out, overwrite=ns.overwrite)
    traces = synth_traces(ns.questions, ns.agents, ns.seed)
    if ns.unlabelled:
        for trace in traces:
            for step in trace["trace"]:
                step.pop("annotation", None)
    write_traces(traces, ns.out)
    print(f"wrote {len(traces)} traces to {ns.out}")
    return 0


def main(argv: Sequence[str]) -> int:
    ns = _parser().parse_args(list(argv))
    return {"analyze": _analyze, "judge": _judge, "synth": _synth}[ns.command](ns)
