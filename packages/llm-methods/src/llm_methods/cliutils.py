"""Argument helpers shared by the ``llm-methods`` subcommands (no heavy imports).

The one-line-error parser and the shipped-config lookup are the workspace's
(:mod:`iclr26_common.cli_support`); here they are keyed by method: a method's configs live in
``llm_methods/<method>/configs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr26_common import cli_support
from iclr26_common.cli_support import ArgumentParser

__all__ = [
    "ArgumentParser",
    "method_cli",
    "quiet_transformers",
    "shipped_configs",
]


def shipped_configs(method: str) -> dict[str, Path]:
    """``{stem: path}`` of the YAML configs shipped in ``llm_methods/<method>/configs``."""
    return cli_support.shipped_configs(f"llm_methods.{method}")


def load_settings(method: str, name_or_path: str, fields: Sequence[str]) -> dict[str, Any]:
    """A flat YAML mapping of settings: one of ``method``'s shipped configs by name, or a path.

    Raises ``ValueError`` naming the file for an unknown name (listing the shipped ones), a
    file that is not a mapping, or a field outside ``fields``.
    """
    import yaml

    path = Path(name_or_path)
    if not path.is_file():
        shipped = shipped_configs(method)
        stem = name_or_path.removesuffix(".yaml")
        if stem not in shipped:
            raise ValueError(f"unknown config {name_or_path!r}; shipped: {sorted(shipped)}")
        path = shipped[stem]
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of {method} settings")
    unknown = set(data) - set(fields)
    if unknown:
        raise ValueError(f"{path}: unknown field(s) {sorted(unknown)}")
    return data


def quiet_transformers() -> None:
    """No transformers progress bars / warnings on the terminal (errors stay one line)."""
    from transformers.utils import logging

    logging.disable_progress_bar()
    logging.set_verbosity_error()


def method_cli(
    method: str,
    model_class: Any,
    datamodule_class: Any,
    argv: Sequence[str],
    *,
    subcommand: str | None = None,
    subclass_mode: bool = True,
    links: Sequence[tuple[str, str, str]] = (),
) -> Any:
    """``llm-methods <method>``'s LightningCLI: the workspace's
    :func:`iclr26_common.lightning.run_cli` with ``method``'s shipped configs
    (``llm_methods/<method>/configs``, ``--config NAME``) and ``llm-methods <method>`` as the
    program name; transformers' progress bars off. ``subcommand`` (e.g. ``"fit"``) is prepended
    for commands that expose one stage; ``links`` are ``(source, target, apply_on)``. The config
    is saved into the run's log folder, never over a file; ``--trainer.strategy ddp`` works from
    the console script (ranks > 0 re-run its command line)."""
    from iclr26_common.lightning import run_cli

    quiet_transformers()
    return run_cli(
        model_class,
        datamodule_class,
        argv,
        package=f"llm_methods.{method}",
        prog=f"llm-methods {method}",
        links=links,
        subcommand=subcommand,
        subclass_mode=subclass_mode,
    )
