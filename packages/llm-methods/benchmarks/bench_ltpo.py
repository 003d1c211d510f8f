"""LTPO reward step: cached question prefix (forward the K thoughts only) vs a full forward over
[prefix; thoughts] (peer: what upstream does per step), same model, same prompts, same run; also
the batched scorer (B questions per forward) and the max reward difference.

``OMP_NUM_THREADS=1 uv run --no-sync python packages/llm-methods/benchmarks/bench_ltpo.py``
"""

from __future__ import annotations

import argparse
import time

import torch

from llm_methods.lm import load_lm
from llm_methods.ltpo.data import synth_problems
from llm_methods.ltpo.optimize import BatchThoughtScorer, ThoughtScorer, prompt_ids


def sync(device: torch.device) -> None:
    """Wait for queued CUDA work before reading a timer (no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--n", type=int, default=8, help="questions")
    parser.add_argument("--steps", type=int, default=10, help="reward evaluations per question")
    parser.add_argument("--k", type=int, default=8, help="thought tokens")
    parser.add_argument("--device", default=None, help="cpu / cuda (default: CUDA when present)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lm = load_lm(args.model, args.device, "float32")
    qs = [r["question"] for r in synth_problems(args.n, seed=0)]
    prefixes = [prompt_ids(lm, q) for q in qs]
    gen = torch.Generator().manual_seed(0)  # CPU: the same thoughts on every device
    H = (torch.randn(args.n, args.k, lm.hidden_size, generator=gen) * 0.05).to(lm.device)
    scorers = [ThoughtScorer(lm, p) for p in prefixes]
    times, diff = {"full": 0.0, "cached": 0.0}, 0.0
    with torch.no_grad():
        for s, h in zip(scorers, H, strict=True):
            s.reward(h)  # warm-up
            t = time.perf_counter()
            for _ in range(args.steps):
                full = s.reward_uncached(h)
            sync(lm.device)
            times["full"] += time.perf_counter() - t
            t = time.perf_counter()
            for _ in range(args.steps):
                cached = s.reward(h)
            sync(lm.device)
            times["cached"] += time.perf_counter() - t
            diff = max(diff, float((full - cached).abs()))
        batch = BatchThoughtScorer(lm, prefixes)
        t = time.perf_counter()
        for _ in range(args.steps):
            batched = batch.reward(H)
        sync(lm.device)
        times["batched"] = time.perf_counter() - t
    ref = torch.stack([s.reward_uncached(h) for s, h in zip(scorers, H, strict=True)])
    bdiff = float((batched - ref).abs().max())
    mean_p = sum(len(p) for p in prefixes) / len(prefixes)
    per = args.n * args.steps
    print(
        f"{lm.name}, torch {torch.__version__}, 1 thread, {args.n} questions (prefix ~"
        f"{mean_p:.0f} tokens), K={args.k}, {args.steps} reward steps each\n"
    )
    print("| reward step | ms / step | × full forward | max abs reward diff |")
    print("|---|---:|---:|---:|")
    print(f"| full forward [prefix; H] (peer) | {1e3 * times['full'] / per:.1f} | 1.00 | — |")
    print(
        f"| cached prefix KV, K-token suffix | {1e3 * times['cached'] / per:.1f} | "
        f"{times['full'] / times['cached']:.2f} | {diff:.1e} |"
    )
    print(
        f"| cached + batched ({args.n} questions / forward) | "
        f"{1e3 * times['batched'] / per:.1f} | {times['full'] / times['batched']:.2f} | "
        f"{bdiff:.1e} |"
    )


if __name__ == "__main__":
    main()
