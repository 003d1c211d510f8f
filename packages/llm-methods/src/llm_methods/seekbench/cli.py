"""``llm-methods seekbench analyze|judge|synth``: SeekBench process metrics of search agents."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

ABOUT = "SeekBench process-level evaluation of LLM search agents (arXiv 2509.22391)"
PROG = "llm-methods seekbench"
SHOWN = (
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


def _parser():  # type: ignore[no-untyped-def]
    from llm_methods.method_cli import ArgumentParser

    parser = ArgumentParser(prog=PROG, description=ABOUT)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    an = sub.add_parser(
        "analyze",
        help="per-agent metrics with cluster-bootstrap CIs",
        description="Per-agent (model) SeekBench metrics of labelled traces; "
        "writes metrics.json and per_agent.csv into --out.",
    )
    an.add_argument("traces", type=Path, help="SeekBench .jsonl (e.g. seekbench_data.jsonl)")
    an.add_argument("--out", type=Path, required=True)
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
    an.add_argument("--n-boot", type=int, default=1000)
    an.add_argument("--seed", type=int, default=0)
    ju = sub.add_parser(
        "judge",
        help="annotate traces with an LLM or rule judge",
        description="Annotate every reasoning / search / search_result step; "
        "prints Cohen's kappa per field when the input carries labels.",
    )
    ju.add_argument("traces", type=Path)
    ju.add_argument("--out", type=Path, required=True, help="annotated .jsonl to write")
    ju.add_argument("--judge", choices=("rule", "lm", "http"), default="rule")
    ju.add_argument("--model", default="smollm2", help="lm: model spec; http: model name")
    ju.add_argument("--url", default=None, help="http: OpenAI-compatible base URL (.../v1)")
    ju.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="http: environment variable holding the key"
    )
    ju.add_argument("--cache-dir", type=Path, default=None, help="judge reply cache")
    ju.add_argument("--max-steps", type=int, default=None, help="judge at most this many steps")
    sy = sub.add_parser("synth", help="synthetic traces from agent profiles (known behaviour)")
    sy.add_argument("--out", type=Path, required=True, help=".jsonl to write")
    sy.add_argument("--questions", type=int, default=100)
    sy.add_argument("--agents", nargs="*", default=None, help="profiles (default: all)")
    sy.add_argument("--seed", type=int, default=0)
    sy.add_argument("--unlabelled", action="store_true", help="drop the gold annotations")
    return parser


def _analyze(ns) -> int:  # type: ignore[no-untyped-def]
    import pandas as pd

    from llm_methods.seekbench.data import read_traces
    from llm_methods.seekbench.metrics import analyze

    if ns.n_boot < 0:
        raise ValueError("--n-boot must be >= 0")
    if ns.horizon is not None and ns.horizon < 1:
        raise ValueError("--horizon must be >= 1")
    result = analyze(
        read_traces(ns.traces), ns.threshold, ns.horizon, ns.n_boot, ns.seed, ns.group_by
    )
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "metrics.json").write_text(json.dumps(result, indent=1))
    table = pd.DataFrame(result["agents"]).T
    table.index.name = ns.group_by
    table.to_csv(ns.out / "per_agent.csv")
    print(table[["n_traces", *SHOWN]].to_string(float_format=lambda x: f"{x:.3f}"))
    for note in result["notes"]:
        print(f"note: {note}")
    print(f"wrote {ns.out / 'metrics.json'} and {ns.out / 'per_agent.csv'}")
    return 0


def _judge(ns):  # type: ignore[no-untyped-def]
    from llm_methods.seekbench import judge as J
    from llm_methods.seekbench.data import read_traces, write_traces

    traces = read_traces(ns.traces)
    if ns.judge == "rule":
        judge: J.Judge = J.RuleJudge()
    elif ns.judge == "lm":
        from llm_methods.lm import load_lm

        judge = J.LMJudge(load_lm(ns.model), ns.cache_dir)
    else:
        if not ns.url:
            raise ValueError("--judge http needs --url (an OpenAI-compatible base URL)")
        judge = J.HTTPJudge(ns.url, ns.model, os.environ.get(ns.api_key_env), ns.cache_dir)
    judged = J.annotate(traces, judge, ns.max_steps)
    write_traces(judged, ns.out)
    print(
        f"{judge.calls} judge calls for {len(traces)} traces "
        f"({judge.calls / len(traces):.1f} per trace); wrote {ns.out}"
    )
    for field, row in J.agreement(traces, judged).items():
        print(
            f"kappa {field:20s} {row['kappa']:.3f} (agreement {row['agreement']:.3f}, n={row['n']})"
        )
    return 0


def _synth(ns):  # type: ignore[no-untyped-def]
    from llm_methods.seekbench.data import write_traces
    from llm_methods.seekbench.synth import synth_traces

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
