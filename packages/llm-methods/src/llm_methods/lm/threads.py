"""Torch intra-op thread control for experiments on small models."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run the block with one torch intra-op thread, restoring the previous count afterwards.

    Tiny models gain nothing from intra-op threads, and on a shared 2-core machine two threads
    spin-wait for each other (measured 4-15x slower than one for the zoo models).
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
