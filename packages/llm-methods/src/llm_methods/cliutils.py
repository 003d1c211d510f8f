"""Argument helpers shared by the ``llm-methods`` subcommands (no heavy imports).

The one-line-error parser and the shipped-config lookup are the workspace's
(:mod:`iclr26_common.cli_support`); here they are keyed by method: a method's configs live in
``llm_methods/<method>/configs``.
"""

from __future__ import annotations

from pathlib import Path

from iclr26_common import cli_support
from iclr26_common.cli_support import ArgumentParser

__all__ = ["ArgumentParser", "resolve_config_names", "shipped_configs"]


def shipped_configs(method: str) -> dict[str, Path]:
    """``{stem: path}`` of the YAML configs shipped in ``llm_methods/<method>/configs``."""
    return cli_support.shipped_configs(f"llm_methods.{method}")


def resolve_config_names(method: str, argv: list[str]) -> list[str]:
    """Lets ``--config NAME`` name one of ``method``'s shipped configs when NAME is not a file."""
    return cli_support.resolve_config_names(argv, shipped_configs(method))
