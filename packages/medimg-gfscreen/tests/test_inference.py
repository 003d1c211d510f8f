from __future__ import annotations

import pytest
import torch

from medimg_gfscreen.inference import count_flops, glance_focus_inference, sliding_window_focus
from medimg_gfscreen.model import Glance, build_focus

ROI = (32, 32, 16)


@pytest.fixture(scope="module")
def nets() -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    glance = Glance("resnet18", (8, 16, 32, 64), conv1_stride=2).eval()
    focus = build_focus("unet", unet_channels=(8, 16, 32, 64)).eval()
    return glance, focus


@pytest.fixture(scope="module")
def volume() -> torch.Tensor:
    torch.manual_seed(1)
    return torch.rand(1, 1, 56, 48, 32)


def test_threshold_one_selects_nothing(nets, volume) -> None:
    glance, focus = nets
    result = glance_focus_inference(volume, glance, focus, ROI, overlap=0.5, threshold=1.0)
    assert result.n_tiles > 1 and result.n_selected == 0 and result.selection_rate == 0.0
    assert torch.equal(result.probs[:, 0], torch.ones_like(result.probs[:, 0]))
    assert int(result.mask.sum()) == 0


@pytest.mark.parametrize("threshold", [0.0, -1.0])
def test_threshold_zero_equals_the_sliding_window_exactly(nets, volume, threshold) -> None:
    glance, focus = nets
    result = glance_focus_inference(volume, glance, focus, ROI, overlap=0.5, threshold=threshold)
    baseline = sliding_window_focus(volume, focus, ROI, overlap=0.5)
    assert result.selection_rate == 1.0
    assert torch.equal(result.probs, baseline)


def test_partial_gate_averages_only_selected_tiles(nets, volume) -> None:
    glance, focus = nets
    scores = sorted(
        p for _, p, _ in glance_focus_inference(volume, glance, focus, ROI, 0.5, 1.0).tiles
    )
    threshold = scores[len(scores) // 2]
    result = glance_focus_inference(volume, glance, focus, ROI, overlap=0.5, threshold=threshold)
    assert 0 < result.n_selected < result.n_tiles
    assert all((p > threshold) == s for _, p, s in result.tiles)
    total = result.probs.sum(1)
    assert torch.allclose(total, torch.ones_like(total), atol=1e-5)  # a distribution everywhere
    # a voxel covered by one selected tile only gets that tile's Focus softmax
    (x, y, z), _, _ = next(t for t in result.tiles if t[2])
    crop = volume[..., x : x + ROI[0], y : y + ROI[1], z : z + ROI[2]]
    with torch.no_grad():
        own = torch.softmax(focus(crop), 1)
    assert result.probs.shape == (1, 2, *volume.shape[2:])
    assert own.shape[2:] == ROI


def test_flops_scale_with_roi(nets) -> None:
    glance, focus = nets
    small = count_flops(focus, (32, 32, 16))
    large = count_flops(focus, (32, 32, 32))
    assert small > 0 and 1.8 < large / small < 2.2
    assert count_flops(glance, ROI) > 0
