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
- ``--ckpt_path`` is checked before Lightning reads it (:func:`check_checkpoint_file`, with
  ``weights_only=True``; the Trainer reads it with ``weights_only=True`` too, and
  ``--weights_only false`` is refused): a missing file or a folder, a file that is not a
  readable checkpoint, a plain Lightning checkpoint that names no model (no :data:`MODEL_KEY`
  stamp of a fit here, no ``_class_path``), a checkpoint of another package's model
  (``robotics-remac test --ckpt_path <an rf-matid checkpoint>``) or of a model class other than
  the command's, ``--ckpt_path last`` with no last checkpoint (Lightning would train from
  scratch), or resuming a fit with ``--trainer.max_epochs`` at or below the epochs the checkpoint
  already trained: one line naming the option (exit 2).
- Without a logger, the config is saved into ``--trainer.default_root_dir`` only when one was
  given: a run never writes ``config.yaml`` into the current folder on its own.
- ``predict`` with ``run_cli(predict_writer=...)`` (a :class:`BatchPredictionWriter`) writes
  its files into the run folder under the workspace rule (:func:`check_prediction_file`): a file
  an earlier predict wrote there is refused in one line naming it and ``--overwrite``, before any
  model or data is loaded when the run folder is known from the options (no logger), and in any
  case before the first batch; ``predict --overwrite`` replaces it (atomically, mode 0644).
  Under DDP the writer's files are written once, by rank 0, with every rank's predictions
  (:meth:`BatchPredictionWriter.on_predict_epoch_end`).

Importing this module imports torch and Lightning: import it inside the command that needs it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.cli import LightningCLI, SaveConfigCallback
from lightning.pytorch.utilities.rank_zero import rank_zero_info

from iclr26_common.checkpoints import MODEL_KEY, check_checkpoint_file
from iclr26_common.cli_support import (
    UsageError,
    check_config_file,
    refuse_non_finite,
    resolve_config_names,
    shipped_configs,
)
from iclr26_common.device import lightning_accelerator, lightning_devices
from iclr26_common.outputs import check_out_file, check_out_folder, overwrite_help
from iclr26_common.prediction import BatchPredictionWriter, check_free, check_prediction_file
from iclr26_common.trainer import (
    _SEED_LOGGER,
    PYTREE_DEPRECATION,
    InterruptedFit,
    ModelStamp,
    quiet_lightning,
    quiet_trainer,
)

__all__ = [
    "CLI",
    "MODEL_KEY",
    "BatchPredictionWriter",
    "InterruptedFit",
    "ModelStamp",
    "RunDirSaveConfig",
    "check_checkpoint_file",
    "check_free",
    "check_prediction_file",
    "check_resume",
    "free_config_path",
    "quiet_lightning",
    "quiet_trainer",
    "run_cli",
]

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
        if trainer.logger is None and not _root_dir_given(self.config):
            # no logger and no --trainer.default_root_dir: the run has no folder of its own, and
            # the current folder is the user's: save the config nowhere
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


def _root_dir_given(config: Any) -> bool:
    """Whether the resolved config names a ``trainer.default_root_dir`` (top level or under the
    subcommand)."""

    def get(node: Any, *keys: str) -> Any:
        for key in keys:
            try:
                node = node[key]
            except (KeyError, TypeError, IndexError):
                return None
        return node

    for prefix in ((), *(((name,),) for name in ("fit", "validate", "test", "predict"))):
        if get(config, *prefix, "trainer", "default_root_dir"):  # type: ignore[arg-type]
            return True
    return False


