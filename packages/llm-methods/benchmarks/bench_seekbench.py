"""SeekBench throughput: traces analysed per second and judge calls per trace.

Peer for the bootstrap: resampling clusters and re-aggregating a per-trace pandas DataFrame
with groupby for every resample (the straightforward pandas pattern), vs our vectorised
count-matrix bootstrap, on the same traces. Judge calls per trace: rule and SmolLM2 judges
(one call per judged step; upstream reports about 17.7 gpt-4.1-mini calls per trace).

    OMP_NUM_THREADS=1 uv run --no-sync python packages/llm-methods/benchmarks/bench_seekbench.py [--lm]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd

from llm_methods.seekbench.judge import LMJudge, RuleJudge, annotate
from llm_methods.seekbench.metrics import COUNT_COLUMNS, _trace_counts, analyze
from llm_methods.seekbench.synth import synth_traces


def pandas_bootstrap(traces: list[dict], n_boot: int, seed: int = 0) -> float:
    """Per-model accuracy CI by resampling clusters and re-aggregating with groupby."""
    rows = [
        {
            **_trace_counts(t, 2, None),
            "model": t["model"],
            "cluster": f"{t['dataset']}|{t['question']}",
        }
        for t in traces
    ]
    frame = pd.DataFrame(rows)
    clusters = frame["cluster"].unique()
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    for _ in range(n_boot):
        pick = pd.DataFrame({"cluster": rng.choice(clusters, len(clusters))})
        sample = pick.merge(frame, on="cluster")
        sums = sample.groupby("model")[list(COUNT_COLUMNS)].sum()
        _ = sums["correct"] / sums["traj"]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--lm", action="store_true", help="also time the SmolLM2 judge")
    parser.add_argument("--device", default=None, help="cpu / cuda (default: CUDA when present)")
    ns = parser.parse_args()
    traces = synth_traces(ns.questions, seed=0)
    print(
        f"load average {os.getloadavg()[0]:.2f}; {len(traces)} traces, "
        f"{sum(len(t['trace']) for t in traces)} steps"
    )
    for n_boot in (0, ns.n_boot):
        start = time.perf_counter()
        analyze(traces, n_boot=n_boot)
        s = time.perf_counter() - start
        print(
            f"analyze (all metrics, {n_boot} resamples): {s:.2f} s = {len(traces) / s:.0f} traces/s"
        )
    peer_boot = max(ns.n_boot // 20, 10)
    peer = pandas_bootstrap(traces, peer_boot) / peer_boot * ns.n_boot
    start = time.perf_counter()
    analyze(traces, n_boot=ns.n_boot)
    ours = time.perf_counter() - start
    print(
        f"bootstrap x{ns.n_boot}: pandas groupby peer (accuracy only, extrapolated from "
        f"{peer_boot}) {peer:.1f} s vs ours (all 10 metrics) {ours:.2f} s = {peer / ours:.0f}x"
    )
    rule = RuleJudge()
    start = time.perf_counter()
    annotate(traces, rule)
    s = time.perf_counter() - start
    print(f"rule judge: {rule.calls / len(traces):.1f} calls/trace, {len(traces) / s:.0f} traces/s")
    if ns.lm:
        import torch

        from llm_methods.lm import load_lm

        torch.set_num_threads(1)
        judge = LMJudge(load_lm("smollm2", ns.device, "float32"))
        start = time.perf_counter()
        annotate(traces[:2], judge)
        s = time.perf_counter() - start
        print(f"SmolLM2 judge: {judge.calls / 2:.1f} calls/trace, {s / judge.calls:.2f} s/call")


if __name__ == "__main__":
    main()
