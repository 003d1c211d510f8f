"""Argument helpers shared by the ``pointcloud-pgllm`` subcommands (no heavy imports)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

__all__ = ["ArgumentParser", "parse_name_list"]


def parse_name_list(text: str) -> list[str]:
    """'chair,table' -> ['chair', 'table'] (non-empty names, order kept)."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of names, got {text!r}")
    return names


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line error: ``PROG: error: MESSAGE (see PROG --help)``, exit code 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)
