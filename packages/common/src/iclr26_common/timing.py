"""Wall-clock timing for experiments and benchmarks (stdlib only): the fastest of a few calls,
the number least disturbed by other work on a shared machine."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["best_time"]


def best_time(fn: Callable[[], object], repeats: int = 3, *, warmup: bool = False) -> float:
    """The fastest wall time in seconds (``time.perf_counter``) of ``repeats`` calls of ``fn``;
    with ``warmup``, one untimed call first (lazy imports, caches, kernel selection)."""
    if repeats < 1:
        raise ValueError(f"best_time: repeats must be >= 1, got {repeats}")
    if warmup:
        fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
