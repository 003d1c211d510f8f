"""The separability control of the ``glance_focus`` experiment (:func:`separability`, checked
before any training by :func:`medimg_gfscreen.measurement.measure`): a Glance trained by
cross-entropy alone on tiles of the inference grid of the training volumes, the kind of sample
it is scored on (:func:`tile_batches`), and its tile AUROC (:func:`glance_tile_scores`,
:func:`tile_auroc`).

Why not the training crops (issue 37, 2026-12-07): ``RandCropByPosNegLabeld``'s positive crops
are centred on a lesion voxel, and lesions lie deep in the organ, so a positive crop never holds
air, while the lesion-free negative crops, centred anywhere in the body, often do. A Glance
trained on those crops separates crops of new cases (AUROC 0.93, large lesions, 640 steps) by
"air in the crop" and scores the air-free lesion-free tiles of the grid as it scores lesion
tiles (mean p 0.375 vs 0.362; tile AUROC 0.58 on its own training volumes). On the grid's tiles
half the lesion-free tiles hold no air, so the cue cannot stand in for the lesion.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

__all__ = ["glance_tile_scores", "grid_tiles", "separability", "tile_auroc", "tile_batches"]


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


def tile_auroc(scores: list[float], positive: list[bool]) -> float:
    """AUROC of Glance scores for lesion vs no-lesion tiles (Mann-Whitney U / (n1 n0); NaN
    when either class is empty)."""
    from scipy.stats import mannwhitneyu

    pos = [s for s, y in zip(scores, positive, strict=True) if y]
    neg = [s for s, y in zip(scores, positive, strict=True) if not y]
    if not pos or not neg:
        return float("nan")
    return float(mannwhitneyu(pos, neg).statistic) / (len(pos) * len(neg))


def glance_tile_scores(glance, volumes) -> tuple[list[float], list[bool]]:
    """The Glance's p (softmax index 1, "focus") of every tile of the experiment's grid
    (``measurement.ROI`` at ``measurement.OVERLAP``) of each ``(name, image [1, 1, X, Y, Z],
    label [X, Y, Z])`` volume, and whether the tile holds a lesion voxel: :func:`tile_auroc`'s
    inputs. Threshold 1 selects no tile, so no Focus runs (the Glance fills its place)."""
    from medimg_gfscreen.inference import glance_focus_inference
    from medimg_gfscreen.measurement import OVERLAP, ROI, _tile_lesions

    scores: list[float] = []
    positive: list[bool] = []
    for _, image, label in volumes:
        result = glance_focus_inference(
            image, glance, glance, ROI, OVERLAP, threshold=1.0, keep_probs=False
        )
        scores += [float(p) for _, p, _ in result.tiles]
        positive += _tile_lesions(result, label, ROI)
    return scores, positive


class _Inputs(torch.nn.Module):
    """A Glance that scores ``inputs(x)`` instead of ``x`` (:func:`separability`'s ``inputs``)."""

    def __init__(self, glance: torch.nn.Module, inputs: Callable[[torch.Tensor], torch.Tensor]):
        super().__init__()
        self.glance, self.inputs = glance, inputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.glance(self.inputs(x))


def separability(
    dm,
    volumes,
    steps: int,
    seed: int,
    *,
    inputs: Callable[[torch.Tensor], torch.Tensor] | None = None,
    glance_settings: Any = None,
) -> dict[str, float]:
    """The separability control: a fresh Glance (``measurement.MODEL_KW`` architecture) trained
    by the class-balanced cross-entropy alone (upstream ``get_glance_loss``; no Focus, no RL)
    for ``steps`` steps of ``measurement.CONTROL_PER_CLASS`` lesion tiles and as many
    lesion-free tiles of the experiment's grid of the training volumes of ``dm``
    (:func:`tile_batches`, with the training chain's flips and rotations; AdamW with the
    miniature's lr and weight decay), then its tile AUROC (lesion vs no-lesion tiles on the same
    grid of the test volumes ``volumes``). Returns ``auroc``, ``steps``, ``lesion_tile_rate``
    (test tiles) and ``train_tile_auroc`` (the same Glance on every tile of the training
    volumes: does it fit its own data? NaN when a class is missing). Seeded from ``seed`` (it
    reseeds the global random streams first).

    Tiles, not the training crops, since 2026-12-07 (issue 37; this module's docstring): the
    crops' positives never hold air and their lesion-free negatives often do, and a Glance
    trained on them learned "air" rather than "lesion"."""
    from iclr26_common import seed_everything
    from medimg_gfscreen.measurement import CONTROL_PER_CLASS, MODEL_KW, OVERLAP, ROI, _volumes
    from medimg_gfscreen.model import Glance, glance_ce_loss

    seed_everything(seed + 2000)
    g, optim = glance_settings or MODEL_KW["glance"], MODEL_KW["optim"]
    glance = Glance(g.backbone, g.widths, conv1_stride=g.conv1_stride, norm=g.norm)
    optimizer = torch.optim.AdamW(glance.parameters(), lr=optim.lr, weight_decay=optim.weight_decay)
    training = _volumes(dm, dm.train_key)
    done, losses = 0, []
    glance.train()
    for images, labels in tile_batches(
        training, ROI, OVERLAP, steps, CONTROL_PER_CLASS, seed + 2000
    ):
        loss = glance_ce_loss(glance(images if inputs is None else inputs(images)), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
        done += 1
    glance.eval()
    scorer = glance if inputs is None else _Inputs(glance, inputs)
    fit_scores, fit_positive = glance_tile_scores(scorer, training)
    scores, positive = glance_tile_scores(scorer, volumes)
    head, tail = losses[:80], losses[-80:]
    return {
        "auroc": tile_auroc(scores, positive),
        "steps": float(done),
        "lesion_tile_rate": sum(positive) / max(len(positive), 1),
        "train_tile_auroc": tile_auroc(fit_scores, fit_positive),
        "loss_first_80": sum(head) / len(head) if head else float("nan"),
        "loss_last_80": sum(tail) / len(tail) if tail else float("nan"),
    }
