"""Meta-Router fit time vs the gold-only peer (the issue's named comparison), same data.

OMP_NUM_THREADS=1 uv run --no-sync python packages/llm-methods/benchmarks/bench_meta_router.py
"""

from __future__ import annotations

import os
import time

from llm_methods.meta_router.data import simulate
from llm_methods.meta_router.model import fit_method


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.2f}")
    warm, _ = simulate(300, 0.2, 0.5, seed=1, n_test=10)  # imports + first fits off the clock
    cols = [c for c in warm.columns if c.startswith("x")]
    for learner in ("dr", "r", "lineardr", "tlearner"):
        fit_method(
            "dr_corrected",
            warm[cols].to_numpy(),
            warm["y"].to_numpy(),
            warm["T"].to_numpy(),
            learner=learner,
        )
    print(
        "| n | gold-only s | pooled s | DR-corrected (dr) s | r s | lineardr s | tlearner s "
        "| dr / gold-only |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in (1000, 4000, 16000):
        train, _ = simulate(n, 0.1, 0.5, seed=0, n_test=10)
        cols = [c for c in train.columns if c.startswith("x")]
        x, y, t = train[cols].to_numpy(), train["y"].to_numpy(), train["T"].to_numpy()
        times = {}
        for name, method, learner in (
            ("gold", "gold_only", "dr"),
            ("pooled", "pooled", "dr"),
            ("dr", "dr_corrected", "dr"),
            ("r", "dr_corrected", "r"),
            ("lineardr", "dr_corrected", "lineardr"),
            ("tlearner", "dr_corrected", "tlearner"),
        ):
            start = time.perf_counter()
            fit_method(method, x, y, t, seed=0, learner=learner)
            times[name] = time.perf_counter() - start
        print(
            f"| {n} | {times['gold']:.2f} | {times['pooled']:.2f} | {times['dr']:.2f} | "
            f"{times['r']:.2f} | {times['lineardr']:.2f} | {times['tlearner']:.2f} | "
            f"{times['dr'] / times['gold']:.0f}x |"
        )


if __name__ == "__main__":
    main()
