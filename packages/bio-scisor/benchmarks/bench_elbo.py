"""Variance of Monte-Carlo ELBO differences: common random numbers vs independent noise.

A denoiser (d=64, 2 layers) is trained briefly on a synthetic family (t_max = 0.5). For a few
deletion variants of the WT, ELBO(mutant) - ELBO(WT) is estimated with ``--samples`` stratified
times over ``--seeds`` seeds, (i) with the shared per-gap noise of ``bio_scisor.elbo`` (one
draw for the WT and every variant) and (ii) with independent noise for the WT and the variant
(different seeds). Prints the per-variant variance of both and their ratio, and checks that
ELBO(WT) - ELBO(WT) is exactly 0.

    uv run python packages/bio-scisor/benchmarks/bench_elbo.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from bio_scisor.elbo import elbo_values, score_elbo
from bio_scisor.lit_module import fit_scisor
from bio_scisor.synth import make_family


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--samples", type=int, default=4)
    ns = parser.parse_args()
    torch.set_num_threads(1)
    family = make_family(n_sequences=200, seed=0)
    model = fit_scisor(family.sequences, ns.steps, 16, seed=0, t_max=0.5).denoiser
    wt = family.wt
    a, _ = family.wt_motifs[0]
    variants = {
        "single, linker": wt[:3] + wt[4:],
        "single, motif": wt[: a + 2] + wt[a + 3 :],
        "triple, motif": wt[:a] + wt[a + 3 :],
    }
    zero = score_elbo(model, wt, [wt, wt, wt], ns.samples, seed=0, t_max=0.5)
    print(f"ELBO(WT) - ELBO(WT), three copies: {zero.tolist()}")
    print("| variant | mean diff | var, shared noise | var, independent noise | ratio |")
    print("|---|---|---|---|---|")
    t0 = time.perf_counter()
    for name, mut in variants.items():
        shared = [
            score_elbo(model, wt, [mut], ns.samples, seed=s, t_max=0.5)[0] for s in range(ns.seeds)
        ]
        indep = [
            elbo_values(model, wt, [mut], ns.samples, seed=s, t_max=0.5)[0]
            - elbo_values(model, wt, [wt], ns.samples, seed=s + 10_000, t_max=0.5)[0]
            for s in range(ns.seeds)
        ]
        v_s, v_i = np.var(shared, ddof=1), np.var(indep, ddof=1)
        print(f"| {name} | {np.mean(shared):+.2f} | {v_s:.3g} | {v_i:.3g} | {v_i / v_s:.0f}x |")
    print(f"({ns.seeds} seeds x {ns.samples} times; {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
