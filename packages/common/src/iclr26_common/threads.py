"""Torch intra-op thread control (torch is imported only when the context is entered)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["torch_threads"]


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads, restoring the previous count afterwards
    (also on error).

    Small models gain nothing from intra-op threads, and on a shared 2-core machine two threads
    spin-wait for each other: measured 4-15x slower than one for tiny LMs, 5x for a small mixer.
    """
    if n < 1:
        raise ValueError(f"torch_threads: n must be >= 1, got {n}")
    import torch

    from iclr26_common.device import record_threads

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    record_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
