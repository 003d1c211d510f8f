"""Argument helpers for the ``medimg-gfscreen`` subcommands (no heavy imports)."""

from __future__ import annotations

import argparse

__all__ = ["parse_shape"]


def parse_shape(text: str) -> tuple[int, int, int]:
    """``'96,96,32'`` -> (96, 96, 32); three positive integers."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3 or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected three positive integers 'X,Y,Z', got {text!r}")
    return values  # type: ignore[return-value]
