"""Glance-then-Focus inference on MONAI's sliding-window machinery, plus FLOP counting.

:func:`glance_focus_inference` runs ``monai.inferers.sliding_window_inference`` with a *gated
predictor*: for each batch of tiles the Glance scores every tile (p = softmax(glance)[1]); tiles
with p > ``threshold`` go to Focus. The predictor returns two outputs that MONAI merges over the
same tile grid and count map: ``softmax(focus) * s`` and the selection indicator ``s``. Their
ratio is the softmax averaged over the *selected* tiles covering a voxel (the paper's count-map
average); voxels no selected tile covers are background. With every tile selected the ratio is
exactly ``sliding_window_inference`` of Focus alone (the count map cancels to 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from medimg_gfscreen.constants import DEFAULT_OVERLAP, GATE_THRESHOLD

__all__ = [
    "GateResult",
    "count_flops",
    "glance_focus_inference",
    "sliding_window_focus",
]


@dataclass
class GateResult:
    """Output of :func:`glance_focus_inference` for one volume."""

    probs: torch.Tensor  # [1, 2, X, Y, Z] softmax averaged over selected tiles
    tiles: list[tuple[tuple[int, int, int], float, bool]] = field(default_factory=list)

    @property
    def n_tiles(self) -> int:
        return len(self.tiles)

    @property
    def n_selected(self) -> int:
        return sum(1 for _, _, s in self.tiles if s)

    @property
    def selection_rate(self) -> float:
        return self.n_selected / max(self.n_tiles, 1)

    @property
    def mask(self) -> torch.Tensor:
        """argmax mask ``[X, Y, Z]`` (uint8)."""
        return self.probs[0].argmax(0).to(torch.uint8)


def _start(slices: Sequence[slice]) -> tuple[int, int, int]:
    starts = [int(s.start or 0) for s in list(slices)[-3:]]
    return starts[0], starts[1], starts[2]


@torch.no_grad()
def glance_focus_inference(
    image: torch.Tensor,
    glance: nn.Module,
    focus: nn.Module,
    roi_size: Sequence[int],
    overlap: float = DEFAULT_OVERLAP,
    threshold: float = GATE_THRESHOLD,
    sw_batch_size: int = 4,
    progress: bool = False,
) -> GateResult:
    """Glance-gated Focus over a ``[1, 1, X, Y, Z]`` volume (tile grid of MONAI's sliding window).

    A tile is selected when its Glance probability p > ``threshold``: 1.0 selects nothing (the
    output is all background), a threshold below every p (e.g. ``-1``, or 0.0 unless a p
    underflows to 0) selects every tile and equals :func:`sliding_window_focus` exactly.
    """
    from monai.inferers import sliding_window_inference

    if image.dim() != 5 or image.shape[:2] != (1, 1):
        raise ValueError(f"image must be [1, 1, X, Y, Z], got {tuple(image.shape)}")
    tiles: list[tuple[tuple[int, int, int], float, bool]] = []

    def predictor(window: torch.Tensor, coords: Sequence[Sequence[slice]]):
        p = F.softmax(glance(window).float(), dim=1)[:, 1]
        selected = p > threshold
        out = torch.zeros(
            (window.shape[0], 2, *window.shape[2:]), dtype=torch.float32, device=window.device
        )
        if bool(selected.any()):
            out[selected] = F.softmax(focus(window[selected]).float(), dim=1)
        for c, pi, si in zip(coords, p.tolist(), selected.tolist(), strict=True):
            tiles.append((_start(c), float(pi), bool(si)))
        weight = selected.float().view(-1, 1, 1, 1, 1).expand(-1, 1, *window.shape[2:])
        return out, weight.contiguous()

    merged, weight = sliding_window_inference(
        image, tuple(roi_size), sw_batch_size, predictor, overlap=overlap, mode="constant",
        progress=progress, with_coord=True,
    )  # fmt: skip
    covered = weight > 0
    probs = torch.where(
        covered, merged / torch.where(covered, weight, torch.ones_like(weight)), 0.0
    )
    background = (~covered).float()
    probs = torch.cat([probs[:, :1] + background, probs[:, 1:]], dim=1)
    return GateResult(probs=torch.as_tensor(probs).float(), tiles=tiles)


@torch.no_grad()
def sliding_window_focus(
    image: torch.Tensor,
    focus: nn.Module,
    roi_size: Sequence[int],
    overlap: float = DEFAULT_OVERLAP,
    sw_batch_size: int = 4,
    progress: bool = False,
) -> torch.Tensor:
    """Baseline: Focus on every tile (MONAI ``sliding_window_inference``, constant blending);
    returns the averaged softmax ``[1, 2, X, Y, Z]``."""
    from monai.inferers import sliding_window_inference

    out = sliding_window_inference(
        image, tuple(roi_size), sw_batch_size, lambda w: F.softmax(focus(w).float(), dim=1),
        overlap=overlap, mode="constant", progress=progress,
    )  # fmt: skip
    return torch.as_tensor(out).float()


def count_flops(module: nn.Module, roi_size: Sequence[int], batch: int = 1) -> int:
    """FLOPs of one forward pass on ``[batch, 1, *roi_size]`` (``torch.utils.flop_counter``;
    counts matmul / convolution FLOPs, 2 per multiply-add)."""
    from torch.utils.flop_counter import FlopCounterMode

    was_training = module.training
    module.eval()
    param = next(module.parameters())
    x = torch.zeros((batch, 1, *roi_size), device=param.device, dtype=param.dtype)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        module(x)
    module.train(was_training)
    return int(counter.get_total_flops())
