"""Peak memory of a block: the CUDA allocator's peak on GPU, live tensor bytes on CPU.

``PeakMemory`` is a ``TorchDispatchMode`` that counts the bytes of every tensor storage an op
creates inside the block and releases them when the last Python tensor on that storage dies, so
``peak`` approximates the block's transient peak (parameters created before the block are not
counted; tensors held only by C++, e.g. some autograd buffers, may be released early). It is
device-independent, so CPU numbers compare methods, not machines.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["PeakMemory", "peak_bytes", "timed"]


class PeakMemory(TorchDispatchMode):
    """``with PeakMemory() as m: ...``; then ``m.peak`` (bytes)."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[int, int] = {}
        self.sizes: dict[int, int] = {}
        self.current = 0
        self.peak = 0

    def _release(self, key: int) -> None:
        self.refs[key] -= 1
        if self.refs[key] == 0:
            self.current -= self.sizes.pop(key)
            del self.refs[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                continue
            storage = t.untyped_storage()
            key = storage.data_ptr()
            if key == 0:
                continue
            if key not in self.refs:
                self.refs[key], self.sizes[key] = 0, storage.nbytes()
                self.current += storage.nbytes()
                self.peak = max(self.peak, self.current)
            self.refs[key] += 1
            weakref.finalize(t, self._release, key)
        return out


def peak_bytes(fn: Callable[[], Any], device: torch.device | str = "cpu") -> tuple[Any, int]:
    """``(fn(), peak bytes)``: the CUDA allocator's peak above the start on GPU, ``PeakMemory``
    on CPU (which slows the block down: time it in a separate call)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        out = fn()
        torch.cuda.synchronize(device)
        return out, torch.cuda.max_memory_allocated(device) - base
    with PeakMemory() as mem:
        out = fn()
    return out, mem.peak


def timed(fn: Callable[[], Any], device: torch.device | str = "cpu") -> tuple[Any, float]:
    """``(fn(), seconds)``, synchronising CUDA."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return out, time.perf_counter() - start
