"""One LightningCLI wiring for every iclr26 package, and a quiet ``Trainer`` for experiments.

:func:`run_cli` is what a package's ``fit``/``validate``/``test``/``predict`` subcommands call::

    run_cli(MyModule, MyDataModule, ["fit", "--config", "tiny"], package="my_pkg")

It gives every package the same behaviour:

- ``--config NAME`` / ``-c NAME`` may name a YAML shipped in the package's ``configs/`` folder; a
  name that is neither a file nor a shipped config is a one-line error listing the shipped ones.
- A parse error (unknown option, bad value, unreadable config) is raised as
  :class:`~iclr26_common.cli_support.UsageError`, which
  :func:`~iclr26_common.cli_support.run_with_one_line_errors` prints as one line (exit 2).
- The resolved config is saved into the run's log folder (``trainer.log_dir``: the logger's
  version folder, or ``default_root_dir`` without a logger) as ``config.yaml``, or as
  ``config-N.yaml`` when that exists: never over an existing file.
- ``--trainer.accelerator auto`` (the default) becomes :func:`iclr26_common.device.
  lightning_accelerator` (CUDA when PyTorch sees it; ``ICLR26_DEVICE=cpu`` forces the CPU).
- ``sys.argv`` is left alone: Lightning's ``ddp`` strategy re-runs ``sys.argv`` for ranks > 0, so
  a console script runs under ``--trainer.strategy ddp --trainer.devices N`` as it is. The
  parser reads ``argv`` (not ``sys.argv``), without LightningCLI's "args parameter" warning.
- Lightning's "Seed set to N" line is silenced, so an input error stays one line.

Importing this module imports torch and Lightning: import it inside the command that needs it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.cli import LightningCLI, SaveConfigCallback
from lightning.pytorch.utilities.rank_zero import rank_zero_info

from iclr26_common.cli_support import UsageError, resolve_config_names, shipped_configs
from iclr26_common.device import lightning_accelerator, lightning_devices

__all__ = [
    "CLI",
    "RunDirSaveConfig",
    "free_config_path",
    "quiet_lightning",
    "quiet_trainer",
    "run_cli",
]

#: The loggers whose INFO lines ("Seed set to 0", "GPU available: ...") :func:`quiet_lightning`
#: raises to WARNING.
_LIGHTNING_LOGGERS = ("lightning.pytorch", "lightning.fabric", "lightning_fabric")
_SEED_LOGGER = "lightning.fabric.utilities.seed"

#: A ``--config`` value that looks like a file name (not an inline YAML/JSON string).
_LOOKS_LIKE_NAME = re.compile(r"^[\w./\\~-]+$")

#: ``(source, target)`` or ``(source, target, apply_on)`` with ``apply_on`` "parse"/"instantiate".
Link = tuple[str, str] | tuple[str, str, str]


def free_config_path(folder: Path, filename: str = "config.yaml") -> Path:
    """``folder/filename`` if it does not exist, else the first free ``folder/STEM-N.SUFFIX``
    (N = 1, 2, ...)."""
    path = folder / filename
    n = 0
    while path.exists():
        n += 1
        path = folder / f"{Path(filename).stem}-{n}{Path(filename).suffix}"
    return path


class RunDirSaveConfig(SaveConfigCallback):
    """Saves the resolved config into ``trainer.log_dir`` (the logger's version folder, or
    ``default_root_dir`` without a logger), never over an existing file: when ``config.yaml``
    is taken, ``config-1.yaml``, ``config-2.yaml``, ... Rank 0 chooses the name and writes; the
    other ranks only take part in the broadcasts."""

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if self.already_saved:
            return
        log_dir = trainer.log_dir  # broadcast from rank 0 by Lightning
        if log_dir is None:  # pragma: no cover - Lightning always falls back to default_root_dir
            self.already_saved = True
            return
        path = None
        if trainer.is_global_zero:
            path = free_config_path(Path(log_dir), self.config_filename)
        path = trainer.strategy.broadcast(path)
        if trainer.is_global_zero:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.name != self.config_filename:
                rank_zero_info(
                    f"{path.parent / self.config_filename} exists; saved this run's config as {path}"
                )
            self.parser.save(self.config, str(path), overwrite=False, multifile=self.multifile)
            self.save_config(trainer, pl_module, stage)
            self.already_saved = True
        self.already_saved = trainer.strategy.broadcast(self.already_saved)


class CLI(LightningCLI):
    """The LightningCLI subclass :func:`run_cli` builds on (a package may pass a subclass of it
    as ``cli_class``). Class attributes set by :func:`run_cli`: ``links``, ``before_trainer``,
    ``raw_argv``."""

    links: Sequence[Link] = ()
    before_trainer: Callable[[Any], None] | None = None
    raw_argv: list[str] | None = None

    def add_arguments_to_parser(self, parser: Any) -> None:
        for link in self.links:
            source, target, *rest = link
            parser.link_arguments(source, target, **({"apply_on": rest[0]} if rest else {}))

    def parse_arguments(self, parser: Any, args: Any) -> None:
        # LightningCLI warns whenever both ``args`` and ``sys.argv[1:]`` are non-empty; we parse
        # ``args`` on purpose. sys.argv is hidden only while parsing: ddp re-runs it later.
        saved = sys.argv
        sys.argv = saved[:1]
        try:
            super().parse_arguments(parser, args)
        finally:
            sys.argv = saved

    def instantiate_trainer(self, **kwargs: Any) -> Trainer:
        hook = type(self).before_trainer
        if hook is not None:
            hook(self)
        config = self._get(self.config_init, "trainer", default={})
        if "accelerator" not in kwargs and config.get("accelerator", "auto") == "auto":
            try:
                kwargs["accelerator"] = lightning_accelerator()
                devices = lightning_devices()  # [N] only for ICLR26_DEVICE=cuda:N
                if isinstance(devices, list) and "devices" not in kwargs:
                    if config.get("devices", "auto") in ("auto", 1):
                        kwargs["devices"] = devices
            except RuntimeError as error:  # ICLR26_DEVICE names a device torch cannot see
                raise UsageError(str(error)) from error
        try:
            trainer = super().instantiate_trainer(**kwargs)
        except (TypeError, ValueError, MisconfigurationException) as error:
            # a bad Trainer option value (``--trainer.devices abc``, an unknown accelerator)
            raise UsageError(f"trainer: {error}") from error
        _check_relaunch(trainer, self.raw_argv)
        return trainer


def _check_relaunch(trainer: Trainer, raw_argv: Sequence[str] | None) -> None:
    """Refuse a multi-process launch that would re-run an unrelated ``sys.argv``.

    Lightning's ``ddp`` starts ranks > 0 by re-running ``sys.argv``; that is the same command
    only when ``main()`` was called by its console script. In-process calls (tests, notebooks)
    must run the console script in a subprocess instead."""
    from lightning.pytorch.strategies.launchers.subprocess_script import (
        _SubprocessScriptLauncher,
    )

    launcher = getattr(trainer.strategy, "launcher", None)
    if not isinstance(launcher, _SubprocessScriptLauncher) or launcher.num_processes <= 1:
        return
    if launcher.cluster_environment.creates_processes_externally or raw_argv is None:
        return
    tail = sys.argv[len(sys.argv) - len(raw_argv) :] if raw_argv else []
    if list(tail) != list(raw_argv):
        raise RuntimeError(
            f"--trainer.strategy ddp with {launcher.num_processes} processes re-runs this "
            f"process's command line {sys.argv!r}, which is not this command ({list(raw_argv)!r});"
            " run the console script (e.g. in a subprocess) instead of calling main() in-process"
        )


def _check_config_names(args: Sequence[str], shipped: Mapping[str, Path], prog: str) -> None:
    """A ``--config``/``-c`` value that looks like a file name but is neither a file nor a
    shipped config -> :class:`UsageError` naming the shipped configs."""
    for i, arg in enumerate(args):
        value = None
        if arg in ("--config", "-c") and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(("--config=", "-c=")):
            value = arg.split("=", 1)[1]
        if value is None or not _LOOKS_LIKE_NAME.match(value) or Path(value).exists():
            continue
        known = ", ".join(shipped) or "none"
        raise UsageError(
            f"--config {value}: no such file and no shipped config of that name"
            f" (shipped: {known}; `{prog} configs` lists them)"
        )


def run_cli(
    model_class: type | None,
    datamodule_class: type | None,
    argv: Sequence[str],
    *,
    package: str,
    prog: str | None = None,
    configs: str | Mapping[str, Path] = "configs",
    links: Sequence[Link] = (),
    subcommand: str | None = None,
    subclass_mode: bool = True,
    seed: int | bool = 0,
    trainer_defaults: Mapping[str, Any] | None = None,
    before_trainer: Callable[[Any], None] | None = None,
    cli_class: type[CLI] = CLI,
    parser_kwargs: Mapping[str, Any] | None = None,
    **cli_kwargs: Any,
) -> LightningCLI:
    """Run LightningCLI on ``argv`` (``[SUBCOMMAND, *options]``) and return the CLI object.

    ``package``: the importable package (``"rf_matid"``) whose ``configs`` folder holds the
    shipped YAMLs (or pass ``configs`` as a ``{name: path}`` mapping); ``prog``: the command name
    in messages and ``--help`` (default: ``package`` with ``-``). ``links``: argument links
    ``(source, target[, apply_on])``. ``subcommand``: prepended to ``argv`` (for commands that
    expose one stage, e.g. ``"fit"``). ``subclass_mode``: the classes are base classes and
    ``class_path`` picks the concrete one. ``seed``: ``seed_everything`` default.
    ``trainer_defaults``: Trainer argument defaults. ``before_trainer(cli)``: called once the model
    and data module exist, before the Trainer (e.g. to validate the data before Lightning's
    start-up lines). ``cli_kwargs`` go to :class:`LightningCLI` (e.g. ``run=False``).

    Raises :class:`UsageError` for a parse error or an unknown config name; everything else the
    model, data module or Trainer raises propagates unchanged. See the module docstring.
    """
    from jsonargparse import ArgumentError

    logging.getLogger(_SEED_LOGGER).setLevel(logging.WARNING)
    prog = prog or package.replace("_", "-")
    shipped = shipped_configs(package, configs) if isinstance(configs, str) else dict(configs)
    raw = list(argv)
    args = [*([subcommand] if subcommand else []), *resolve_config_names(raw, shipped)]
    _check_config_names(args, shipped, prog)
    cls = type(
        cli_class.__name__,
        (cli_class,),
        {
            "links": tuple(links),
            "before_trainer": staticmethod(before_trainer) if before_trainer else None,
            "raw_argv": raw,
        },
    )
    kwargs: dict[str, Any] = {"prog": prog, "exit_on_error": False, **(parser_kwargs or {})}
    try:
        return cls(
            model_class,
            datamodule_class,
            subclass_mode_model=subclass_mode,
            subclass_mode_data=subclass_mode,
            seed_everything_default=seed,
            trainer_defaults=dict(trainer_defaults or {}),
            parser_kwargs=kwargs,
            save_config_callback=RunDirSaveConfig,
            save_config_kwargs={"overwrite": False},
            args=args,
            **cli_kwargs,
        )
    except ArgumentError as error:
        head = f"{args[0]}: " if args and not args[0].startswith("-") else ""
        raise UsageError(f"{head}{error}") from error


@contextlib.contextmanager
def quiet_lightning() -> Iterator[None]:
    """Lightning's INFO lines ("GPU available", "Seed set to") and its few-workers / pytree
    warnings off inside the block; the previous levels are restored on exit."""
    loggers = [logging.getLogger(name) for name in (*_LIGHTNING_LOGGERS, _SEED_LOGGER)]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*does not have many workers.*")
            warnings.filterwarnings("ignore", message=".*isinstance.treespec, LeafSpec.*")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def quiet_trainer(*, callbacks: Sequence[Callback] = (), **overrides: Any) -> Trainer:
    """A ``Trainer`` for experiments and benchmarks: no logger, checkpoints, progress bar, model
    summary or sanity validation; one device chosen by :func:`iclr26_common.device.
    lightning_accelerator` (``accelerator=`` overrides). Any Trainer argument overrides these."""
    settings: dict[str, Any] = {
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
        **overrides,
    }
    if "accelerator" not in settings:
        settings["accelerator"] = lightning_accelerator()
        settings.setdefault("devices", lightning_devices())  # [N] for ICLR26_DEVICE=cuda:N
    settings.setdefault("devices", 1)
    with quiet_lightning():  # no "GPU available: ..." lines
        return Trainer(callbacks=list(callbacks), **settings)
