"""GF-Screen networks and losses as plain ``nn.Module`` / functions (no Lightning).

* :class:`Glance` — MONAI 3-D ResNet (``n_input_channels=1``) whose average pooling is replaced
  by **global max pooling**, then ``Linear(C, 2)``: logits ``[N, 2]`` of "send this sub-volume
  to Focus" for sub-volumes ``[N, 1, X, Y, Z]``.
* :func:`build_focus` — the Focus segmenter: MONAI ``SwinUNETR(in_channels=1, out_channels=2,
  feature_size=48, use_v2=True)`` as in the paper, or a MONAI ``UNet`` for CPU-scale runs.
* The RL objective of the paper (upstream ``GFScreen_RL.get_RL_loss``): detection / Dice rewards,
  group-relative advantages, the PPO-clipped surrogate with a KL penalty, and the balanced
  cross-entropy of the Glance.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from medimg_gfscreen.constants import (
    ADVANTAGE_CLAMP,
    ADVANTAGE_STD_FLOOR,
    KL_BETA,
    KL_RATIO_CLAMP,
    LOG_EPS,
    PAPER_FEATURE_SIZE,
    PPO_EPSILON,
    RATIO_CLAMP,
)

__all__ = [
    "FOCUS_ARCHS",
    "GLANCE_BACKBONES",
    "GLANCE_NORMS",
    "PATCH_MERGINGS",
    "REWARDS",
    "Glance",
    "build_focus",
    "detection_reward",
    "dice_reward",
    "glance_ce_loss",
    "glance_labels",
    "group_advantages",
    "rl_loss",
]

# backbone -> (block, layers, upstream shortcut type, upstream bias_downsample)
GLANCE_BACKBONES: dict[str, tuple[str, list[int], str, bool]] = {
    "resnet10": ("basic", [1, 1, 1, 1], "B", False),
    "resnet18": ("basic", [2, 2, 2, 2], "A", True),
}
FOCUS_ARCHS = ("swin_unetr", "unet")
GLANCE_NORMS = ("batch", "group", "group_instance_stem")
GROUP_NORM_CHANNELS = 8  # channels per group when the Glance uses GroupNorm


def _batch_to_group_norm(module: nn.Module) -> None:
    """Replaces every ``BatchNorm3d(C)`` below ``module`` by ``GroupNorm(max(C // 8, 1), C)`` (in
    place; MONAI's ResNet passes its ``norm`` argument to the stem only)."""
    for name, child in module.named_children():
        if isinstance(child, nn.BatchNorm3d):
            channels = child.num_features
            groups = max(channels // GROUP_NORM_CHANNELS, 1)
            setattr(module, name, nn.GroupNorm(groups, channels))
        else:
            _batch_to_group_norm(child)


class Glance(nn.Module):
    """Glance policy: ResNet trunk -> global max pool -> Linear(C, 2).

    ``widths`` are the four stage widths (paper: 64, 128, 256, 512 -> ``Linear(512, 2)``);
    ``conv1_stride`` is the stride of the 7x7x7 stem (upstream and MONAI default 1; 2 makes the
    Glance ~8x cheaper for CPU-scale runs). ``norm``: ``batch`` (upstream) or ``group``
    (``GroupNorm`` with :data:`GROUP_NORM_CHANNELS` channels per group in place of every
    BatchNorm: the same function in train and eval mode; for sub-volumes so small that layer4 is
    1x1x1, where BatchNorm's batch statistics and running statistics disagree, see the README)
    or ``group_instance_stem`` (the same, but the stem's norm has one channel per group, as
    BatchNorm normalises each channel: with ``group`` the stem's 8 channels share one group and
    the Glance learns a planted lesion far slower, README "Why a supervised Glance did not separate
    large lesions").
    Input ``[N, 1, X, Y, Z]`` in [0, 1]; output logits ``[N, 2]`` (index 1 = "focus").
    """

    def __init__(
        self,
        backbone: str = "resnet18",
        widths: Sequence[int] = (64, 128, 256, 512),
        shortcut_type: str | None = None,
        conv1_stride: int = 1,
        norm: str = "batch",
    ) -> None:
        super().__init__()
        from monai.networks.nets import ResNet

        if backbone not in GLANCE_BACKBONES:
            raise ValueError(
                f"unknown glance backbone {backbone!r}; known: {list(GLANCE_BACKBONES)}"
            )
        block, layers, shortcut, bias_downsample = GLANCE_BACKBONES[backbone]
        self.trunk = ResNet(
            block,
            layers,
            list(widths),
            spatial_dims=3,
            n_input_channels=1,
            shortcut_type=shortcut_type or shortcut,
            bias_downsample=bias_downsample,
            feed_forward=False,
            conv1_t_stride=conv1_stride,
        )
        if norm not in GLANCE_NORMS:
            raise ValueError(f"unknown glance norm {norm!r}; known: {', '.join(GLANCE_NORMS)}")
        if norm in ("group", "group_instance_stem"):
            _batch_to_group_norm(self.trunk)
        if norm == "group_instance_stem":
            # the stem normalises each channel on its own, as BatchNorm does: one group over
            # its 8 channels let their different responses to the tissue's mean intensity
            # swamp the lesion, and the Glance learned far slower (issue 37, see the README)
            stem = int(widths[0])
            self.trunk.bn1 = nn.GroupNorm(stem, stem)
        self.trunk.avgpool = nn.AdaptiveMaxPool3d(1)  # the paper's global max pooling
        self.head = nn.Linear(int(widths[-1]), 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(x))

    def focus_probability(self, x: torch.Tensor) -> torch.Tensor:
        """p = softmax(logits)[:, 1], shape ``[N]``."""
        return F.softmax(self(x), dim=1)[:, 1]


PATCH_MERGINGS = ("monai", "legacy")


def _legacy_patch_merging():
    """MONAI <= 1.4's ``PatchMerging`` (SwinUNETR's default ``downsample="merging"``), whose eight
    2x2x2 neighbours were gathered as (0,0,0) (1,0,0) (0,1,0) (0,0,1) (1,0,1) (0,1,0) (0,0,1)
    (1,1,1): (0,1,0) and (0,0,1) twice, (1,1,0) and (0,1,1) never (six distinct neighbours).
    MONAI 1.5 corrected the order; weights trained
    with the old one (upstream's, which needs ``SwinUNETR(img_size=...)``, i.e. MONAI < 1.5)
    only reproduce their outputs with it."""
    from monai.networks.nets.swin_unetr import PatchMergingV2

    class LegacyPatchMerging(PatchMergingV2):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.dim() != 5:
                return super().forward(x)
            _, d, h, w, _ = x.shape
            if d % 2 or h % 2 or w % 2:
                x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2, 0, d % 2))
            offsets = [
                (0, 0, 0),
                (1, 0, 0),
                (0, 1, 0),
                (0, 0, 1),
                (1, 0, 1),
                (0, 1, 0),
                (0, 0, 1),
                (1, 1, 1),
            ]
            x = torch.cat([x[:, i::2, j::2, k::2, :] for i, j, k in offsets], -1)
            return self.reduction(self.norm(x))

    return LegacyPatchMerging


def build_focus(
    arch: str = "swin_unetr",
    feature_size: int = PAPER_FEATURE_SIZE,
    depths: Sequence[int] = (2, 2, 2, 2),
    unet_channels: Sequence[int] = (16, 32, 64, 128),
    patch_merging: str = "monai",
) -> nn.Module:
    """Focus segmenter: ``[N, 1, X, Y, Z] -> logits [N, 2, X, Y, Z]``.

    ``swin_unetr``: MONAI SwinUNETR v2 (no ``img_size`` in MONAI >= 1.5); every ROI side must be
    divisible by 32 and the bottleneck must keep more than one voxel (e.g. 64x64x32 or more).
    ``patch_merging``: ``monai`` (MONAI's current ``PatchMerging``) or ``legacy`` (MONAI <= 1.4's
    order, for official GF-Screen checkpoints; :func:`_legacy_patch_merging`).
    ``unet``: MONAI residual UNet with ``unet_channels`` (strides 2), any ROI divisible by 8.
    """
    from monai.networks.nets import SwinUNETR, UNet

    if patch_merging not in PATCH_MERGINGS:
        raise ValueError(f"unknown patch merging {patch_merging!r}; known: {PATCH_MERGINGS}")
    if arch == "swin_unetr":
        downsample = _legacy_patch_merging() if patch_merging == "legacy" else "merging"
        return SwinUNETR(
            in_channels=1,
            out_channels=2,
            feature_size=feature_size,
            depths=tuple(depths),
            use_v2=True,
            downsample=downsample,
        )
    if arch == "unet":
        channels = tuple(int(c) for c in unet_channels)
        return UNet(
            spatial_dims=3,
            in_channels=1,
            out_channels=2,
            channels=channels,
            strides=(2,) * (len(channels) - 1),
            num_res_units=1,
            norm="instance",
        )
    raise ValueError(f"unknown focus arch {arch!r}; known: {', '.join(FOCUS_ARCHS)}")


def _foreground(pred_logits: torch.Tensor) -> torch.Tensor:
    """argmax foreground mask ``[N, X, Y, Z]`` (float) of Focus logits ``[N, 2, X, Y, Z]``."""
    return (pred_logits.argmax(dim=1) == 1).float()


def detection_reward(pred_logits: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """r = 1 if the argmax foreground of Focus overlaps the ground truth at all, else 0.

    ``pred_logits [N, 2, X, Y, Z]``, ``label [N, 1, X, Y, Z]`` in {0, 1}; returns ``[N]``.
    A sub-volume without lesion gets 0 (upstream ``get_detection_reward``).
    """
    hit = (_foreground(pred_logits) * label[:, 0].float()).flatten(1).sum(1)
    return (hit > 0).float()


def dice_reward(
    pred_logits: torch.Tensor, label: torch.Tensor, smooth: float = 1e-6
) -> torch.Tensor:
    """r = (2|P∩G| + s) / (|P| + |G| + s) per sub-volume (upstream ablation), shape ``[N]``.
    An empty prediction on an empty label gives 1."""
    pred = _foreground(pred_logits).flatten(1)
    gt = label[:, 0].float().flatten(1)
    return (2 * (pred * gt).sum(1) + smooth) / (pred.sum(1) + gt.sum(1) + smooth)


#: the Focus rewards of the RL objective by name (``ObjectiveSettings.reward``)
REWARDS = {"detection": detection_reward, "dice": dice_reward}


def group_advantages(rewards: torch.Tensor, groups: torch.Tensor | None = None) -> torch.Tensor:
    """A = clamp((r - mean) / max(std, 1e-2), -5, 5) within each group (paper Eq. of GRPO).

    ``rewards [N]``; ``groups [N]`` integer group ids (None: one group, upstream's batch-wide
    grouping). ``std`` is the unbiased standard deviation (``torch.std``), as upstream; a group
    of one sub-volume gets advantage 0.
    """
    if groups is None:
        groups = torch.zeros_like(rewards, dtype=torch.long)
    out = torch.zeros_like(rewards, dtype=torch.float32)
    for g in torch.unique(groups):
        idx = groups == g
        r = rewards[idx].float()
        if r.numel() < 2:
            continue
        std = torch.clamp(r.std(), min=ADVANTAGE_STD_FLOOR)
        out[idx] = torch.clamp((r - r.mean()) / std, -ADVANTAGE_CLAMP, ADVANTAGE_CLAMP)
    return out


def rl_loss(
    logits: torch.Tensor, old_logits: torch.Tensor, advantages: torch.Tensor
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO-clipped policy loss with a KL penalty (upstream ``get_RL_loss``, temperature 1).

    p = softmax(logits)[:, 1], p_old likewise from the frozen old policy (no gradient);
    ratio = clamp(exp(log(p + 1e-6) - log(p_old + 1e-6)), 0.01, 5);
    L_clip = -mean(min(ratio A, clamp(ratio, 1 - 0.1, 1 + 0.1) A));
    q = clamp(p_old / (p + 1e-6), 1e-4, 1e4); L_KL = 0.01 mean(q - log(q + 1e-6) - 1).
    Shapes: logits ``[N, 2]``, advantages ``[N]``; returns the scalar loss and its parts.
    """
    p = F.softmax(logits, dim=1)[:, 1]
    with torch.no_grad():
        p_old = F.softmax(old_logits, dim=1)[:, 1]
    ratio = torch.exp(torch.log(p + LOG_EPS) - torch.log(p_old + LOG_EPS))
    ratio = torch.clamp(ratio, *RATIO_CLAMP)
    adv = advantages.detach()
    surr1 = ratio * adv
    surr2 = torch.clamp(ratio, 1 - PPO_EPSILON, 1 + PPO_EPSILON) * adv
    clip_loss = -torch.mean(torch.min(surr1, surr2))
    q = torch.clamp(p_old / (p + LOG_EPS), *KL_RATIO_CLAMP)
    kl = KL_BETA * torch.mean(q - torch.log(q + LOG_EPS) - 1)
    return clip_loss + kl, {"clip": clip_loss.detach(), "kl": kl.detach(), "ratio": ratio.detach()}


def glance_labels(label: torch.Tensor) -> torch.Tensor:
    """1 if a sub-volume ``[N, 1, X, Y, Z]`` holds any lesion voxel, else 0; shape ``[N]``."""
    return (label.flatten(1) == 1).any(dim=1).long()


def glance_ce_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Class-balanced cross-entropy of the Glance (upstream ``get_glance_loss``):
    -sum_pos log p / n_pos - sum_neg log(1 - p) / n_neg with p = softmax(logits)[:, 1]."""
    p = F.softmax(logits, dim=1)[:, 1]
    pos = (target == 1).float()
    neg = 1.0 - pos
    pos_loss = -(pos * torch.log(p + LOG_EPS)).sum() / (pos.sum() + LOG_EPS)
    neg_loss = -(neg * torch.log(1 - p + LOG_EPS)).sum() / (neg.sum() + LOG_EPS)
    return pos_loss + neg_loss
