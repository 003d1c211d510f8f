"""Grouped settings of :class:`medimg_gfscreen.lit_module.GFScreenModule`.

Each group is a frozen dataclass, one documented field per line, checked in ``__post_init__``
(a bad value is a one-line ``ValueError`` naming the field). LightningCLI parses them from the
nested YAML of the shipped configs, e.g.::

    model:
      class_path: medimg_gfscreen.lit_module.GFScreenModule
      init_args:
        focus: {arch: unet, unet_channels: [8, 16, 32, 64]}
        glance: {backbone: resnet18, widths: [8, 16, 32, 64], conv1_stride: 2}
        objective: {group_by: case, reward: detection}
        optim: {lr: 1.0e-3}
        inference: {overlap: 0.5, threshold: 0.9}

The data's ``roi_size``, ``num_samples`` and ``spacing`` stay flat arguments of the module: the CLI
links them from the data module. Defaults are the paper's / upstream's (Luffy03/GF-Screen).

Checkpoints written before the grouping store the flat hyperparameters (``focus_arch``,
``glance_widths``, ``lr``, ``threshold``, ...); :func:`module_kwargs` reads both shapes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

from iclr26_common.settings import check_non_negative, check_one_of, check_positive
from medimg_gfscreen.constants import (
    DEFAULT_OVERLAP,
    GATE_THRESHOLD,
    GLANCE_LOSS_WEIGHT,
    LEARNING_RATE,
    PAPER_FEATURE_SIZE,
    WEIGHT_DECAY,
)
from medimg_gfscreen.model import (
    FOCUS_ARCHS,
    GLANCE_BACKBONES,
    GLANCE_NORMS,
    PATCH_MERGINGS,
    REWARDS,
)

__all__ = [
    "DEFAULT_FOCUS",
    "DEFAULT_GLANCE",
    "DEFAULT_INFERENCE",
    "DEFAULT_OBJECTIVE",
    "DEFAULT_OPTIM",
    "FLAT_KEYS",
    "GROUPS",
    "FocusSettings",
    "GlanceSettings",
    "InferenceSettings",
    "ObjectiveSettings",
    "OptimSettings",
    "module_kwargs",
    "plain_hparams",
]

GROUP_BY = ("case", "batch")  # ObjectiveSettings.group_by


def _widths(owner: object, name: str, n: int, at_least: bool = False) -> None:
    """``name`` holds ``n`` (or, ``at_least``, ``n`` or more) positive integers; stored as a
    tuple (a frozen, hashable field)."""
    values = tuple(getattr(owner, name))
    count = len(values) >= n if at_least else len(values) == n
    if not count or not all(isinstance(v, int) and v > 0 for v in values):
        many = f"{n} or more" if at_least else str(n)
        raise ValueError(
            f"{type(owner).__name__}.{name} must be {many} positive integers, got {list(values)}"
        )
    object.__setattr__(owner, name, values)


@dataclass(frozen=True)
class FocusSettings:
    """The Focus segmenter (:func:`medimg_gfscreen.model.build_focus`)."""

    arch: str = "swin_unetr"  # swin_unetr (paper) or unet (CPU scale)
    feature_size: int = PAPER_FEATURE_SIZE  # SwinUNETR width (paper 48)
    swin_depths: tuple[int, ...] = (2, 2, 2, 2)  # SwinUNETR stage depths
    unet_channels: tuple[int, ...] = (16, 32, 64, 128)  # UNet widths when arch is unet
    patch_merging: str = "monai"  # monai, or legacy (MONAI <= 1.4, official checkpoints)

    def __post_init__(self) -> None:
        check_one_of(self, "arch", FOCUS_ARCHS)
        check_one_of(self, "patch_merging", PATCH_MERGINGS)
        check_positive(self, "feature_size")
        _widths(self, "swin_depths", 4)
        _widths(self, "unet_channels", 2, at_least=True)


@dataclass(frozen=True)
class GlanceSettings:
    """The Glance classifier (:class:`medimg_gfscreen.model.Glance`)."""

    backbone: str = "resnet18"  # resnet18 (paper) or resnet10
    widths: tuple[int, ...] = (64, 128, 256, 512)  # ResNet stage widths
    conv1_stride: int = 1  # stem stride (upstream 1)
    # batch (upstream) or group / group_instance_stem (the same function in train and eval mode;
    # group_instance_stem: the stem's GroupNorm has one channel per group)
    norm: str = "batch"

    def __post_init__(self) -> None:
        check_one_of(self, "backbone", GLANCE_BACKBONES)
        check_one_of(self, "norm", GLANCE_NORMS)
        _widths(self, "widths", 4)
        check_positive(self, "conv1_stride")


@dataclass(frozen=True)
class ObjectiveSettings:
    """The training objective ``DiceCE + glance_weight * CE + rl_weight * L_RL``."""

    group_by: str = "case"  # advantages per CT (case, the paper) or over the batch (upstream)
    reward: str = "detection"  # Focus reward: detection (paper) or dice (ablation)
    rl_weight: float = 1.0  # weight of the RL loss (0: the CE-only Glance ablation)
    glance_weight: float = GLANCE_LOSS_WEIGHT  # weight of the Glance CE (upstream 0.1)
    train_focus: bool = True  # False keeps Focus fixed (train the Glance against a given Focus)
    update_epochs: int = 1  # refresh the frozen old policy every this many epochs

    def __post_init__(self) -> None:
        check_one_of(self, "group_by", GROUP_BY)
        check_one_of(self, "reward", REWARDS)
        check_non_negative(self, "rl_weight", "glance_weight")
        check_positive(self, "update_epochs")


@dataclass(frozen=True)
class OptimSettings:
    """Two AdamW optimisers; the segmentation one on a linear-warm-up cosine schedule."""

    lr: float = LEARNING_RATE  # AdamW learning rate of both optimisers (upstream 3e-4)
    weight_decay: float = WEIGHT_DECAY  # AdamW weight decay (upstream 1e-5)
    warmup_epochs: int = 1  # epochs of linear warm-up of the segmentation lr (upstream 1)
    cosine_epochs: int | None = None  # cosine horizon in epochs (None: the trainer's max_epochs)

    def __post_init__(self) -> None:
        check_positive(self, "lr")
        check_non_negative(self, "weight_decay", "warmup_epochs")
        if self.cosine_epochs is not None:
            check_positive(self, "cosine_epochs")


@dataclass(frozen=True)
class InferenceSettings:
    """Glance-then-Focus inference on whole volumes and its metrics."""

    overlap: float = DEFAULT_OVERLAP  # tile overlap of the inference grid (upstream 0.75)
    threshold: float = GATE_THRESHOLD  # gate: a tile goes to Focus when p > threshold (< 0: all)
    sw_batch_size: int = 4  # tiles per inference batch
    nsd_tolerance_mm: float = 2.0  # surface-Dice tolerance

    def __post_init__(self) -> None:
        if not 0.0 <= self.overlap < 1.0:
            raise ValueError(f"InferenceSettings.overlap must be in [0, 1), got {self.overlap!r}")
        check_positive(self, "sw_batch_size")
        check_non_negative(self, "nsd_tolerance_mm")


DEFAULT_FOCUS = FocusSettings()
DEFAULT_GLANCE = GlanceSettings()
DEFAULT_OBJECTIVE = ObjectiveSettings()
DEFAULT_OPTIM = OptimSettings()
DEFAULT_INFERENCE = InferenceSettings()

#: argument name of GFScreenModule -> its settings class
GROUPS: dict[str, type] = {
    "focus": FocusSettings,
    "glance": GlanceSettings,
    "objective": ObjectiveSettings,
    "optim": OptimSettings,
    "inference": InferenceSettings,
}
#: the flat hyperparameter names before the grouping -> (group, field)
FLAT_KEYS: dict[str, tuple[str, str]] = {
    "focus_arch": ("focus", "arch"),
    "feature_size": ("focus", "feature_size"),
    "swin_depths": ("focus", "swin_depths"),
    "unet_channels": ("focus", "unet_channels"),
    "focus_patch_merging": ("focus", "patch_merging"),
    "glance_backbone": ("glance", "backbone"),
    "glance_widths": ("glance", "widths"),
    "glance_conv1_stride": ("glance", "conv1_stride"),
    "glance_norm": ("glance", "norm"),
    "group_by": ("objective", "group_by"),
    "reward": ("objective", "reward"),
    "rl_weight": ("objective", "rl_weight"),
    "glance_weight": ("objective", "glance_weight"),
    "train_focus": ("objective", "train_focus"),
    "update_epochs": ("objective", "update_epochs"),
    "lr": ("optim", "lr"),
    "weight_decay": ("optim", "weight_decay"),
    "warmup_epochs": ("optim", "warmup_epochs"),
    "cosine_epochs": ("optim", "cosine_epochs"),
    "overlap": ("inference", "overlap"),
    "threshold": ("inference", "threshold"),
    "sw_batch_size": ("inference", "sw_batch_size"),
    "nsd_tolerance_mm": ("inference", "nsd_tolerance_mm"),
}
FLAT_ARGUMENTS = ("roi_size", "num_samples", "spacing")  # flat in both shapes


def _fields(value: Any) -> dict[str, Any]:
    """A group given as a settings instance or a plain mapping -> its fields as a dict."""
    return asdict(value) if is_dataclass(value) else dict(value)


def module_kwargs(hparams: Mapping[str, Any]) -> dict[str, Any]:
    """``GFScreenModule`` arguments from stored hyperparameters in either shape: grouped (this
    code: ``{focus: {...}, glance: {...}, ...}``, as dicts or settings) or flat (checkpoints
    written before the grouping, and :func:`medimg_gfscreen.official.from_official_state_dict`).
    A flat key given next to its group overrides that field; keys of neither shape (such as
    LightningCLI's ``_class_path``) are ignored."""
    groups: dict[str, dict[str, Any]] = {}
    for name, value in hparams.items():
        if name in GROUPS and value is not None:
            groups.setdefault(name, {}).update(_fields(value))
    for name, value in hparams.items():
        if name in FLAT_KEYS:
            group, field = FLAT_KEYS[name]
            groups.setdefault(group, {})[field] = value
    out: dict[str, Any] = {k: hparams[k] for k in FLAT_ARGUMENTS if k in hparams}
    for name, fields in groups.items():
        known = {f.name for f in dataclasses.fields(GROUPS[name])}
        out[name] = GROUPS[name](**{k: v for k, v in fields.items() if k in known})
    return out


def plain_hparams(hparams: Mapping[str, Any]) -> dict[str, Any]:
    """``hparams`` with every settings group as a plain dict (tuples as lists), as a checkpoint
    and the exported weights store them: readable with ``torch.load(..., weights_only=True)``,
    which refuses arbitrary classes."""

    def plain(value: Any) -> Any:
        if is_dataclass(value):
            value = asdict(value)
        if isinstance(value, Mapping):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, tuple):
            return list(value)
        return value

    return {k: plain(v) for k, v in hparams.items()}
