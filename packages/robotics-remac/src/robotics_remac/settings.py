"""Grouped settings of the LightningModules (:mod:`robotics_remac.lit_module`).

Each group is a frozen dataclass, one documented field per line, checked in ``__post_init__``
(a bad value is a one-line ``ValueError`` naming the field). LightningCLI parses them from the
nested YAML of the shipped configs, e.g.::

    model:
      class_path: robotics_remac.lit_module.RemacModule
      init_args:
        sizes: {channels: 32, hidden: 64, token_hidden: 16, depth: 2}
        lora: {rank: 4, alpha: 8.0, dropout: 0.1, use_mask: true}
        curriculum: {enabled: true, max_delay: 4, epochs: 32, p_start: 1.0, p_end: 0.2}
        loss: {use_delta: true, use_keep: true, weight: 0.01}
        optim: {lr: 0.001, weight_decay: 0.01, warmup_steps: 50}
        ema: {decay: 0.999}

The data's shapes (``horizon``, ``obs_dim``, ``action_dim``) stay flat arguments of the modules:
the CLI links them from the data module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any, TypeVar

from iclr26_common.settings import check_non_negative, check_positive, check_probability

T = TypeVar("T")

__all__ = [
    "CurriculumSettings",
    "EMASettings",
    "LoRASettings",
    "LossSettings",
    "OptimSettings",
    "PolicySizes",
    "TrainingTimeRTCSettings",
    "as_group",
    "plain_hparams",
]


@dataclass(frozen=True)
class PolicySizes:
    """Widths of the :class:`~robotics_remac.model.FlowPolicy` mixer (upstream 256/512/64/4)."""

    channels: int = 64  # per-action token width C
    hidden: int = 128  # channel-mixing MLP width
    token_hidden: int = 32  # token-mixing MLP width
    depth: int = 2  # number of mixer blocks

    def __post_init__(self) -> None:
        check_positive(self, "channels", "hidden", "token_hidden", "depth")


@dataclass(frozen=True)
class OptimSettings:
    """AdamW with a linear warm-up of the learning rate (then constant)."""

    lr: float = 1e-3  # AdamW learning rate after warm-up
    weight_decay: float = 1e-2  # AdamW decoupled weight decay
    warmup_steps: int = 100  # optimiser steps of the linear warm-up

    def __post_init__(self) -> None:
        check_positive(self, "lr")
        check_non_negative(self, "weight_decay", "warmup_steps")


@dataclass(frozen=True)
class TrainingTimeRTCSettings:
    """Training-time RTC (arXiv 2512.05964) of the base policy: a clean prefix of ``d`` actions."""

    enabled: bool = False  # train with a clean prefix d ~ U{0..max_delay}, loss on the rest only
    max_delay: int = 4  # largest prefix length d (must be < horizon)

    def __post_init__(self) -> None:
        check_non_negative(self, "max_delay")


@dataclass(frozen=True)
class LoRASettings:
    """REMAC's masked LoRA on every mixer linear (paper Sec. 3.2; upstream rank 4, alpha 8)."""

    rank: int = 4  # rank r of the update B A
    alpha: float = 8.0  # scale alpha (the update is (alpha / r) B A)
    dropout: float = 0.1  # dropout on the LoRA input
    use_mask: bool = True  # mask-conditioned LoRA (False: the LoRA-only ablation)

    def __post_init__(self) -> None:
        check_positive(self, "rank", "alpha")
        check_probability(self, "dropout")


@dataclass(frozen=True)
class CurriculumSettings:
    """Delays of the REMAC finetune and its curriculum (paper Sec. 3.2, upstream train_remac)."""

    enabled: bool = (
        True  # delay curriculum + self-sampled stale prefix (False: gamma = 1, d from 0)
    )
    max_delay: int = 4  # largest delay d sampled per chunk (also when enabled is False)
    epochs: int = 32  # upstream num_epochs: stages, replayed over the fraction of steps done
    p_start: float = 1.0  # probability of the ground-truth prefix at the start of training
    p_end: float = 0.2  # ... and at the end (annealed linearly)

    def __post_init__(self) -> None:
        check_non_negative(self, "max_delay")
        check_positive(self, "epochs")
        check_probability(self, "p_start", "p_end")


@dataclass(frozen=True)
class LossSettings:
    """REMAC's loss ``w·L_m + w·L_Δ + w·L_keep`` (see :class:`~robotics_remac.lit_module.RemacModule`)."""

    use_delta: bool = True  # add L_delta (residual to the frozen backbone on generated tokens)
    use_keep: bool = True  # add L_keep (LoRA leaves the committed prefix's velocity alone)
    weight: float = 0.01  # w, the weight of every term
    charbonnier_eps: float = 1e-3  # eps of the Charbonnier penalty of L_m

    def __post_init__(self) -> None:
        check_positive(self, "weight", "charbonnier_eps")


@dataclass(frozen=True)
class EMASettings:
    """Exponential moving average of the LoRA weights, swapped in at the end of fit."""

    decay: float = 0.999  # upstream EMA_DECAY

    def __post_init__(self) -> None:
        check_probability(self, "decay")


def plain_hparams(hparams: Mapping[str, Any]) -> dict[str, Any]:
    """``hparams`` with every setting group as a plain dict (``dataclasses.asdict``), as a
    checkpoint stores them: readable with ``torch.load(..., weights_only=True)``, which refuses
    arbitrary classes."""
    return {k: asdict(v) if is_dataclass(v) else v for k, v in hparams.items()}


def as_group(cls: type[T], value: T | Mapping[str, Any], name: str) -> T:
    """``value`` as the settings group ``cls``: the group itself, or the plain dict a checkpoint
    stores (:func:`plain_hparams`), e.g. when ``load_from_checkpoint`` rebuilds a module from its
    saved hyperparameters. Anything else, or a dict with keys the group lacks, is a one-line
    ``ValueError`` naming ``name``."""
    if isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(cls.__dataclass_fields__))  # type: ignore[attr-defined]
        if unknown:
            raise ValueError(f"{name}: unknown field(s) {unknown} for {cls.__name__}")
        return cls(**value)
    raise ValueError(f"{name} must be a {cls.__name__} or a mapping, got {type(value).__name__}")