def check_resume(
    ckpt_path: str,
    payload: dict[str, Any] | None,
    *,
    subcommand: str,
    trainer: Trainer | None = None,
    max_epochs: int | None = None,
) -> None:
    """Refuse what Lightning would do silently or with a traceback: ``--ckpt_path last`` when
    the run's checkpoint folder holds no last checkpoint (it would train from scratch), and a
    ``fit`` resumed with ``--trainer.max_epochs`` at or below the epochs the checkpoint already
    trained (nothing to train)."""
    if ckpt_path == "last":
        if trainer is None:
            return  # needs the trainer's checkpoint folder
        found: set[str] = set()
        for callback in getattr(trainer, "checkpoint_callbacks", []) or []:
            finder = getattr(callback, "_find_last_checkpoints", None)
            if finder is not None:
                with contextlib.suppress(Exception):
                    found |= set(finder(trainer))
        if not found:
            raise UsageError(
                "--ckpt_path last: no last checkpoint in this run's checkpoint folder (Lightning "
                "would start from scratch); give a checkpoint file or leave --ckpt_path out"
            )
        return
    done = (payload or {}).get("epoch")
    if max_epochs is None:
        max_epochs = getattr(trainer, "max_epochs", None)
    if subcommand == "fit" and isinstance(done, int) and max_epochs not in (None, -1):
        if done + 1 >= max_epochs:  # the saved epoch index is 0-based
            raise UsageError(
                f"--trainer.max_epochs {max_epochs}: {ckpt_path} already trained {done + 1} "
                "epoch(s); give more epochs to resume training"
            )


