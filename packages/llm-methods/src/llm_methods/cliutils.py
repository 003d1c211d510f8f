"""Argument helpers shared by the ``llm-methods`` subcommands (no heavy imports)."""

from __future__ import annotations

import argparse
import sys
from importlib.resources import files
from pathlib import Path
from typing import NoReturn

__all__ = ["ArgumentParser", "resolve_config_names", "shipped_configs"]


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line error: ``PROG: error: MESSAGE (see PROG --help)``, exit code 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def shipped_configs(method: str) -> dict[str, Path]:
    """``{stem: path}`` of the YAML configs shipped in ``llm_methods/<method>/configs``."""
    root = Path(str(files("llm_methods") / method / "configs"))
    return {path.stem: path for path in sorted(root.glob("*.yaml"))}


def resolve_config_names(method: str, argv: list[str]) -> list[str]:
    """Lets ``--config NAME`` name a shipped config when NAME is not an existing file."""
    out = list(argv)
    configs = shipped_configs(method)
    for i, arg in enumerate(out):
        if arg == "--config" and i + 1 < len(out):
            if not Path(out[i + 1]).exists() and out[i + 1] in configs:
                out[i + 1] = str(configs[out[i + 1]])
        elif arg.startswith("--config="):
            value = arg.split("=", 1)[1]
            if not Path(value).exists() and value in configs:
                out[i] = f"--config={configs[value]}"
    return out
