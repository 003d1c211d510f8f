"""Argument helpers shared by the ``rf-matid`` subcommands (no heavy imports, no rf_matid imports).

``rf_matid.cli`` and ``rf_matid.benchmark`` both import from here, so neither imports the other
at module level.
"""

from __future__ import annotations

import argparse

__all__ = ["parse_int_list"]


def parse_int_list(text: str) -> list[int]:
    """'200:2000:50' (inclusive range) or '200,400,600' -> a non-empty list of ints.

    Raises ``argparse.ArgumentTypeError`` for anything else, including an empty or reversed
    range (``300:200:50``) and a step that is not positive.
    """
    expected = "expected 'start:stop:step' (start <= stop, step > 0) or a comma-separated list"
    try:
        if ":" in text:
            start, stop, step = (int(part) for part in text.split(":"))
            if step <= 0 or start > stop:
                raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
            return list(range(start, stop + 1, step))
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{expected} of integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"{expected} of integers, got {text!r}")
    return values
