"""Deletion scoring throughput: SCISOR's one-pass single-deletion scan vs an AR LM's L passes.

Both networks have the same size (d=64, 2 layers, 4 heads; untrained: speed only). Prints
variants scored per second for: SCISOR single deletions (one forward pass on the WT, S=1),
SCISOR 2-3-residue deletions (path sums, one batched pass per level), the AR LM with one pass
per variant (batch size 1, the "L passes" of the issue) and the AR LM with all variants in one
batch; and the ratios.

    uv run python packages/bio-scisor/benchmarks/bench_scan.py
"""

from __future__ import annotations

import os

import torch

from bio_scisor.baselines import CausalLM
from bio_scisor.model import ScisorDenoiser
from bio_scisor.scoring import score_path
from bio_scisor.synth import make_assay, make_family
from iclr26_common.timing import best_time


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    family = make_family(n_sequences=10, seed=0)
    variants, _ = make_assay(family, n_multi=60, seed=0)
    wt = family.wt
    singles = [v for v in variants if len(v) == len(wt) - 1]
    multis = [v for v in variants if len(v) < len(wt) - 1]
    scisor, lm = ScisorDenoiser().eval(), CausalLM().eval()
    t_single = best_time(lambda: score_path(scisor, wt, singles), warmup=True)
    t_multi = best_time(lambda: score_path(scisor, wt, multis), 1, warmup=True)
    t_ar_l = best_time(lambda: [lm.log_probs([s], 1) for s in [wt, *singles]], 1, warmup=True)
    t_ar_batch = best_time(lambda: lm.log_probs([wt, *singles], len(singles) + 1), warmup=True)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, 1 torch thread")
    print(f"WT length {len(wt)}: {len(singles)} distinct single, {len(multis)} multi deletions")
    rows = [
        ("SCISOR single-deletion scan (1 pass)", len(singles), t_single),
        ("SCISOR 2-3-residue deletions (path sums)", len(multis), t_multi),
        ("AR LM, one pass per variant (L passes)", len(singles), t_ar_l),
        ("AR LM, all variants in one batch", len(singles), t_ar_batch),
    ]
    for name, n, t in rows:
        print(f"{name:44s} {n / t:10.0f} variants/s  ({1e3 * t:8.1f} ms)")
    print(f"ratio AR L passes / SCISOR scan     : {t_ar_l / t_single:6.1f}x")
    print(f"ratio AR one batch / SCISOR scan   : {t_ar_batch / t_single:6.1f}x")


if __name__ == "__main__":
    main()
