"""The official GF-Screen checkpoint layout (Luffy03/GF-Screen, ``GF_RL_trainer.save_checkpoint``):
``{"epoch", "best_acc", "state_dict"}`` with the ``GFScreen_RL`` module's keys

* ``glance_model.backbone.*`` -- the ResNet trunk (upstream's copy of MONAI's ``ResNet`` with
  ``feed_forward=False``): our ``Glance.trunk.*``, same names;
* ``glance_model.layer.0.{weight,bias}`` -- ``Linear(512, 2)``: our ``Glance.head.*``;
* ``segmentation_model.*`` -- MONAI ``SwinUNETR(use_v2=True)``: our Focus, same names, built
  with MONAI <= 1.4's patch merging (upstream passes ``img_size``, removed in MONAI 1.5, so its
  weights were trained with the old neighbour order; ``focus_patch_merging: legacy``).

The architecture is read from the weights (SwinUNETR feature size from the patch embedding,
ResNet-10 / 18 from the number of blocks); the rest is upstream's inference setting (ROI
96x96x64 at 1x1x3 mm, overlap 0.75, gate p > 0.9).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from medimg_gfscreen.constants import DEFAULT_OVERLAP, GATE_THRESHOLD, PAPER_ROI, SPACING_MM
from medimg_gfscreen.io import GFScreenFormatError

__all__ = [
    "GLANCE_HEAD",
    "from_official_state_dict",
    "is_official_state_dict",
    "to_official_state_dict",
]

GLANCE_TRUNK = "glance_model.backbone."
GLANCE_HEAD = "glance_model.layer.0."
FOCUS = "segmentation_model."
PATCH_EMBED = "swinViT.patch_embed.proj.weight"


def is_official_state_dict(state: Mapping[str, Any]) -> bool:
    """Whether ``state`` uses the official ``GFScreen_RL`` key names."""
    return any(k.startswith(GLANCE_TRUNK) for k in state) and any(
        k.startswith(FOCUS) for k in state
    )


def from_official_state_dict(
    state: Mapping[str, torch.Tensor], where: str = "checkpoint", option: str | None = None
) -> dict:
    """Official ``state_dict`` -> ``{focus, glance, hparams}`` as :func:`medimg_gfscreen.screen.
    load_weights` returns it. Keys outside the three prefixes are an error naming them.
    ``where``: the file, named in messages after ``option`` (``--ckpt PATH: ...``) when the
    command-line option that gave it is known."""
    where = f"{option} {where}" if option else where
    focus, glance = {}, {}
    unknown = []
    for key, value in state.items():
        if key.startswith(GLANCE_TRUNK):
            glance["trunk." + key[len(GLANCE_TRUNK) :]] = value
        elif key.startswith(GLANCE_HEAD):
            glance["head." + key[len(GLANCE_HEAD) :]] = value
        elif key.startswith(FOCUS):
            focus[key[len(FOCUS) :]] = value
        else:
            unknown.append(key)
    if unknown:
        raise GFScreenFormatError(
            f"{where}: official state_dict has unexpected keys {unknown[:3]} (field 'state_dict')"
        )
    if PATCH_EMBED not in focus or "head.weight" not in glance:
        raise GFScreenFormatError(
            f"{where}: official state_dict lacks {FOCUS}{PATCH_EMBED} or {GLANCE_HEAD}weight "
            "(field 'state_dict')"
        )
    feature_size = int(focus[PATCH_EMBED].shape[0])
    backbone = "resnet18" if "trunk.layer1.1.conv1.weight" in glance else "resnet10"
    widths = [int(glance[f"trunk.layer{i}.0.conv1.weight"].shape[0]) for i in range(1, 5)]
    hparams = {
        "focus_arch": "swin_unetr",
        "feature_size": feature_size,
        "focus_patch_merging": "legacy",  # upstream needs MONAI < 1.5 (SwinUNETR img_size)
        "glance_backbone": backbone,
        "glance_widths": widths,
        "glance_conv1_stride": 1,
        "glance_norm": "batch",
        "roi_size": list(PAPER_ROI),
        "spacing": list(SPACING_MM),
        "overlap": DEFAULT_OVERLAP,
        "threshold": GATE_THRESHOLD,
    }
    return {"focus": focus, "glance": glance, "hparams": hparams}


def to_official_state_dict(focus: Mapping[str, Any], glance: Mapping[str, Any]) -> dict:
    """Our Focus / Glance state dicts -> the official ``GFScreen_RL`` key names (the inverse of
    :func:`from_official_state_dict`)."""
    out: dict[str, Any] = {}
    for key, value in glance.items():
        if key.startswith("trunk."):
            out[GLANCE_TRUNK + key[len("trunk.") :]] = value
        elif key.startswith("head."):
            out[GLANCE_HEAD + key[len("head.") :]] = value
        else:
            raise ValueError(f"glance key {key!r} is neither trunk.* nor head.*")
    for key, value in focus.items():
        out[FOCUS + key] = value
    return out
