from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pointcloud_pgllm.synth import (
    SYNTH_CLASSES,
    SYNTH_ID_CLASSES,
    generate_dataset,
    make_mesh,
    synthetic_clouds,
)


def test_layout_and_numbering(small_tree: Path) -> None:
    classes = sorted(p.name for p in small_tree.iterdir())
    assert classes == sorted(["airplane", "bottle", "chair", "cup", "stool", "table"])
    names = sorted(p.name for p in (small_tree / "cup" / "test").iterdir())
    assert names == ["cup_0006.off", "cup_0007.off", "cup_0008.off"]  # numbered after train


def test_id_classes_are_mn1() -> None:
    from pointcloud_pgllm.constants import OOD_SPLITS

    assert SYNTH_ID_CLASSES == OOD_SPLITS["MN1"]
    assert len(SYNTH_CLASSES) >= 23 and {"stool", "table", "lamp"} <= set(SYNTH_CLASSES) - set(
        SYNTH_ID_CLASSES
    )


@pytest.mark.parametrize("name", SYNTH_CLASSES)
def test_every_class_builds_a_valid_mesh(name: str) -> None:
    v, f = make_mesh(name, np.random.default_rng(0))
    assert v.ndim == 2 and v.shape[1] == 3 and np.isfinite(v).all()
    assert f.min() >= 0 and f.max() < len(v) and len(f) > 0


def test_random_proportions_differ_between_instances() -> None:
    rng = np.random.default_rng(0)
    a, b = make_mesh("chair", rng)[0], make_mesh("chair", rng)[0]
    assert not np.allclose(np.ptp(a, axis=0), np.ptp(b, axis=0))


def test_refuses_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("")
    with pytest.raises(FileExistsError):
        generate_dataset(tmp_path, ["cup"], n_train=1, n_test=1)


def test_synthetic_classes_carry_a_signal() -> None:
    """Leave-one-out 1-NN on training-free Point-NN features beats chance (1/13) by far."""
    import torch

    from pointcloud_pgllm.model import PointNN, encode

    ds = synthetic_clouds(n_per_class=4, n_points=256, seed=3)
    feats = torch.nn.functional.normalize(encode(PointNN(3, 24, 16), ds.points), dim=1)
    sim = feats @ feats.T
    sim.fill_diagonal_(-2)
    acc = float((ds.labels[sim.argmax(1).numpy()] == ds.labels).mean())
    assert acc >= 0.6, acc
