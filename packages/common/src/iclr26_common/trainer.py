"""A quiet ``Trainer`` for experiments and benchmarks, and the callbacks every iclr26 Trainer
has: :class:`ModelStamp` (the model's import path in every checkpoint) and
:class:`InterruptedFit` (Ctrl-C during a fit ends as ``PROG: interrupted``, status 130).
:mod:`iclr26_common.lightning` re-exports every name.

Importing this module imports torch and Lightning: import it inside the command that needs it.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer

from iclr26_common.checkpoints import MODEL_KEY
from iclr26_common.cli_support import INTERRUPTED
from iclr26_common.device import lightning_accelerator, lightning_devices

__all__ = ["InterruptedFit", "ModelStamp", "quiet_lightning", "quiet_trainer"]

#: The loggers whose INFO lines ("Seed set to 0", "GPU available: ...") :func:`quiet_lightning`
#: raises to WARNING.
_LIGHTNING_LOGGERS = ("lightning.pytorch", "lightning.fabric", "lightning_fabric")
_SEED_LOGGER = "lightning.fabric.utilities.seed"

#: Lightning's own deprecation warning of torch's pytree API (``lightning/pytorch/utilities/
#: _pytree.py``: "`isinstance(treespec, LeafSpec)` is deprecated"), raised inside Lightning on
#: every fit/predict with torch >= 2.9: nothing a user can act on, so no command prints it.
PYTREE_DEPRECATION = r".*isinstance\(treespec, LeafSpec\).*"


class ModelStamp(Callback):
    """Writes the LightningModule's import path into every checkpoint (``checkpoint[MODEL_KEY]``),
    so :func:`check_checkpoint_file` can name the package a checkpoint belongs to even when the
    model was not given in subclass mode (no ``_class_path`` among its hyper-parameters)."""

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        cls = type(pl_module)
        checkpoint[MODEL_KEY] = f"{cls.__module__}.{cls.__qualname__}"


class InterruptedFit(Callback):
    """Marks a fit Lightning stopped on Ctrl-C (it catches ``KeyboardInterrupt``, tears down and
    calls ``sys.exit(1)``: a user saw exit status 1 and no line) by setting
    :data:`~iclr26_common.cli_support.INTERRUPTED`, so the command ends with ``PROG:
    interrupted`` and status 130 like any other Ctrl-C. Every Trainer of :func:`run_cli` and
    :func:`quiet_trainer` has it."""

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        if isinstance(exception, KeyboardInterrupt):
            INTERRUPTED.set()


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
            warnings.filterwarnings("ignore", message=PYTREE_DEPRECATION)
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def quiet_trainer(*, callbacks: Sequence[Callback] = (), **overrides: Any) -> Trainer:
    """A ``Trainer`` for experiments and benchmarks: no logger, checkpoints, progress bar, model
    summary or sanity validation (a checkpoint it is asked to save gets the :class:`ModelStamp`);
    one device chosen by :func:`iclr26_common.device.
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
        return Trainer(callbacks=[*callbacks, ModelStamp(), InterruptedFit()], **settings)
