"""Torch intra-op thread control for experiments on small models."""

from __future__ import annotations

from contextlib import AbstractContextManager

from iclr26_common.threads import torch_threads

__all__ = ["one_thread"]


def one_thread() -> AbstractContextManager[None]:
    """Run the block with one torch intra-op thread, restoring the previous count afterwards
    (:func:`iclr26_common.threads.torch_threads`). Tiny models gain nothing from intra-op
    threads, and on a shared 2-core machine two threads spin-wait for each other (measured
    4-15x slower than one for the zoo models)."""
    return torch_threads(1)
