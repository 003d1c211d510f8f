"""The separability control's training and evaluation (issue 37): its Glance sees new crops in
every epoch, and its tile AUROC scores the right tiles in the right direction."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from medimg_gfscreen import measurement as m


def _datamodule(synth_dir: Path, cache: Path):
    from medimg_gfscreen.data import GFScreenDataModule

    return GFScreenDataModule(
        str(synth_dir / "datalist.json"),
        roi_size=m.ROI,
        num_samples=2,
        batch_size=2,
        cache_dir=str(cache),
        negatives="lesion_free",
    )


def test_the_control_glance_sees_new_crops_every_epoch(
    synth_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before 2026-12-07 ``separability`` built a training loader per epoch. MONAI's loader
    (``num_workers=0``) seeds its crops from torch's generator when it is built and then
    restores that generator, which only the sampler's one draw per epoch moves on: from the
    second epoch on every epoch drew the same crops in the same order, and the control Glance
    learned them by heart. This records the crops the control trains on in three epochs: each
    epoch's differ from the others' (the old code fails: epochs 2 and 3 were equal)."""
    import medimg_gfscreen.model as model

    seen: list[torch.Tensor] = []

    class Recording(model.Glance):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if self.training:
                seen.append(x.detach().clone())
            return super().forward(x)

    monkeypatch.setattr(model, "Glance", Recording)
    dm = _datamodule(synth_dir, tmp_path / "cache")
    dm.setup("fit")
    volumes = m._volumes(dm)[:1]
    out = m.separability(dm, volumes, epochs=3, seed=0)
    assert out["steps"] == len(seen) and len(seen) % 3 == 0
    k = len(seen) // 3
    epochs = [torch.cat(seen[i * k : (i + 1) * k]) for i in range(3)]
    for a, b in ((0, 1), (1, 2), (0, 2)):
        assert epochs[a].shape == epochs[b].shape
        assert not torch.equal(epochs[a], epochs[b]), (a, b)


def test_epochs_of_passes_over_one_loader() -> None:
    loaders: list[int] = []

    class Loader:
        def __iter__(self):
            loaders.append(1)
            return iter([1, 2])

    assert list(m.epochs_of(Loader(), 3)) == [1, 2] * 3
    assert list(m.epochs_of(Loader(), 0)) == []


class _BrightestVoxel(nn.Module):
    """A planted Glance: logit "focus" = ``sign`` x the brightest voxel of the tile."""

    def __init__(self, sign: float = 1.0) -> None:
        super().__init__()
        self.sign = sign
        self.weight = nn.Parameter(torch.zeros(1))  # a device for glance_focus_inference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        top = x.flatten(1).amax(1) * self.sign * 20.0
        return torch.stack([torch.zeros_like(top), top], dim=1)


def _volume_with_a_bright_lesion() -> tuple[str, torch.Tensor, torch.Tensor]:
    """A volume whose three sides differ (an axis swap would misplace the lesion) with one
    bright lesion off-centre in every axis; the rest at 0.5."""
    shape = (80, 56, 28)
    image = torch.full((1, 1, *shape), 0.5)
    label = torch.zeros(shape, dtype=torch.uint8)
    label[60:66, 5:9, 20:23] = 1
    image[0, 0][label > 0] = 1.0
    return "planted", image, label


def test_tile_scores_follow_the_tiles_and_the_positive_class() -> None:
    """A Glance that sees the lesion (the brightest voxel) separates lesion tiles perfectly:
    AUROC 1 through the control's own tiling, labels and orientation; its mirror image 0."""
    volume = _volume_with_a_bright_lesion()
    scores, positive = m.glance_tile_scores(_BrightestVoxel(), [volume])
    assert 0 < sum(positive) < len(positive)
    assert m.tile_auroc(scores, positive) == 1.0
    scores, positive = m.glance_tile_scores(_BrightestVoxel(-1.0), [volume])
    assert m.tile_auroc(scores, positive) == 0.0
    # a tile is positive exactly when its box meets the lesion's box, tile by tile in grid order
    from medimg_gfscreen.inference import tile_slices

    lesion = ((60, 66), (5, 9), (20, 23))
    expected = [
        all(s.start < hi and lo < s.stop for s, (lo, hi) in zip(tile, lesion, strict=True))
        for tile in tile_slices(volume[1].shape[2:], m.ROI, m.OVERLAP)
    ]
    assert positive == expected


def test_tile_auroc_counts_ties_as_half() -> None:
    assert m.tile_auroc([0.9, 0.1, 0.5], [True, False, False]) == 1.0
    assert m.tile_auroc([0.1, 0.9], [True, False]) == 0.0
    assert m.tile_auroc([0.5, 0.5], [True, False]) == 0.5
    assert m.tile_auroc([0.5], [True]) != m.tile_auroc([0.5], [True])  # NaN: one class empty
