"""The separability control's training and evaluation (issue 37): its Glance trains on tiles of
the training volumes' grid, the kind of sample it is scored on, and its tile AUROC scores the
right tiles in the right direction."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from medimg_gfscreen import measurement as m
from medimg_gfscreen.control import glance_tile_scores


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


def _is_grid_tile(sample: torch.Tensor, tiles: list[torch.Tensor]) -> bool:
    """Whether ``sample [1, *ROI]`` is one of ``tiles`` flipped and / or rotated in X-Y."""
    variants = []
    for k in range(4):
        turned = torch.rot90(sample, k, dims=(1, 2))
        for mask in range(8):
            dims = tuple(d for bit, d in enumerate((1, 2, 3)) if mask >> bit & 1)
            variants.append(torch.flip(turned, dims) if dims else turned)
    return any(torch.equal(v, tile) for tile in tiles for v in variants)


def test_the_control_trains_on_grid_tiles_of_the_training_volumes(
    synth_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before 2026-12-07 21:00 UTC the control trained on the training crops
    (``RandCropByPosNegLabeld``): positives centred on a lesion voxel never held air, lesion-free
    negatives often did, and the Glance learned "air" (README, "Why a supervised Glance did not
    separate large lesions"). Now each sample is a tile of the overlap-0.75 grid of a training
    volume (flipped / rotated as the training chain does), half of each batch tiles holding a
    lesion voxel, labelled so. The old
    code fails: its crops sit anywhere, not on the grid."""
    import medimg_gfscreen.model as model
    from medimg_gfscreen.control import grid_tiles

    seen: list[torch.Tensor] = []
    targets: list[torch.Tensor] = []
    ce = model.glance_ce_loss

    class Recording(model.Glance):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if self.training:
                seen.append(x.detach().clone())
            return super().forward(x)

    def labelled(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        targets.append(target.clone())
        return ce(logits, target)

    monkeypatch.setattr(model, "Glance", Recording)
    monkeypatch.setattr(model, "glance_ce_loss", labelled)
    dm = _datamodule(synth_dir, tmp_path / "cache")
    dm.setup("fit")
    training = m._volumes(dm, dm.train_key)
    out = m.separability(dm, m._volumes(dm)[:1], steps=3, seed=0)
    assert out["steps"] == 3 == len(seen) == len(targets)
    assert 0 <= out["train_tile_auroc"] <= 1
    tiles = {True: [], False: []}
    for index, tile, lesion in grid_tiles(training, m.ROI, m.OVERLAP):
        tiles[lesion].append(torch.as_tensor(training[index][1][0][(slice(None), *tile)]))
    assert tiles[True] and tiles[False]
    for images, labels in zip(seen, targets, strict=True):
        assert images.shape == (2 * m.CONTROL_PER_CLASS, 1, *m.ROI)
        assert int(labels.sum()) == m.CONTROL_PER_CLASS
        for sample, label in zip(images, labels.tolist(), strict=True):
            assert _is_grid_tile(sample, tiles[bool(label)])
    assert not torch.equal(seen[0], seen[1])  # new tiles every step


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
    scores, positive = glance_tile_scores(_BrightestVoxel(), [volume])
    assert 0 < sum(positive) < len(positive)
    assert m.tile_auroc(scores, positive) == 1.0
    scores, positive = glance_tile_scores(_BrightestVoxel(-1.0), [volume])
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


def test_tile_batches_draw_each_class_and_label_it() -> None:
    """On a volume with one bright lesion: every batch holds ``per_class`` tiles holding a lesion
    voxel (each with a bright voxel, flips and rotations keep it) and as many without; the
    draws follow the seed."""
    from medimg_gfscreen.control import tile_batches

    volume = _volume_with_a_bright_lesion()
    batches = list(tile_batches([volume], m.ROI, m.OVERLAP, steps=4, per_class=3, seed=5))
    assert len(batches) == 4
    for images, labels in batches:
        assert images.shape == (6, 1, *m.ROI) and labels.tolist().count(1) == 3
        bright = images.flatten(1).amax(1) == 1.0
        assert bright.tolist() == [bool(v) for v in labels.tolist()]
    again = list(tile_batches([volume], m.ROI, m.OVERLAP, steps=4, per_class=3, seed=5))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batches, again, strict=True))


def test_the_controls_inputs_map_every_tile_in_training_and_scoring(
    synth_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``separability(inputs=...)`` (the pilot's ``--flatten``, which runs the real control on
    flattened tiles) hands the Glance ``inputs(tile)`` in every training step and every scored
    tile: with every tile mapped to one constant, the Glance sees only that constant, scores
    every tile alike, and the AUROC is the ties' 0.5. Without ``inputs`` it sees the tiles."""
    import medimg_gfscreen.model as model

    seen: dict[bool, list[torch.Tensor]] = {True: [], False: []}

    class Recording(model.Glance):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen[self.training].append(x.detach().clone())
            return super().forward(x)

    monkeypatch.setattr(model, "Glance", Recording)
    dm = _datamodule(synth_dir, tmp_path / "cache")
    dm.setup("fit")
    test = m._volumes(dm)[:1]
    out = m.separability(dm, test, steps=2, seed=0, inputs=lambda x: torch.full_like(x, 0.25))
    assert len(seen[True]) == 2 and seen[False]
    assert all(bool((x == 0.25).all()) for x in seen[True] + seen[False])
    assert out["auroc"] == 0.5 and out["loss_first_80"] > 0
    seen[True].clear()
    m.separability(dm, test, steps=1, seed=0)
    assert not bool((seen[True][0] == 0.25).all())