class CLI(LightningCLI):
    """The LightningCLI subclass :func:`run_cli` builds on (a package may pass a subclass of it
    as ``cli_class``). Class attributes set by :func:`run_cli`: ``links``, ``before_trainer``,
    ``raw_argv``, ``package``, ``subcommand_flags``, ``fit_outputs``, ``predict_writer``."""

    links: Sequence[Link] = ()
    before_trainer: Callable[[Any], None] | None = None
    raw_argv: list[str] | None = None
    package: str = ""
    subcommand_flags: Mapping[str, Mapping[str, Mapping[str, Any]]] = MappingProxyType({})
    fit_outputs: Mapping[str, str] = MappingProxyType({})
    predict_writer: BatchPredictionWriter | None = None
    _ckpt: tuple[str, dict[str, Any] | None] | None = None

    def _prepare_subcommand_parser(self, klass: type, subcommand: str, **kwargs: Any) -> Any:
        # LightningCLI builds each subcommand's parser here (a private hook, so it is used in
        # this one place): run_cli's ``subcommand_flags`` are added to it
        parser = super()._prepare_subcommand_parser(klass, subcommand, **kwargs)
        for flag, options in self.subcommand_flags.get(subcommand, {}).items():
            parser.add_argument(flag, **options)
        return parser

    def _ckpt_path(self) -> str | None:
        subcommand = self.config.get("subcommand") if self.config is not None else None
        node = self.config.get(subcommand) if subcommand else None
        value = node.get("ckpt_path") if node is not None else None
        return str(value) if value else None

    def _parse_ckpt_path(self) -> None:
        # checked before LightningCLI unpickles it and takes its model class from it
        ckpt_path = self._ckpt_path()
        if ckpt_path and self.package:
            subcommand = str(self.config.get("subcommand"))
            if self.config[subcommand].get("weights_only") is False:
                raise UsageError(
                    "--weights_only false: checkpoints are read with weights_only=True only "
                    "(no code in a checkpoint runs)"
                )
            model_class = self._model_class if isinstance(self._model_class, type) else None
            payload = check_checkpoint_file(
                ckpt_path, package=self.package, model_class=model_class
            )
            self._ckpt = (ckpt_path, payload)
        super()._parse_ckpt_path()

    def before_instantiate_classes(self) -> None:
        # run_cli's ``fit_outputs`` are checked before any class is built (a model loaded, a
        # minute trained), whether the value came from the command line or a --config YAML
        subcommand = self.config.get("subcommand") if self.config is not None else None
        if subcommand == "predict" and self.predict_writer is not None:
            self._check_predict_outputs()
        if subcommand != "fit" or not self.fit_outputs:
            return
        node = self.config[subcommand]
        overwrite = bool(node.get("overwrite", False))
        for key, kind in self.fit_outputs.items():
            value = node.get(key)
            if value in (None, "", "null", "None"):
                continue
            check = check_out_file if kind == "file" else check_out_folder
            check(str(value), option=f"--{key}", overwrite=overwrite)

    def _check_predict_outputs(self) -> None:
        """``predict --overwrite`` goes to the writer; without a logger (or with
        ``fast_dev_run``, whose logger has no folder) the run folder is ``default_root_dir`` (the
        working directory by default), so an earlier predict's files there are refused before
        any class is built. With a logger the run folder is only known to the Trainer: the
        writer's :meth:`~BatchPredictionWriter.setup` checks it."""
        import os

        writer = self.predict_writer
        assert writer is not None
        node = self.config["predict"]
        writer.overwrite = bool(node.get("overwrite", False))
        trainer = node.get("trainer") or {}
        if trainer.get("logger") in (False, []) or trainer.get("fast_dev_run"):
            root = Path(trainer.get("default_root_dir") or os.getcwd())
            for name in writer.filenames:
                check_prediction_file(root / name, overwrite=writer.overwrite)

    def _prepare_subcommand_kwargs(self, subcommand: str) -> dict[str, Any]:
        # the Trainer reads --ckpt_path again: with weights_only=True, whatever torch's default
        kwargs = super()._prepare_subcommand_kwargs(subcommand)
        if kwargs.get("ckpt_path") and "weights_only" in self._subcommand_method_arguments.get(
            subcommand, ()
        ):
            kwargs["weights_only"] = True
        return kwargs

    def _run_subcommand(self, subcommand: str) -> None:
        if self._ckpt is not None:
            check_resume(*self._ckpt, subcommand=subcommand, trainer=self.trainer)
        super()._run_subcommand(subcommand)

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
        if self._ckpt is not None:  # before the Trainer's start-up lines
            subcommand = str(self.config.get("subcommand") or "")
            check_resume(*self._ckpt, subcommand=subcommand, max_epochs=config.get("max_epochs"))
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
        except (TypeError, ValueError, MisconfigurationException, ImportError) as error:
            # a bad Trainer option value (``--trainer.devices abc``, ``--trainer.accelerator
            # cuda`` without CUDA, ``tpu`` without torch_xla): one line naming the option
            raise UsageError(f"{_trainer_option(error, config)}: {error}") from error
        _check_relaunch(trainer, self.raw_argv)
        trainer.callbacks.extend([ModelStamp(), InterruptedFit()])
        if self.predict_writer is not None and self.subcommand == "predict":
            # first: its setup refuses an earlier file before the config is saved beside it
            trainer.callbacks.insert(0, self.predict_writer)
        return trainer


#: Trainer options whose bad values Lightning reports when the Trainer is built, in the order
#: their names are looked for in its message (its devices message also names the accelerator).
_TRAINER_OPTIONS = ("strategy", "devices", "num_nodes", "precision", "accelerator", "plugins")


