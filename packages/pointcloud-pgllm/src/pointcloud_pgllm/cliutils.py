"""Argument helpers shared by the ``pointcloud-pgllm`` subcommands (no heavy imports)."""

from __future__ import annotations

import argparse

__all__ = ["parse_name_list"]


def parse_name_list(text: str) -> list[str]:
    """'chair,table' -> ['chair', 'table'] (non-empty names, order kept)."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of names, got {text!r}")
    return names
