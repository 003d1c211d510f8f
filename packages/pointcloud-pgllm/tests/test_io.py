from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from pointcloud_pgllm.errors import PGLLMInputError
from pointcloud_pgllm.io import load_dataset, read_cloud_file, read_h5, read_off, write_off

TRI_V = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=float)
TRI_F = np.array([[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]])


@pytest.mark.parametrize("glued", [False, True])
def test_off_round_trip(tmp_path: Path, glued: bool) -> None:
    path = write_off(tmp_path / "t.off", TRI_V, TRI_F, glued=glued)
    first = path.read_text().splitlines()[0]
    assert (first == "OFF4 4 0") if glued else (first == "OFF")
    v, f = read_off(path)
    np.testing.assert_allclose(v, TRI_V)
    np.testing.assert_array_equal(f, TRI_F)


def test_off_quads_are_fan_triangulated(tmp_path: Path) -> None:
    p = tmp_path / "q.off"
    p.write_text("OFF\n4 1 0\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n4 0 1 2 3\n")
    _, f = read_off(p)
    assert f.tolist() == [[0, 1, 2], [0, 2, 3]]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("OFF\n4 x 0\n", "counts must be integers"),
        ("OFF\n5 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n", "only 4 data rows"),
        ("OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n3 0 1 2\n", "more rows"),
        ("OFF\n3 1 0\n0 0 0\n1 nan 0\n0 1 0\n3 0 1 2\n", "non-finite"),
        ("OFF\n3 1 0\n0 0 0\n1 0\n0 1 0\n3 0 1 2\n", "line 4: vertex 1"),
        ("OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 7\n", "vertex index outside"),
        ("PLY\n3 1 0\n", "expected 'OFF' header"),
        ("", "empty file"),
        ("OFF\n0 0 0\n", "bad counts"),
    ],
)
def test_bad_off_names_file_and_field(tmp_path: Path, text: str, needle: str) -> None:
    p = tmp_path / "bad.off"
    p.write_text(text)
    with pytest.raises(PGLLMInputError) as info:
        read_off(p)
    assert str(p) in str(info.value) and needle in str(info.value)


def _h5(path: Path, **arrays: np.ndarray) -> Path:
    with h5py.File(path, "w") as f:
        for k, v in arrays.items():
            f.create_dataset(k, data=v)
    return path


def test_pointnet_hdf5_release_folder(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    for i in range(2):
        _h5(
            tmp_path / f"ply_data_train{i}.h5",
            data=rng.normal(size=(3, 64, 3)).astype("f4"),
            label=np.array([[0], [1], [2]], dtype="u1"),
        )
    (tmp_path / "shape_names.txt").write_text("a\nb\nc\n")
    ds = load_dataset(tmp_path, "train", n_points=32)
    assert ds.points.shape == (6, 32, 3) and ds.labels.tolist() == [0, 1, 2, 0, 1, 2]
    assert ds.class_names == ["a", "b", "c"]
    assert np.allclose(np.linalg.norm(ds.points, axis=2).max(axis=1), 1.0, atol=1e-5)


def test_scanobjectnn_h5_with_mask(tmp_path: Path) -> None:
    p = _h5(
        tmp_path / "training_objectdataset.h5",
        data=np.ones((2, 16, 3)) * np.arange(16)[None, :, None],
        label=np.array([4, 1]),
        mask=np.zeros((2, 16)),
    )
    data, label, mask = read_h5(p)
    assert data.shape == (2, 16, 3) and label.tolist() == [4, 1] and mask is not None
    ds = load_dataset(p, n_points=16)
    assert ds.class_names[4] == "class_4"


@pytest.mark.parametrize("missing", ["data", "label"])
def test_h5_missing_key_names_file_and_key(tmp_path: Path, missing: str) -> None:
    arrays = {"data": np.zeros((1, 4, 3)), "label": np.zeros(1, dtype=int)}
    del arrays[missing]
    p = _h5(tmp_path / "x.h5", **arrays)
    with pytest.raises(PGLLMInputError, match=rf"x\.h5.*'{missing}'"):
        read_h5(p)


def test_h5_nan_and_label_without_name(tmp_path: Path) -> None:
    data = np.zeros((2, 4, 3))
    data[1, 2, 0] = np.nan
    with pytest.raises(PGLLMInputError, match="sample 1 has NaN"):
        read_h5(_h5(tmp_path / "nan.h5", data=data, label=np.zeros(2, dtype=int)))
    folder = tmp_path / "rel"
    folder.mkdir()
    _h5(folder / "ply_data_test0.h5", data=np.ones((1, 4, 3)), label=np.array([[5]]))
    (folder / "shape_names.txt").write_text("a\nb\n")
    with pytest.raises(PGLLMInputError, match=r"shape_names\.txt: label 5 has no class name"):
        load_dataset(folder, "test", n_points=4)


@pytest.mark.parametrize("suffix", [".ply", ".pcd", ".xyz"])
def test_open3d_cloud_formats(tmp_path: Path, suffix: str) -> None:
    from pointcloud_pgllm._open3d import o3d

    lib = o3d()
    pts = np.random.default_rng(0).normal(size=(50, 3))
    path = tmp_path / f"c{suffix}"
    lib.io.write_point_cloud(str(path), lib.geometry.PointCloud(lib.utility.Vector3dVector(pts)))
    np.testing.assert_allclose(read_cloud_file(path), pts, atol=1e-5)


def test_empty_cloud_file_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "e.xyz"
    p.write_text("")
    with pytest.raises(PGLLMInputError, match=r"e\.xyz: empty point cloud"):
        read_cloud_file(p)


def test_off_tree_with_glued_headers_and_class_map(small_tree: Path) -> None:
    glued = [
        p
        for p in small_tree.rglob("*.off")
        if p.read_text(errors="ignore").startswith("OFF") and not p.read_text().startswith("OFF\n")
    ]
    assert glued, "the fixture should contain glued headers"
    ds = load_dataset(small_tree, "test", n_points=128, classes=["chair", "cup"])
    assert ds.class_names == ["chair", "cup"] and len(ds) == 6
    assert all("/chair/test/chair_" in s or "/cup/test/cup_" in s for s in ds.sources)
    with pytest.raises(PGLLMInputError, match="class 'sofa' has no 'sofa/test/' folder"):
        load_dataset(small_tree, "test", classes=["chair", "sofa"])


def test_misaligned_rows_are_not_silently_reflowed(tmp_path: Path) -> None:
    p = tmp_path / "m.off"
    p.write_text("OFF\n3 1 0\n0 0\n0 1 0 0\n1 1 0\n3 0 1 2\n")  # 9 numbers, wrong rows
    with pytest.raises(PGLLMInputError, match="line 3: vertex 0"):
        read_off(p)


def test_large_off_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    v = rng.normal(size=(5000, 3))
    f = rng.integers(0, 5000, size=(9000, 3))
    v2, f2 = read_off(write_off(tmp_path / "big.off", v, f))
    np.testing.assert_allclose(v2, v, atol=1e-6)
    np.testing.assert_array_equal(f2, f)
