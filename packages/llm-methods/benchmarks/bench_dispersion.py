"""Streaming O(n d) dispersion vs the official O(n² d) Gram-matrix version, same inputs, same run.

Peer: the official ``step3_compute_dispersion_and_plot.py`` computation (normalise, ``u @ u.T``,
mean of the upper triangle selected with ``torch.triu(torch.ones(n, n), 1).bool()``).
Goal (issue): >= 50x at n = 8k. Prints a Markdown table; run with
``OMP_NUM_THREADS=1 uv run python packages/llm-methods/benchmarks/bench_dispersion.py``.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from llm_methods.dispersion.metrics import mean_pairwise_cosine


def official_gram(h: torch.Tensor) -> float:
    u = F.normalize(h.float(), p=2, dim=1)
    sim = u @ u.t()
    return 1 - sim[torch.triu(torch.ones(sim.shape), diagonal=1).bool()].mean().item()


def streaming(h: torch.Tensor) -> float:
    return 1 - float(mean_pairwise_cosine(h))


def best_of(fn, h: torch.Tensor, repeats: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    times, value = [], 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn(h)
        times.append(time.perf_counter() - start)
    return min(times), value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,2000,4000,8000")
    parser.add_argument("--dim", type=int, default=576, help="hidden size (SmolLM2: 576)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), d = {args.dim}\n")
    print("| n | Gram (official) ms | streaming ms | speed-up | abs diff |")
    print("|---:|---:|---:|---:|---:|")
    for n in (int(s) for s in args.sizes.split(",")):
        h = torch.randn(n, args.dim) + 0.5  # anisotropic, like LM hidden states
        t_gram, d_gram = best_of(official_gram, h, args.repeats)
        t_stream, d_stream = best_of(streaming, h, args.repeats)
        print(
            f"| {n} | {1e3 * t_gram:.1f} | {1e3 * t_stream:.2f} | {t_gram / t_stream:.0f}x | "
            f"{abs(d_gram - d_stream):.1e} |"
        )


if __name__ == "__main__":
    main()
