"""Glance-then-Focus inference (upstream ``GFScreen_RL.valid``), memory-bounded, plus FLOPs.

:func:`glance_focus_inference` tiles a preprocessed volume on MONAI's sliding-window grid
(``dense_patch_slices`` with interval ``int(roi x (1 - overlap))``; with the paper's ROI and
overlap this is upstream's ``crop_3d_tensor`` grid), scores every tile with the Glance
(p = softmax(glance)[1]), sends the tiles with p > ``threshold`` to Focus, and averages the Focus
softmax over the *selected* tiles covering a voxel (upstream's count-map average); voxels that no
selected tile covers are background. With every tile selected this is exactly MONAI's
``sliding_window_inference`` of Focus alone (constant blending).

Memory: the whole-volume buffers live on ``device`` (default: the image's device, e.g. the CPU)
while tiles run on ``sw_device`` (the GPU), as MONAI's ``sw_device`` / ``device`` split; only
selected tiles are accumulated; and for the mask alone (``keep_probs=False``) one float32 buffer
holds the sum over selected tiles of ``p_lesion - p_background`` (the averaged softmax's argmax is
its sign), so the peak is the input plus 5 bytes per voxel instead of MONAI's 2-channel output,
count map and returned probabilities (``benchmarks/bench_memory.py``).
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
    "tile_slices",
]

Tile = tuple[tuple[int, int, int], float, bool]


@dataclass
class GateResult:
    """Output of :func:`glance_focus_inference` for one volume."""

    mask: torch.Tensor  # [X, Y, Z] uint8: argmax of the softmax averaged over selected tiles
    tiles: list[Tile] = field(default_factory=list)  # (start voxel, p, selected) per tile
    probs: torch.Tensor | None = None  # [1, 2, X, Y, Z] averaged softmax (keep_probs=True)

    @property
    def n_tiles(self) -> int:
        return len(self.tiles)

    @property
    def n_selected(self) -> int:
        return sum(1 for _, _, s in self.tiles if s)

    @property
    def selection_rate(self) -> float:
        """Selected / all tiles (upstream ``compress_ratio``; 0.0 when nothing is selected)."""
        return self.n_selected / max(self.n_tiles, 1)


def tile_slices(
    image_size: Sequence[int], roi_size: Sequence[int], overlap: float
) -> list[tuple[slice, slice, slice]]:
    """The tiles of MONAI's ``sliding_window_inference`` over a volume of ``image_size`` (every
    side >= the ROI): interval ``int(roi x (1 - overlap))`` (at least 1; the ROI itself where the
    ROI equals the image), the last tile of each axis shifted back to end at the border; x-major
    order (upstream ``crop_3d_tensor``'s order)."""
    from monai.data.utils import dense_patch_slices

    if not 0 <= overlap < 1:
        raise ValueError(f"overlap must be in [0, 1), got {overlap}")
    interval = [
        int(r) if r == n else max(int(r * (1 - overlap)), 1)
        for n, r in zip(image_size, roi_size, strict=True)
    ]
    return [tuple(s) for s in dense_patch_slices(tuple(image_size), tuple(roi_size), interval)]


def _pad_to_roi(image: torch.Tensor, roi: Sequence[int]) -> tuple[torch.Tensor, list[slice]]:
    """Zero-pads sides shorter than the ROI symmetrically (as MONAI's sliding window does);
    returns the padded image and the slices of the original volume in it."""
    pads, crop = [], []
    for size, r in zip(reversed(image.shape[2:]), reversed(roi), strict=True):
        diff = max(r - size, 0)
        pads.extend([diff // 2, diff - diff // 2])
    for size, r in zip(image.shape[2:], roi, strict=True):
        diff = max(r - size, 0)
        crop.append(slice(diff // 2, diff // 2 + size))
    return (F.pad(image, pads) if any(pads) else image), crop


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
    sw_device: torch.device | str | None = None,
    device: torch.device | str | None = None,
    keep_probs: bool = True,
) -> GateResult:
    """Glance-gated Focus over a ``[1, 1, X, Y, Z]`` volume (upstream ``valid``).

    Pass 1 scores every tile with the Glance (batches of ``sw_batch_size`` on ``sw_device``,
    default: the networks' device); pass 2 runs Focus on the tiles with p > ``threshold`` and
    accumulates their softmax into buffers on ``device`` (default: the image's device).
    ``threshold`` 1.0 selects nothing (all background); a threshold below every p (e.g. -1)
    selects every tile and equals :func:`sliding_window_focus`. ``keep_probs=False`` skips the
    2-channel average (the mask alone, one float buffer).
    """
    if image.dim() != 5 or image.shape[:2] != (1, 1):
        raise ValueError(f"image must be [1, 1, X, Y, Z], got {tuple(image.shape)}")
    image = image.as_tensor() if hasattr(image, "as_tensor") else image  # MetaTensor: no meta
    roi = tuple(int(r) for r in roi_size)
    net_device = next(focus.parameters()).device
    sw_device = torch.device(sw_device) if sw_device is not None else net_device
    device = torch.device(device) if device is not None else image.device
    padded, crop = _pad_to_roi(image, roi)
    slices = tile_slices(padded.shape[2:], roi, overlap)
    from iclr26_common.progress import progress as show_progress

    def windows(indices: Sequence[int]) -> torch.Tensor:
        return torch.cat([padded[(..., *slices[i])] for i in indices]).to(sw_device).float()

    scores: list[float] = []
    starts = range(0, len(slices), sw_batch_size)
    for start in show_progress(starts, description="glance tile batches", quiet=not progress):
        batch = list(range(start, min(start + sw_batch_size, len(slices))))
        scores += F.softmax(glance(windows(batch)).float(), dim=1)[:, 1].tolist()
    selected = [i for i, p in enumerate(scores) if p > threshold]

    shape = padded.shape[2:]
    if keep_probs:
        total = torch.zeros((1, 2, *shape), dtype=torch.float32, device=device)
        count = torch.zeros((1, 1, *shape), dtype=torch.float32, device=device)
    else:
        margin = torch.zeros(tuple(shape), dtype=torch.float32, device=device)
    starts = range(0, len(selected), sw_batch_size)
    for start in show_progress(starts, description="focus tile batches", quiet=not progress):
        batch = selected[start : start + sw_batch_size]
        soft = F.softmax(focus(windows(batch)).float(), dim=1).to(device)
        for k, i in enumerate(batch):
            if keep_probs:
                total[(..., *slices[i])] += soft[k : k + 1]
                count[(..., *slices[i])] += 1.0
            else:
                margin[slices[i]] += soft[k, 1] - soft[k, 0]

    tiles = [
        ((s[0].start, s[1].start, s[2].start), p, p > threshold)
        for s, p in zip(slices, scores, strict=True)
    ]
    if keep_probs:
        covered = count > 0
        probs = torch.where(covered, total / torch.where(covered, count, 1.0), 0.0)
        probs[:, :1] += (~covered).float()  # uncovered voxels: background
        probs = probs[(..., *crop)]
        return GateResult(mask=probs[0].argmax(0).to(torch.uint8), tiles=tiles, probs=probs)
    return GateResult(mask=(margin[tuple(crop)] > 0).to(torch.uint8), tiles=tiles)


@torch.no_grad()
def sliding_window_focus(
    image: torch.Tensor,
    focus: nn.Module,
    roi_size: Sequence[int],
    overlap: float = DEFAULT_OVERLAP,
    sw_batch_size: int = 4,
    progress: bool = False,
    sw_device: torch.device | str | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Baseline: Focus on every tile (MONAI ``sliding_window_inference``, constant blending);
    returns the averaged softmax ``[1, 2, X, Y, Z]`` on ``device``."""
    from monai.inferers import sliding_window_inference

    out = sliding_window_inference(
        image,
        tuple(roi_size),
        sw_batch_size,
        lambda w: F.softmax(focus(w).float(), dim=1),
        overlap=overlap,
        mode="constant",
        progress=progress,
        sw_device=sw_device,
        device=device,
    )
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
