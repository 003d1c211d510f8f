"""Alignment-count DP: batched log-space tables vs a straightforward per-pair loop.

Prints the time of the deletion-posterior targets for one training batch (B sequences of the
synthetic family, noised at t ~ U[0, t_max]) with ``bio_scisor.alignment.log_deletion_counts``
(vectorised over the batch, one Python loop over |X0|) and with ``log_deletion_counts_loop``
(the straightforward reference: Python loops over both tables, one pair at a time), and the
ratio. Also the share of a full training step spent in the DP.

    uv run python packages/bio-scisor/benchmarks/bench_alignment.py [--batch 16] [--t-max 0.5]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from bio_scisor.alignment import log_deletion_counts, log_deletion_counts_loop
from bio_scisor.constants import AMINO_ACIDS
from bio_scisor.elbo import per_sequence_loss
from bio_scisor.insertion import insert, pad_batch
from bio_scisor.io import encode
from bio_scisor.model import ScisorDenoiser
from bio_scisor.synth import make_family


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--t-max", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=3)
    ns = parser.parse_args()
    torch.set_num_threads(1)
    family = make_family(n_sequences=ns.batch, seed=0)
    x0, x0_len = pad_batch([torch.from_numpy(encode(s)) for s in family.sequences])
    noised = insert(x0, x0_len, torch.Generator().manual_seed(0), t_max=ns.t_max)
    xt_strings = [
        "".join(AMINO_ACIDS[i] for i in noised.xt[b, : int(noised.xt_len[b])].tolist())
        for b in range(ns.batch)
    ]
    batched = best_of(lambda: log_deletion_counts(x0, x0_len, noised.xt, noised.xt_len), ns.repeats)
    loop = best_of(
        lambda: [
            log_deletion_counts_loop(a, b)
            for a, b in zip(family.sequences, xt_strings, strict=True)
        ],
        1,
    )
    ours = log_deletion_counts(x0, x0_len, noised.xt, noised.xt_len)
    ref = log_deletion_counts_loop(family.sequences[0], xt_strings[0])
    assert np.allclose(ours[0, : len(ref)].numpy(), ref)
    model = ScisorDenoiser()
    opt = torch.optim.AdamW(model.parameters())

    def step() -> None:
        loss, _ = per_sequence_loss(model, x0, x0_len, noised, t_max=ns.t_max)
        loss.mean().backward()
        opt.step()
        opt.zero_grad()

    full = best_of(step, ns.repeats)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, 1 torch thread")
    print(
        f"batch {ns.batch}, |X0| mean {float(x0_len.double().mean()):.0f}, "
        f"|X_t| mean {float(noised.xt_len.double().mean()):.0f} (t_max={ns.t_max})"
    )
    print(f"batched log-space DP : {1e3 * batched:9.1f} ms per batch")
    print(f"per-pair loop (peer) : {1e3 * loop:9.1f} ms per batch")
    print(f"ratio (peer / ours)  : {loop / batched:9.1f}x")
    print(
        f"training step (DP + denoiser fwd/bwd + AdamW): {1e3 * full:.1f} ms; "
        f"DP share {100 * batched / full:.0f} %"
    )


if __name__ == "__main__":
    main()
