"""Boolean linear layer (MBOK, packed kernels) vs a dense fp32 / bf16 nn.Linear of the same shape,
same inputs, same run: matmul time, stored bytes, resident bytes at inference, and the
finetuning optimiser state (Boolean accumulator vs Adam on latent FP weights).

Two inference paths for the Boolean layer: ``cached`` (unpack once into a dense fp32 cache, then
one matmul: the default :class:`BooleanLinear`) and ``lean`` (unpack the bits on every call,
nothing dense kept between calls). RTN (4 / 2 bits) for reference.

``uv run --no-sync python packages/llm-methods/benchmarks/bench_mbok.py --out 1536 --in 576``
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from iclr26_common.device import choose_device
from llm_methods.mbok.model import BooleanLinear
from llm_methods.mbok.optim import BooleanOptimizer
from llm_methods.mbok.quant import MBOKTrainLinear, OneBitLinear, RTNLinear


def _sync() -> None:
    """Wait for queued CUDA work before reading a timer (no-op without CUDA)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _time(fn, reps: int) -> float:  # type: ignore[no-untyped-def]
    fn()
    _sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    _sync()
    return (time.perf_counter() - t0) / reps * 1e3


def _optimizer_state(lin: nn.Linear) -> tuple[float, float]:
    """Bytes per weight of optimiser state after one step: MBOK K=2 (Boolean accumulators on both
    kernels + AdamW on scales) and OneBit-STE (AdamW on latent weights + vectors)."""
    x = torch.randn(8, lin.in_features)
    n = lin.weight.numel()
    mbok = MBOKTrainLinear.from_linear(lin, 2)
    bool_opt = BooleanOptimizer([mbok.kernels], lr=0.01, per_slice=True)  # as distill does
    adam_scales = torch.optim.AdamW([mbok.s_out, mbok.s_in], lr=2e-5)
    mbok(x).square().sum().backward()
    bool_opt.step()
    adam_scales.step()
    scale_state = sum(
        v.numel() * v.element_size()
        for s in adam_scales.state.values()
        for v in s.values()
        if v.dim() > 0
    )
    onebit = OneBitLinear(lin)
    adam = torch.optim.AdamW(onebit.parameters(), lr=4e-4)
    onebit(x).square().sum().backward()
    adam.step()
    latent_state = sum(
        v.numel() * v.element_size() for s in adam.state.values() for v in s.values() if v.dim() > 0
    )
    return (bool_opt.state_bytes() + scale_state) / n, latent_state / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=int, default=1536)
    parser.add_argument("--in", dest="inp", type=int, default=576)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--device", default=None, help="cpu / cuda (default: CUDA when present)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    device = choose_device(args.device)
    lin = nn.Linear(args.inp, args.out, bias=False).requires_grad_(False)
    x = torch.randn(args.tokens, args.inp)  # drawn on the CPU: the same inputs on every device
    lin, x = lin.to(device), x.to(device)
    dense_ms = _time(lambda: lin(x), args.reps)
    fp32 = lin.weight.numel() * 4
    w16, x16 = lin.weight.to(torch.bfloat16), x.to(torch.bfloat16)
    bf16_ms = _time(lambda: x16 @ w16.T, args.reps)
    print(f"{args.out}x{args.inp}, {args.tokens} tokens, 1 thread, {device}")
    print(f"dense fp32: matmul {dense_ms:.3f} ms, stored {fp32} B, resident {fp32} B")
    print(
        f"dense bf16: matmul {bf16_ms:.3f} ms ({bf16_ms / dense_ms:.2f}x fp32), stored {fp32 // 2} B"
    )
    with torch.no_grad():
        for k in (1, 2, 3):
            layer = BooleanLinear.from_linear(lin, k)
            t0 = time.perf_counter()
            layer(x)
            _sync()
            unpack_ms = (time.perf_counter() - t0) * 1e3
            ms = _time(lambda layer=layer: layer(x), args.reps)
            lean = _time(lambda layer=layer: x @ layer.dense_weight().T, max(5, args.reps // 5))
            b = layer.stored_bytes()
            print(
                f"MBOK K={k}: cached matmul {ms:.3f} ms ({ms / dense_ms:.2f}x fp32; first call incl. "
                f"unpack {unpack_ms:.1f} ms, resident {b + fp32} B); lean {lean:.3f} ms "
                f"({lean / dense_ms:.1f}x fp32, resident {b} B = {b / fp32:.3f}x fp32); "
                f"stored {b} B ({b / fp32:.3f}x fp32, {8 * b / lin.weight.numel():.2f} bits/weight)"
            )
        for bits in (4, 2):
            rtn = RTNLinear.from_linear(lin, bits)
            ms = _time(lambda rtn=rtn: rtn(x), args.reps)
            b = rtn.stored_bytes()
            print(
                f"RTN {bits}-bit: cached matmul {ms:.3f} ms ({ms / dense_ms:.2f}x fp32), stored {b} B "
                f"({b / fp32:.3f}x fp32)"
            )
    mbok_state, onebit_state = _optimizer_state(nn.Linear(args.inp, args.out, bias=False))
    print(
        f"finetuning optimiser state per weight: MBOK K=2 {mbok_state:.3f} B, OneBit-STE (Adam on "
        f"latent) {onebit_state:.3f} B (+4 B latent weight) -> {mbok_state / onebit_state:.2f}x"
    )


if __name__ == "__main__":
    main()
