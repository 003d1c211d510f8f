"""BED-LLM EIG throughput: LLM answer likelihoods for N hypotheses x M questions x 2 options
scored in batched forwards (``answer_probs``) vs one forward per (θ, x) pair (the peer:
``answer_probs_loop``), same model, same prompts, same run; plus the EIG evaluations per second
of the numpy estimator once the likelihoods are known.

``OMP_NUM_THREADS=1 uv run --no-sync python packages/llm-methods/benchmarks/bench_bed.py``
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from llm_methods.bed.eig import eig_estimate
from llm_methods.bed.llm import answer_probs, answer_probs_loop
from llm_methods.bed.worlds import ANIMAL_QUESTIONS, ANIMALS
from llm_methods.lm import load_lm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--n", type=int, default=8, help="hypotheses N")
    parser.add_argument("--m", type=int, default=8, help="candidate questions M")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--device", default=None, help="cpu / cuda (default: CUDA when present)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lm = load_lm(args.model, args.device, "float32")  # answer_probs returns CPU arrays: synced
    hyps, qs = ANIMALS[: args.n], ANIMAL_QUESTIONS[: args.m]
    answer_probs(lm, hyps[:1], qs[:2])  # warm-up
    t = time.perf_counter()
    loop = answer_probs_loop(lm, hyps, qs)
    t_loop = time.perf_counter() - t
    t = time.perf_counter()
    batched = answer_probs(lm, hyps, qs, batch_size=args.batch)
    t_batch = time.perf_counter() - t
    diff = float(np.abs(loop - batched).max())
    reps = 2000
    t = time.perf_counter()
    for _ in range(reps):
        eig_estimate(batched)
    t_eig = (time.perf_counter() - t) / reps
    pairs = args.n * args.m
    print(
        f"{lm.name}, torch {torch.__version__}, 1 thread, N={args.n} x M={args.m} x 2 options "
        f"({pairs} prompts)\n"
    )
    print(
        "| likelihood scoring | s total | EIG evaluations (questions) / s | × loop | max abs diff |"
    )
    print("|---|---:|---:|---:|---:|")
    print(
        f"| loop, one forward per (θ, x) (peer) | {t_loop:.2f} | {args.m / t_loop:.2f} | 1.00 | — |"
    )
    print(
        f"| batched, {args.batch} prompts / forward | {t_batch:.2f} | {args.m / t_batch:.2f} | "
        f"{t_loop / t_batch:.2f} | {diff:.1e} |"
    )
    print(
        f"\nnumpy EIG estimate on the [N, M, 2] table: {1e6 * t_eig:.1f} µs per call "
        f"({args.m / t_eig:,.0f} question EIGs / s)"
    )


if __name__ == "__main__":
    main()
