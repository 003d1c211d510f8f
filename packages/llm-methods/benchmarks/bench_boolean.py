"""Boolean linear layer (MBOK, packed kernels unpacked once) vs a dense fp32 / bf16 nn.Linear of
the same shape, same inputs, same run: matmul time and stored bytes.

``uv run --no-sync python packages/llm-methods/benchmarks/bench_boolean.py --out 1536 --in 576``
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from llm_methods.boolean.model import BooleanLinear


def _time(fn, reps: int) -> float:  # type: ignore[no-untyped-def]
    fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=int, default=1536)
    parser.add_argument("--in", dest="inp", type=int, default=576)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    lin = nn.Linear(args.inp, args.out, bias=False)
    x = torch.randn(args.tokens, args.inp)
    dense_ms = _time(lambda: lin(x), args.reps)
    fp32 = lin.weight.numel() * 4
    print(f"{args.out}x{args.inp}, {args.tokens} tokens; dense fp32 {dense_ms:.3f} ms, {fp32} B")
    print(f"dense bf16 storage {fp32 // 2} B")
    for k in (1, 2, 3):
        layer = BooleanLinear.from_linear(lin, k)
        t0 = time.perf_counter()
        layer(x)
        unpack_ms = (time.perf_counter() - t0) * 1e3
        ms = _time(lambda layer=layer: layer(x), args.reps)
        b = layer.stored_bytes()
        print(f"K={k}: matmul {ms:.3f} ms ({ms / dense_ms:.2f}x fp32), first call incl. unpack "
              f"{unpack_ms:.1f} ms, stored {b} B ({b / fp32:.3f}x fp32)")  # fmt: skip


if __name__ == "__main__":
    main()
