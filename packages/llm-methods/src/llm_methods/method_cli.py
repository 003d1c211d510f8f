"""What every method's command line builds on (``llm_methods/<method>/cli.py``; no heavy imports).

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
    "model_args",
    "parse_settings",
    "quiet_transformers",
    "shipped_configs",
]


def shipped_configs(method: str) -> dict[str, Path]:
    """``{stem: path}`` of the YAML configs shipped in ``llm_methods/<method>/configs``."""
    return cli_support.shipped_configs(f"llm_methods.{method}")


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


def model_args(parser: ArgumentParser) -> None:
    """``--model`` (a model spec), ``--device`` and ``--dtype``, as :func:`llm_methods.lm.load_lm`
    takes them (also used by ``dispersion measure``)."""
    parser.add_argument("--model", default="smollm2", help="model spec (default: smollm2)")
    parser.add_argument("--device", default=None, help="cpu / cuda (default: cuda if present)")
    parser.add_argument("--dtype", default=None, help="float32 / bf16 / fp16 (default: per device)")


def parse_settings(parser: Any, argv: Sequence[str], package: str) -> Any:
    """``parser`` (a jsonargparse ``ArgumentParser`` made with ``exit_on_error=False``) on
    ``argv``, where ``--config NAME`` may name a YAML shipped in ``package``'s ``configs/``;
    returns the namespace with its dataclass groups built (checked by their ``__post_init__``).

    Raises ``ValueError`` for an unknown config name (listing the shipped ones) and
    :class:`~iclr26_common.cli_support.UsageError` (one line) for what jsonargparse rejects, e.g.
    a key the config's groups do not have."""
    from jsonargparse import ArgumentError

    from iclr26_common.cli_support import UsageError, resolve_config_names, shipped_configs

    shipped = shipped_configs(package)
    args = resolve_config_names(argv, shipped)
    for flag, value in zip(args, [*args[1:], None], strict=True):
        if flag == "--config" and value is not None and not Path(value).is_file():
            raise ValueError(f"unknown config {value!r}; shipped: {sorted(shipped)}")
    try:
        return parser.instantiate(parser.parse_args(args))
    except ArgumentError as error:
        raise UsageError(" ".join(str(error).split())) from error
