"""Training samples of the separability control (``measurement.separability``): tiles of the
inference grid of the training volumes, the kind of sample the control is scored on.

Why not the training crops (issue 37, 2026-12-07): ``RandCropByPosNegLabeld``'s positive crops
are centred on a lesion voxel, and lesions lie deep in the organ, so a positive crop never holds
air, while the lesion-free negative crops, centred anywhere in the body, often do. A Glance
trained on those crops separates crops of new cases (AUROC 0.93, large lesions, 640 steps) by
"air in the crop" and scores the air-free lesion-free tiles of the grid as it scores lesion
tiles (mean p 0.375 vs 0.362; tile AUROC 0.58 on its own training volumes). On the grid's tiles
half the lesion-free tiles hold no air, so the cue cannot stand in for the lesion.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

__all__ = ["grid_tiles", "tile_batches"]


def grid_tiles(
    volumes: Sequence[tuple[str, torch.Tensor, torch.Tensor]],
    roi: Sequence[int],
    overlap: float,
) -> list[tuple[int, tuple[slice, slice, slice], bool]]:
    """Every tile of the overlap-``overlap`` grid (:func:`medimg_gfscreen.inference.tile_slices`,
    the grid inference scores) of each ``(name, image [1, 1, X, Y, Z], label [X, Y, Z])`` volume:
    ``(volume index, slices, holds a lesion voxel)``. Volumes are at least the ROI (the
    preprocessing pads them)."""
    from medimg_gfscreen.inference import tile_slices

    out = []
    for index, (_, image, label) in enumerate(volumes):
        for tile in tile_slices(tuple(image.shape[2:]), roi, overlap):
            out.append((index, tile, bool(label[tile].any())))
    return out


def _augment(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The training chain's flips (each axis, p 0.2) and rotation by k x 90 degrees in the
    first two axes (p 0.2, k in 1..3), on one sample ``[1, X, Y, Z]`` (X = Y)."""
    for axis in (1, 2, 3):
        if float(torch.rand((), generator=generator)) < 0.2:
            x = torch.flip(x, dims=(axis,))
    if float(torch.rand((), generator=generator)) < 0.2:
        k = int(torch.randint(1, 4, (), generator=generator))
        x = torch.rot90(x, k, dims=(1, 2))
    return x


def tile_batches(
    volumes: Sequence[tuple[str, torch.Tensor, torch.Tensor]],
    roi: Sequence[int],
    overlap: float,
    steps: int,
    per_class: int,
    seed: int,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``steps`` batches of ``2 x per_class`` tiles of the training volumes' grid
    (:func:`grid_tiles`) with their labels (1: the tile holds a lesion voxel): ``per_class``
    drawn with replacement among the lesion tiles and ``per_class`` among the others (one class
    empty: all from the other), each flipped / rotated as the training chain does
    (:func:`_augment`). Images ``[2 per_class, 1, *roi]``, labels ``[2 per_class]`` (long);
    reproducible from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    images_of = [i.as_tensor() if hasattr(i, "as_tensor") else i for _, i, _ in volumes]
    tiles = grid_tiles(volumes, roi, overlap)
    classes = [[t for t in tiles if t[2]], [t for t in tiles if not t[2]]]
    classes = [c for c in classes if c] or [tiles]
    for _ in range(steps):
        chosen = []
        for members in classes:
            picks = torch.randint(
                len(members), (2 * per_class // len(classes),), generator=generator
            )
            chosen += [members[int(i)] for i in picks]
        images = torch.stack(
            [_augment(images_of[v][0][(slice(None), *tile)], generator) for v, tile, _ in chosen]
        ).float()
        labels = torch.tensor([int(lesion) for _, _, lesion in chosen], dtype=torch.long)
        yield images, labels
