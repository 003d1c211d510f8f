from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from medimg_gfscreen.model import (
    Glance,
    build_focus,
    detection_reward,
    dice_reward,
    glance_ce_loss,
    glance_labels,
    group_advantages,
    rl_loss,
)


@pytest.mark.parametrize(
    ("backbone", "widths", "shape"),
    [
        ("resnet18", (8, 16, 32, 64), (3, 1, 32, 32, 16)),
        ("resnet10", (8, 16, 32, 64), (2, 1, 32, 32, 32)),
    ],
)
def test_glance_shapes_and_max_pool(backbone: str, widths: tuple, shape: tuple) -> None:
    glance = Glance(backbone, widths, conv1_stride=2)
    assert glance(torch.rand(shape)).shape == (shape[0], 2)
    assert isinstance(glance.trunk.avgpool, nn.AdaptiveMaxPool3d)
    assert glance.head.in_features == widths[-1]


def test_glance_paper_head_is_linear_512_to_2() -> None:
    glance = Glance("resnet18")
    assert (glance.head.in_features, glance.head.out_features) == (512, 2)


def _logits(mask: torch.Tensor) -> torch.Tensor:
    """[N, X, Y, Z] {0,1} -> logits [N, 2, X, Y, Z] whose argmax is mask."""
    m = mask.float()[:, None]
    return torch.cat([1 - m, m], dim=1)


def test_detection_and_dice_rewards_by_hand() -> None:
    label = torch.zeros(3, 1, 4, 4, 4)
    label[0, 0, 0, 0, 0:2] = 1  # lesion of 2 voxels
    label[1, 0, 1, 1, 1] = 1
    pred = torch.zeros(3, 4, 4, 4)
    pred[0, 0, 0, 1:3] = 1  # overlaps 1 of 2 lesion voxels, 2 predicted
    pred[1, 3, 3, 3] = 1  # misses
    # case 2: empty label, empty prediction
    assert detection_reward(_logits(pred), label).tolist() == [1.0, 0.0, 0.0]
    dice = dice_reward(_logits(pred), label)
    assert dice[0].item() == pytest.approx((2 * 1 + 1e-6) / (2 + 2 + 1e-6))
    assert dice[1].item() == pytest.approx(1e-6 / (1 + 1 + 1e-6))
    assert dice[2].item() == pytest.approx(1.0)


def test_group_advantages_by_hand() -> None:
    r = torch.tensor([1.0, 0.0, 0.0, 0.0])
    std = torch.tensor([1.0, 0.0, 0.0, 0.0]).std().item()  # unbiased: 0.5
    expected = [(1 - 0.25) / std, -0.25 / std, -0.25 / std, -0.25 / std]
    assert group_advantages(r).tolist() == pytest.approx(expected)
    # identical rewards: std floor 1e-2, advantages 0
    assert group_advantages(torch.ones(4)).tolist() == [0.0] * 4
    # clamp to [-5, 5]: one success in 40 gives (1 - 1/40) / std > 5
    big = torch.zeros(40)
    big[0] = 1
    assert group_advantages(big)[0].item() == 5.0


def test_group_advantages_per_case_groups() -> None:
    r = torch.tensor([1.0, 0.0, 1.0, 1.0])
    groups = torch.tensor([0, 0, 1, 1])
    adv = group_advantages(r, groups)
    s = torch.tensor([1.0, 0.0]).std().item()
    assert adv.tolist() == pytest.approx([0.5 / s, -0.5 / s, 0.0, 0.0])
    assert group_advantages(r).tolist() != adv.tolist()


def test_rl_loss_by_hand() -> None:
    # p = 0.6, p_old = 0.5 for one sample with advantage +1; second sample p = 0.2, p_old = 0.5, A = -1
    logits = torch.log(torch.tensor([[0.4, 0.6], [0.8, 0.2]])).requires_grad_(True)
    old = torch.log(torch.tensor([[0.5, 0.5], [0.5, 0.5]]))
    adv = torch.tensor([1.0, -1.0])
    loss, parts = rl_loss(logits, old, adv)
    eps = 1e-6
    r1 = math.exp(math.log(0.6 + eps) - math.log(0.5 + eps))  # 1.2 -> clipped 1.1 for A > 0
    r2 = math.exp(math.log(0.2 + eps) - math.log(0.5 + eps))  # 0.4 -> min(-0.4, -0.9) = -0.9
    clip = -((min(r1, 1.1) * 1.0) + min(r2 * -1.0, 0.9 * -1.0)) / 2
    q1, q2 = 0.5 / (0.6 + eps), 0.5 / (0.2 + eps)
    kl = 0.01 * ((q1 - math.log(q1 + eps) - 1) + (q2 - math.log(q2 + eps) - 1)) / 2
    assert parts["clip"].item() == pytest.approx(clip, rel=1e-5)
    assert parts["kl"].item() == pytest.approx(kl, rel=1e-5)
    assert loss.item() == pytest.approx(clip + kl, rel=1e-5)
    loss.backward()
    assert logits.grad is not None


def test_rl_loss_ratio_is_clamped() -> None:
    logits = torch.log(torch.tensor([[1e-4, 1 - 1e-4]]))
    old = torch.log(torch.tensor([[1 - 1e-4, 1e-4]]))
    _, parts = rl_loss(logits, old, torch.tensor([1.0]))
    assert parts["ratio"].item() == pytest.approx(5.0)


def test_glance_labels_and_balanced_ce() -> None:
    label = torch.zeros(4, 1, 2, 2, 2)
    label[1, 0, 0, 0, 0] = 1
    target = glance_labels(label)
    assert target.tolist() == [0, 1, 0, 0]
    logits = torch.log(torch.tensor([[0.9, 0.1], [0.3, 0.7], [0.8, 0.2], [0.6, 0.4]]))
    expected = (
        -math.log(0.7 + 1e-6)
        - (math.log(0.9 + 1e-6) + math.log(0.8 + 1e-6) + math.log(0.6 + 1e-6)) / 3
    )
    assert glance_ce_loss(logits, target).item() == pytest.approx(expected, rel=1e-4)


def test_focus_builders() -> None:
    unet = build_focus("unet", unet_channels=(8, 16, 32, 64))
    assert unet(torch.rand(1, 1, 32, 32, 16)).shape == (1, 2, 32, 32, 16)
    swin = build_focus("swin_unetr", feature_size=12, depths=(1, 1, 1, 1))
    assert type(swin).__name__ == "SwinUNETR"
    with pytest.raises(ValueError, match="unknown focus"):
        build_focus("vnet")


@pytest.mark.slow
def test_swin_unetr_forward_at_a_small_roi() -> None:
    swin = build_focus("swin_unetr", feature_size=12, depths=(1, 1, 1, 1)).eval()
    with torch.no_grad():
        assert swin(torch.rand(1, 1, 64, 64, 32)).shape == (1, 2, 64, 64, 32)
