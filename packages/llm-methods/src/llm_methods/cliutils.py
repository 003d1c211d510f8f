"""Argument helpers shared by the ``llm-methods`` subcommands (no heavy imports).

The one-line-error parser and the shipped-config lookup are the workspace's
(:mod:`iclr26_common.cli_support`); here they are keyed by method: a method's configs live in
``llm_methods/<method>/configs``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr26_common import cli_support
from iclr26_common.cli_support import ArgumentParser

__all__ = [
    "ArgumentParser",
    "lightning_cli",
    "quiet_transformers",
    "resolve_config_names",
    "shipped_configs",
]


def shipped_configs(method: str) -> dict[str, Path]:
    """``{stem: path}`` of the YAML configs shipped in ``llm_methods/<method>/configs``."""
    return cli_support.shipped_configs(f"llm_methods.{method}")


def resolve_config_names(method: str, argv: list[str]) -> list[str]:
    """Lets ``--config NAME`` name one of ``method``'s shipped configs when NAME is not a file."""
    return cli_support.resolve_config_names(argv, shipped_configs(method))


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


def lightning_cli(
    method: str,
    model_class: Any,
    datamodule_class: Any,
    argv: Sequence[str],
    *,
    subcommand: str | None = None,
    subclass_mode: bool = True,
    links: Sequence[tuple[str, str, str]] = (),
) -> Any:
    """Run LightningCLI for ``llm-methods <method>`` and return it.

    ``--config NAME`` may name a shipped config of ``method``; ``subcommand`` (e.g. ``"fit"``)
    is prepended for commands that expose one stage only; ``links`` are
    ``(source, target, apply_on)`` argument links (``apply_on``: ``"parse"`` or
    ``"instantiate"``). ``model_class`` / ``datamodule_class`` are base classes when
    ``subclass_mode`` (``class_path`` in the config picks the concrete one). Lightning's seed
    line is silenced so that an input error stays one line; transformers' progress bars too.
    ``sys.argv`` is restored afterwards (LightningCLI parses it; ``args=`` warns).
    """
    import logging

    from lightning.pytorch.cli import LightningCLI

    quiet_transformers()
    logging.getLogger("lightning.fabric.utilities.seed").setLevel(logging.WARNING)

    class _CLI(LightningCLI):
        def add_arguments_to_parser(self, parser) -> None:  # type: ignore[no-untyped-def]
            for source, target, apply_on in links:
                parser.link_arguments(source, target, apply_on=apply_on)

    head = [subcommand] if subcommand else []
    saved = sys.argv
    sys.argv = [f"llm-methods {method}", *head, *resolve_config_names(method, list(argv))]
    try:
        return _CLI(model_class, datamodule_class, subclass_mode_model=subclass_mode,
                    subclass_mode_data=subclass_mode, seed_everything_default=0,
                    save_config_kwargs={"overwrite": True})  # fmt: skip
    finally:
        sys.argv = saved