def _trainer_option(error: BaseException, config: Mapping[str, Any]) -> str:
    """``--trainer.OPTION VALUE`` for the option a Trainer error is about (``trainer`` when
    the message names none): ``--trainer.accelerator cuda`` for Lightning's "`CUDAAccelerator`
    can not run on your system", an ImportError of ``torch_xla`` for ``tpu``."""
    message = str(error).lower()
    if isinstance(error, ImportError) and config.get("accelerator") not in (None, "auto"):
        return f"--trainer.accelerator {config.get('accelerator')}"
    for name in _TRAINER_OPTIONS:
        if re.search(rf"\b{name}\b", message) and name in config:
            return f"--trainer.{name} {config[name]}"
    return "trainer"


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
        if value is None or not _LOOKS_LIKE_NAME.match(value):
            continue
        if Path(value).exists():
            check_config_file(value)
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
    subcommand_flags: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    fit_outputs: Mapping[str, str] | None = None,
    predict_writer: Callable[[], BatchPredictionWriter] | None = None,
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
    start-up lines). ``subcommand_flags``: options a subcommand takes beyond the model, data and
    Trainer ones, ``{subcommand: {"--flag": add_argument keywords}}`` (e.g. ``predict
    --overwrite``); their values are in ``cli.config[subcommand]``. ``fit_outputs``: the config
    keys of paths ``fit`` writes to, ``{"model.init_args.save_dir": "folder"}`` (or ``"file"``),
    checked before any class is built by :func:`iclr26_common.outputs.check_out_folder` /
    ``check_out_file`` (one line naming ``--KEY``; a value from a ``--config`` YAML too); ``fit``
    then takes ``--overwrite``. ``predict_writer``: builds the package's
    :class:`BatchPredictionWriter` (called only for ``predict``), which the predict Trainer gets
    as a callback; ``predict`` then takes ``--overwrite`` and its files follow the workspace rule
    (:func:`check_prediction_file`; checked before any class is built when the run folder is
    ``default_root_dir``). Every number on the command line must be finite
    (:func:`iclr26_common.cli_support.refuse_non_finite`). ``cli_kwargs`` go to
    :class:`LightningCLI` (e.g. ``run=False``).

    Raises :class:`UsageError` for a parse error or an unknown config name; everything else the
    model, data module or Trainer raises propagates unchanged. See the module docstring.
    """
    from jsonargparse import ArgumentError

    logging.getLogger(_SEED_LOGGER).setLevel(logging.WARNING)
    prog = prog or package.replace("_", "-")
    shipped = shipped_configs(package, configs) if isinstance(configs, str) else dict(configs)
    raw = list(argv)
    refuse_non_finite(raw)
    args = [*([subcommand] if subcommand else []), *resolve_config_names(raw, shipped)]
    _check_config_names(args, shipped, prog)
    writer = predict_writer() if predict_writer is not None and args[:1] == ["predict"] else None
    flags = _with_overwrite(subcommand_flags, fit_outputs)
    if predict_writer is not None and "--overwrite" not in flags.get("predict", {}):
        files = ", ".join(writer.filenames) if writer is not None else "files"
        flags["predict"] = {
            **flags.get("predict", {}),
            "--overwrite": {
                "action": "store_true",
                "help": f"replace the {files} an earlier predict wrote into the run folder",
            },
        }
    cls = type(
        cli_class.__name__,
        (cli_class,),
        {
            "links": tuple(links),
            "before_trainer": staticmethod(before_trainer) if before_trainer else None,
            "raw_argv": raw,
            "package": package,
            "subcommand_flags": flags,
            "fit_outputs": dict(fit_outputs or {}),
            "predict_writer": writer,
        },
    )
    kwargs: dict[str, Any] = {"prog": prog, "exit_on_error": False, **(parser_kwargs or {})}
    try:
        with warnings.catch_warnings():  # Lightning's pytree deprecation, inside Lightning
            warnings.filterwarnings("ignore", message=PYTREE_DEPRECATION)
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


def _with_overwrite(
    flags: Mapping[str, Mapping[str, Mapping[str, Any]]] | None,
    fit_outputs: Mapping[str, str] | None,
) -> dict[str, Mapping[str, Mapping[str, Any]]]:
    """``flags`` with ``fit --overwrite`` added when ``fit`` writes ``fit_outputs``."""
    out = dict(flags or {})
    if fit_outputs and "--overwrite" not in out.get("fit", {}):
        names = ", ".join(f"--{key}" for key in fit_outputs)
        out["fit"] = {
            **out.get("fit", {}),
            "--overwrite": {
                "action": "store_true",
                "help": overwrite_help(names),
            },
        }
    return out
