"""What every method's command line builds on (``llm_methods/<method>/cli.py``; no heavy imports).

The one-line-error parser and the shipped-config lookup are the workspace's
(:mod:`iclr26_common.cli_support`); here they are keyed by method: a method's configs live in
``llm_methods/<method>/configs``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from iclr26_common import cli_support
from iclr26_common.cli_support import ArgumentParser, refuse_non_finite
from iclr26_common.device import add_device_option
from iclr26_common.progress import add_quiet_option

__all__ = [
    "ArgumentParser",
    "DefaultsHelpFormatter",
    "method_cli",
    "model_args",
    "out_args",
    "parse_settings",
    "quiet_transformers",
    "refuse_non_finite",
    "renamed_flags",
    "seed",
    "seed_args",
    "shipped_configs",
    "show_defaults",
]


def shipped_configs(method: str) -> dict[str, Path]:
    """``{stem: path}`` of the YAML configs shipped in ``llm_methods/<method>/configs``."""
    return cli_support.shipped_configs(f"llm_methods.{method}")


def quiet_transformers() -> None:
    """No transformers / huggingface_hub progress bars ("Loading weights", "Writing model
    shards": ``\r`` bars that ``--quiet`` cannot stop and that garble logs off a terminal) and no
    transformers warnings (errors stay one line). Called once where every command passes (the
    ``llm-methods`` entry point, :func:`llm_methods.cli.main`) and where every model load passes
    (:func:`llm_methods.lm.load_lm`). Before transformers is imported it costs nothing: it sets
    ``HF_HUB_DISABLE_PROGRESS_BARS=1`` and ``TRANSFORMERS_VERBOSITY=error``, which the libraries
    read on import (``--help`` stays fast); afterwards it switches them off directly."""
    import os
    import sys

    if "transformers" not in sys.modules:
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        os.environ["TRANSFORMERS_VERBOSITY"] = "error"
        # huggingface_hub (a dependency of transformers, not ours) read its constants already
        # when something imported it: switch its bars off through the loaded module
        hub_constants = sys.modules.get("huggingface_hub.constants")
        if hub_constants is not None:
            hub_constants.HF_HUB_DISABLE_PROGRESS_BARS = True
        hub_utils = sys.modules.get("huggingface_hub.utils")
        if hub_utils is not None:
            hub_utils.disable_progress_bars()
        return
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
    fit_outputs: dict[str, str] | None = None,
) -> Any:
    """``llm-methods <method>``'s LightningCLI: the workspace's
    :func:`iclr26_common.lightning.run_cli` with ``method``'s shipped configs
    (``llm_methods/<method>/configs``, ``--config NAME``) and ``llm-methods <method>`` as the
    program name (transformers' progress bars are off from the entry point on). ``subcommand`` (e.g. ``"fit"``) is prepended
    for commands that expose one stage; ``links`` are ``(source, target, apply_on)``. The config
    is saved into the run's log folder, never over a file; ``--trainer.strategy ddp`` works from
    the console script (ranks > 0 re-run its command line). ``fit_outputs``: the save paths
    ``fit`` writes (``{"model.init_args.save_dir": "folder"}``), checked before the model is
    built, from the command line or a ``--config`` YAML; ``fit`` then takes ``--overwrite``."""
    from iclr26_common.lightning import run_cli

    return run_cli(
        model_class,
        datamodule_class,
        argv,
        package=f"llm_methods.{method}",
        prog=f"llm-methods {method}",
        links=links,
        subcommand=subcommand,
        subclass_mode=subclass_mode,
        fit_outputs=fit_outputs,
    )


def renamed_flags(
    argv: Sequence[str], renames: dict[str, str], prog: str, *, removed_in: str
) -> list[str]:
    """``argv`` with the old spellings of renamed flags (``{"--stage.seed": "--seed"}``)
    replaced, one warning line each (:func:`iclr26_common.cli_support.rename_flags`) naming
    ``llm-methods REMOVED_IN``.

    ``removed_in`` is the version (``"0.9.0"``) that removes these spellings, a string literal
    or module-level constant at each call (a test parses it from the source): a rename keeps
    working for one minor version after the release that makes it, the changelog's "Deprecated"
    entry names the same version, and the test fails once llm-methods reaches it while the
    rename remains. In effect: ``antibody align|finetune --stage.seed`` -> ``--seed``
    (deprecated in 0.8.0, removed in 0.9.0). The renames of 0.7.0 (``perk eval --ckpt``, ``mas2
    --local-model``, ``adl --ft``/``--base``, ``mbok eval --text``, ``mbok finetune
    --model.X``/``--data.X``, ``remix fit --model.init_args.policy``) were removed in 0.8.0."""
    return cli_support.rename_flags(
        argv, renames, prog=prog, removed_in=f"llm-methods {removed_in}"
    )


def model_args(parser: ArgumentParser) -> None:
    """``--model`` (a model spec), ``--device`` and ``--dtype``, as :func:`llm_methods.lm.load_lm`
    takes them (also used by ``dispersion measure``)."""
    parser.add_argument("--model", default="smollm2", help="model spec (default: smollm2)")
    add_device_option(parser)
    parser.add_argument("--dtype", default=None, help="float32 / bf16 / fp16 (default: per device)")


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """``--help`` with every option's default: `` (default: X)`` is appended to the help of each
    option that takes a value, is not required and does not already name its default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if _shows_default(action) and "default" not in text.lower():
            text = f"{text} {_default_text(action)}".strip()
        return text


def _shows_default(action: argparse.Action) -> bool:
    return bool(
        action.option_strings
        and action.nargs != 0
        and not action.required
        and action.default is not argparse.SUPPRESS
    )


def _default_text(action: argparse.Action) -> str:
    """``(default: X)`` for ``action`` (``%`` escaped for argparse's help expansion)."""
    default = action.default
    if isinstance(default, (list, tuple)):
        shown = " ".join(str(v) for v in default) or "none"
    else:
        shown = "none" if default is None else str(default)
    return "(default: " + shown.replace("%", "%%") + ")"


def show_defaults(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` and all its sub-parsers (recursively) with :class:`DefaultsHelpFormatter`:
    ``--help`` shows the default of every option (one without a help text gets the default
    alone). Returns ``parser``."""
    parser.formatter_class = DefaultsHelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                show_defaults(sub)
        elif action.help is None and _shows_default(action):
            action.help = _default_text(action)
    return parser


#: An argparse ``type=``: a seed, an integer in [0, 2**32) (what
#: :func:`iclr26_common.seeding.seed_everything` takes).
seed = cli_support.number_type(
    int, "an integer in [0, 2**32)", lambda v: 0 <= v < 2**32, name="seed"
)


def seed_args(parser: argparse.ArgumentParser, *, quiet: bool = True) -> None:
    """``--seed`` (:data:`seed`, default 0) and, with ``quiet``, ``--quiet`` (no progress
    lines): what every computing command has besides ``--model``/``--device``/``--out``."""
    parser.add_argument("--seed", type=seed, default=0, help="random seed (torch, NumPy, random)")
    if quiet:
        add_quiet_option(parser)


def out_args(
    parser: argparse.ArgumentParser,
    help: str,
    *,
    required: bool = False,
    kind: Literal["folder", "file"] | None = None,
    resumable: bool = False,
    overwrite: str | None = None,
) -> None:
    """``--out`` (a ``kind`` folder or file, ``help`` its help; ``None`` unless ``required``),
    ``--overwrite`` and, when ``resumable``, ``--resume``: common's
    :func:`iclr26_common.outputs.add_output_options` (one wording; ``--overwrite`` and
    ``--resume`` exclude each other). ``overwrite`` is the older spelling of ``kind``: the text
    ``"replace an existing --out"`` means a file."""
    from iclr26_common.outputs import add_output_options, overwrite_help

    if kind is None:
        kind = "file" if overwrite == overwrite_help("--out", "file") else "folder"
    add_output_options(parser, kind=kind, required=required, resumable=resumable, help=help)


def parse_settings(parser: Any, argv: Sequence[str], package: str) -> Any:
    """``parser`` (a jsonargparse ``ArgumentParser`` made with ``exit_on_error=False``) on
    ``argv``, where ``--config NAME`` / ``--config=NAME`` may name a YAML shipped in
    ``package``'s ``configs/``; returns the namespace with its dataclass groups built (checked by
    their ``__post_init__``).

    Bad input ends, like argparse, with one line ``PROG: error: MESSAGE (see PROG --help)`` on
    stderr and ``SystemExit(2)`` (``PROG`` is ``parser.prog``, e.g. ``llm-methods ltpo solve``):
    a non-finite number (:func:`refuse_non_finite`: ``--ltpo.sigma inf`` names the option, not
    jsonargparse's parser key), an unknown config name (listing the shipped ones), what jsonargparse or a group's
    ``__post_init__`` rejects, and, naming the file first (``PATH: ...``), a ``--config`` YAML
    with a field the parser does not have (e.g. an old flat config), a bad value or no mapping.
    Each config file is checked alone before the command line is parsed."""
    from jsonargparse import ArgumentError

    from iclr26_common.cli_support import ArgumentParser as OneLine
    from iclr26_common.cli_support import resolve_config_names, shipped_configs

    usage = OneLine(prog=parser.prog, add_help=False)
    try:  # ``--poison-ratio nan``: one line naming the option, not jsonargparse's Union message
        refuse_non_finite(argv)
    except cli_support.UsageError as error:
        usage.error(str(error))
    shipped = shipped_configs(package)
    args = resolve_config_names(argv, shipped)
    for value in cli_support.config_values(args):
        try:  # a folder, or bytes that are not UTF-8: one line naming the file
            cli_support.check_config_file(value)
        except cli_support.UsageError as error:
            usage.error(str(error))
        if not Path(value).is_file():
            usage.error(f"unknown config {value!r}; shipped: {sorted(shipped)}")
        problem = _config_file_problem(parser, Path(value))
        if problem:
            usage.error(f"{value}: {problem}")
    try:
        return parser.instantiate(parser.parse_args(args))
    except (ArgumentError, ValueError) as error:
        usage.error(" ".join(str(error).split()))


def _config_file_problem(parser: Any, path: Path) -> str | None:
    """What is wrong with the config YAML at ``path`` for ``parser`` (one line, without the
    path), or ``None``: not a mapping, fields the parser does not have (``group.field`` names),
    a value jsonargparse or a dataclass group's ``__post_init__`` rejects."""
    import yaml
    from jsonargparse import ArgumentError

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        return "not valid YAML: " + " ".join(str(error).split())
    if data is None:
        return None
    if not isinstance(data, dict):
        return f"expected a mapping of settings, got {type(data).__name__}"
    known = {str(key) for key in parser.get_defaults().keys()}
    unknown = _unknown_fields(data, known, "")
    if unknown:
        groups = sorted({key.split(".")[0] for key in known if "." in key})
        return f"unknown field(s) {unknown} (settings nest under: {', '.join(groups)})"
    try:  # the file's values over the defaults; required options are the command line's
        parser.instantiate(parser.parse_path(path, _skip_validation=True))
    except (ArgumentError, ValueError) as error:
        return " ".join(str(error).split())
    return None


def _unknown_fields(data: dict, known: set[str], prefix: str) -> list[str]:
    """Dotted names of the keys of the nested mapping ``data`` that are not in ``known`` (the
    parser's dotted option names; a mapping under a known group is searched inside it)."""
    unknown = []
    for key, value in data.items():
        name = prefix + str(key).replace("-", "_")
        if name in known:
            continue
        if isinstance(value, dict) and any(k.startswith(name + ".") for k in known):
            unknown += _unknown_fields(value, known, name + ".")
        else:
            unknown.append(name)
    return unknown
