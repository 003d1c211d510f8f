from __future__ import annotations

import pytest
import torch

from medimg_gfscreen.inference import (
    count_flops,
    glance_focus_inference,
    sliding_window_focus,
    tile_slices,
)
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
    assert int(result.mask.sum()) == 0 and result.mask.dtype == torch.uint8


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
    selected = [start for start, _, s in result.tiles if s]
    coverage = torch.zeros(volume.shape[2:])
    for x, y, z in selected:
        coverage[x : x + ROI[0], y : y + ROI[1], z : z + ROI[2]] += 1
    checked = 0
    for x, y, z in selected:
        crop = volume[..., x : x + ROI[0], y : y + ROI[1], z : z + ROI[2]]
        with torch.no_grad():
            own = torch.softmax(focus(crop), 1)[0]
        alone = coverage[x : x + ROI[0], y : y + ROI[1], z : z + ROI[2]] == 1
        if alone.any():
            got = result.probs[0, :, x : x + ROI[0], y : y + ROI[1], z : z + ROI[2]]
            assert torch.allclose(got[:, alone], own[:, alone], atol=1e-6)
            checked += int(alone.sum())
    assert checked > 0
    # voxels no selected tile covers are background with probability 1
    assert torch.equal(result.probs[0, 0][coverage == 0], torch.ones(int((coverage == 0).sum())))


def test_mask_only_mode_matches_the_averaged_argmax(nets, volume) -> None:
    """keep_probs=False keeps one float buffer (sum of p_lesion - p_background over selected
    tiles); its sign is the argmax of the average except at exact ties."""
    glance, focus = nets
    scores = sorted(
        p for _, p, _ in glance_focus_inference(volume, glance, focus, ROI, 0.5, 1.0).tiles
    )
    threshold = scores[len(scores) // 3]
    full = glance_focus_inference(volume, glance, focus, ROI, 0.5, threshold)
    lean = glance_focus_inference(volume, glance, focus, ROI, 0.5, threshold, keep_probs=False)
    assert lean.probs is None and lean.mask.dtype == torch.uint8 and lean.tiles == full.tiles
    margin = (full.probs[0, 1] - full.probs[0, 0]).abs()
    differ = lean.mask != full.mask
    assert bool((margin[differ] < 1e-5).all())
    assert 0 < int(full.mask.sum())  # the comparison covers lesion voxels


def test_buffers_live_on_the_requested_device(nets, volume) -> None:
    glance, focus = nets
    result = glance_focus_inference(
        volume, glance, focus, ROI, 0.5, -1.0, sw_device="cpu", device="cpu", keep_probs=False
    )
    assert result.mask.device.type == "cpu" and result.mask.shape == volume.shape[2:]


def test_tile_grid_is_monais_and_upstreams() -> None:
    """Worked by hand: ROI 96 at overlap 0.75 steps by 24 (upstream 96 - int(72)); the last
    tile is shifted back to end at the border. ROI 64 steps by 16."""
    starts = sorted({s[0].start for s in tile_slices((130, 96, 64), (96, 96, 64), 0.75)})
    assert starts == [0, 24, 34]
    starts = sorted({s[2].start for s in tile_slices((96, 96, 100), (96, 96, 64), 0.75)})
    assert starts == [0, 16, 32, 36]
    assert len(tile_slices((96, 96, 64), (96, 96, 64), 0.75)) == 1


def test_volume_smaller_than_the_roi_is_padded(nets) -> None:
    glance, focus = nets
    small = torch.rand(1, 1, 30, 40, 16)
    result = glance_focus_inference(small, glance, focus, ROI, 0.5, -1.0)
    assert result.mask.shape == (30, 40, 16) and result.probs.shape == (1, 2, 30, 40, 16)
    baseline = sliding_window_focus(small, focus, ROI, overlap=0.5)
    assert torch.allclose(result.probs, baseline, atol=1e-6)


def test_flops_scale_with_roi(nets) -> None:
    glance, focus = nets
    small = count_flops(focus, (32, 32, 16))
    large = count_flops(focus, (32, 32, 32))
    assert small > 0 and 1.8 < large / small < 2.2
    assert count_flops(glance, ROI) > 0
