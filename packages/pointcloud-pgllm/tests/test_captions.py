from __future__ import annotations

import numpy as np
import pytest

from pointcloud_pgllm.captions import GeometricCaptioner, describe, measure
from pointcloud_pgllm.io import normalize_cloud, sample_mesh
from pointcloud_pgllm.synth import SYNTH_CLASSES, _merge, box, cylinder, make_mesh, sphere


def _cloud(parts, n: int = 1024) -> np.ndarray:
    v, f = _merge(parts)
    return normalize_cloud(sample_mesh(v, f, n, 0))


def test_flat_board_is_flat_and_planar() -> None:
    m = measure(_cloud([box((0, 0, 0), (1.0, 0.8, 0.04))]))
    assert m["height_ratio"] < 0.1 and m["plane1"] > 0.35
    assert describe(m).startswith("A very flat object")


def test_upright_cylinder_is_the_dominant_primitive() -> None:
    text = GeometricCaptioner().caption(_cloud([cylinder((0, 0, 0), 0.2, 1.0, res=32)]))
    assert "dominant primitive cylinder" in text and ("tall" in text)


def test_separate_parts_are_counted() -> None:
    m = measure(_cloud([sphere((-1, 0, 0), 0.2), sphere((1, 0, 0), 0.2)]))
    assert m["parts"] == 2
    assert "two separate parts" in describe(m)


def test_four_legged_table_stands_on_four_legs() -> None:
    rng = np.random.default_rng(0)
    v, f = make_mesh("table", rng)
    text = GeometricCaptioner().caption(normalize_cloud(sample_mesh(v, f, 2048, 0)))
    assert "four legs" in text


@pytest.mark.parametrize("name", ["chair", "bottle", "curtain"])
def test_captions_never_name_a_class(name: str) -> None:
    v, f = make_mesh(name, np.random.default_rng(1))
    text = GeometricCaptioner().caption(normalize_cloud(sample_mesh(v, f, 512, 0)))
    words = set(text.lower().replace(",", " ").replace(".", " ").split())
    assert not words & set(SYNTH_CLASSES), text


def test_measure_is_reproducible() -> None:
    v, f = make_mesh("bookshelf", np.random.default_rng(2))
    cloud = normalize_cloud(sample_mesh(v, f, 512, 0))
    assert all(measure(cloud, 3) == measure(cloud, 3) for _ in range(3))
