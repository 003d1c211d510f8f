"""Tests of the synthetic dataset writer (rf_matid.synth_dataset)."""

from __future__ import annotations

import numpy as np
import pytest

from rf_matid import synth
from rf_matid.constants import FREQ_GRID_HZ
from rf_matid.synth_dataset import generate_dataset, sample_rng


def test_generated_files_round_trip_through_load_dataset(tmp_path) -> None:
    from rf_matid.io import load_dataset

    root = generate_dataset(
        tmp_path / "ds",
        classes=["wood02", "brick01"],
        distances_mm=[250, 1900],
        angles_deg=[0, 9],
        samples_per_position=2,
        seed=11,
    )
    data = load_dataset(root, "frequency", cache_dir=tmp_path / "cache")
    assert len(data) == 16
    positions = sorted(
        zip(data.class_names, data.distance_mm.tolist(), data.angle_deg.tolist(), strict=True)
    )
    expected = sorted((c, d, a) for c in ("brick01", "wood02") for d in (250, 1900) for a in (0, 9))
    assert positions == sorted(expected * 2)
    np.testing.assert_array_equal(data.axis, FREQ_GRID_HZ)
    for row in (0, 7, 15):
        index = int(data.files[row].rsplit("/", 1)[-1].split(".")[0])
        key = (data.class_names[row], int(data.distance_mm[row]), int(data.angle_deg[row]), index)
        s11 = synth.simulate_s11(*key[:3], sample_rng(11, *key))
        np.testing.assert_array_equal(np.asarray(data.x[row]), s11)
    time = load_dataset(root, "time", cache_dir=tmp_path / "cache")
    assert time.x.shape[0] == 16 and time.class_names == data.class_names

    subset = generate_dataset(
        tmp_path / "subset", ["wood02"], [1900], [9], samples_per_position=2, seed=11
    )
    sub = load_dataset(subset, "frequency", cache_dir=tmp_path / "cache2")
    rows = [i for i, f in enumerate(data.files) if "wood02-1900mm-9deg" in f]
    np.testing.assert_array_equal(np.asarray(sub.x), np.asarray(data.x)[rows])


def test_generate_dataset_rejects_bad_arguments(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown synthetic class"):
        generate_dataset(tmp_path / "a", classes=["metal01"])
    with pytest.raises(ValueError, match="distances_mm"):
        generate_dataset(tmp_path / "b", distances_mm=[200, -5])
    with pytest.raises(ValueError, match="samples_per_position"):
        generate_dataset(tmp_path / "c", samples_per_position=0)
    root = generate_dataset(tmp_path / "d", ["glass01"], [300], [0], write_time=False)
    with pytest.raises(FileExistsError, match="already holds samples"):
        generate_dataset(root, ["glass01"], [300], [0])
