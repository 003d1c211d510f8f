"""The geometric captioner on simple solids (issue 39), at several point counts and noise
levels: a cube, a thin plate, an upright cylinder and a sphere, with an asymmetric solid and a
frame with a real opening as controls. At HEAD d9942d3 a cube was "asymmetric ... dominant
primitive cylinder" and plates had "many openings": mirror symmetry used a fixed 0.02, below
the sampling noise (a 1024-point cube measures 0.036), the hole grid stretched a plate's
thickness over 10 cells, and a cube's largest face (1/6 of it) never passed the 0.2 plane rule.
These captions are the scorer's input."""

from __future__ import annotations

import numpy as np
import pytest

from pointcloud_pgllm.captions import describe, measure
from pointcloud_pgllm.io import normalize_cloud, sample_mesh
from pointcloud_pgllm.synth import _merge, box, cylinder, sphere

SHAPES = {
    "cube": [box((0, 0, 0), (1, 1, 1))],
    "plate": [box((0, 0, 0), (1.0, 0.7, 0.03))],
    "cylinder": [cylinder((0, 0, 0), 0.25, 1.0, res=32)],
    "sphere": [sphere((0, 0, 0), 0.5, res=20)],
    # controls: a block with a tower at its +x end (left-right asymmetric, front-back
    # symmetric) and a square frame standing in the xz plane (an opening)
    "tower": [box((0, 0, 0), (1.0, 0.6, 0.3)), box((0.375, 0, 0.35), (0.25, 0.6, 0.4))],
    "frame": [
        box((0, 0, 0.45), (1, 0.1, 0.1)),
        box((0, 0, -0.45), (1, 0.1, 0.1)),
        box((0.45, 0, 0), (0.1, 0.1, 0.8)),
        box((-0.45, 0, 0), (0.1, 0.1, 0.8)),
    ],
    # issue 39 review: two separate blocks 0.4 apart (longest extent 1): two parts, no opening
    # (keeps the spacing-scaled linking radius from merging separate parts)
    "pair": [box((-0.35, 0, 0), (0.3, 0.5, 0.5)), box((0.35, 0, 0), (0.3, 0.5, 0.5))],
}
POINTS = (256, 1024, 2048)
NOISE = (0.0, 0.005, 0.01)  # Gaussian, in units of the unit-sphere-normalised cloud


def _caption(name: str, n: int, noise: float) -> str:
    v, f = _merge(SHAPES[name])
    points = normalize_cloud(sample_mesh(v, f, n, 0))
    points = points + noise * np.random.default_rng(1).normal(size=points.shape)
    return describe(measure(points))


CASES = [(n, noise) for n in POINTS for noise in NOISE]
IDS = [f"{n}pts-noise{noise}" for n, noise in CASES]


@pytest.mark.parametrize(("n", "noise"), CASES, ids=IDS)
def test_simple_solids_get_their_captions(n: int, noise: float) -> None:
    both = "mirror symmetric left-right and front-back"
    cube = _caption("cube", n, noise)
    assert both in cube and "dominant primitive plane" in cube and "opening" not in cube, cube
    plate = _caption("plate", n, noise)
    assert plate.startswith("A very flat object"), plate
    assert both in plate and "dominant primitive plane" in plate and "opening" not in plate, plate
    cyl = _caption("cylinder", n, noise)
    assert both in cyl and "dominant primitive cylinder" in cyl and "opening" not in cyl, cyl
    ball = _caption("sphere", n, noise)
    assert both in ball and "dominant primitive freeform" in ball and "opening" not in ball, ball


@pytest.mark.parametrize(("n", "noise"), CASES, ids=IDS)
def test_the_captioner_still_sees_asymmetry_and_openings(n: int, noise: float) -> None:
    """The controls that keep the tolerances from passing everything."""
    tower = _caption("tower", n, noise)
    assert "mirror symmetric front-back" in tower and "left-right" not in tower, tower
    frame = _caption("frame", n, noise)
    assert "opening" in frame, frame


SWEEP_SEEDS = range(20)  # sampling seeds; held-out 100-139 and 200-239 checked by hand (README)
SWEEP_POINTS = (256, 512, 1024, 2048)
SWEEP_NOISE = (0.0, 0.01)


def _sweep_caption(name: str, n: int, noise: float, seed: int) -> str:
    v, f = _merge(SHAPES[name])
    points = normalize_cloud(sample_mesh(v, f, n, seed))
    points = points + noise * np.random.default_rng(1000 + seed).normal(size=points.shape)
    return describe(measure(points))


@pytest.mark.parametrize("n", SWEEP_POINTS)
def test_primitives_over_many_sampling_seeds(n: int) -> None:
    """Issue 39 review: one sampling seed hid a mislabel rate of ~1 in 20 (a cube "mirror
    symmetric front-back, scattered points", "several separate parts ... with holes"; a
    cylinder "with holes"). Over 20 sampling seeds x 2 noise levels, zero mislabels of
    symmetry, connectedness, openings and primitive (no tolerated rate: the radii have
    false-positive probabilities ~1e-6 per disc). The supports word ("resting on a single
    base") is not checked: it still errs on a few sparse clouds (README, captioner checks)."""
    both = "mirror symmetric left-right and front-back"
    expect = {"cube": "plane", "plate": "plane", "cylinder": "cylinder", "sphere": "freeform"}
    bad: list[str] = []
    for noise in SWEEP_NOISE:
        for seed in SWEEP_SEEDS:
            for name, primitive in expect.items():
                c = _sweep_caption(name, n, noise, seed)
                right = both in c and f"dominant primitive {primitive}" in c
                if not right or "one connected part" not in c or "opening" in c:
                    bad.append(f"{name} noise {noise} seed {seed}: {c}")
            pair = _sweep_caption("pair", n, noise, seed)
            if both not in pair or "two separate parts" not in pair or "opening" in pair:
                bad.append(f"pair noise {noise} seed {seed}: {pair}")
            tower = _sweep_caption("tower", n, noise, seed)
            if "mirror symmetric front-back" not in tower or "left-right" in tower:
                bad.append(f"tower noise {noise} seed {seed}: {tower}")
            frame = _sweep_caption("frame", n, noise, seed)
            if "opening" not in frame:
                bad.append(f"frame noise {noise} seed {seed}: {frame}")
    assert not bad, "\n".join(bad)
