"""Issue 22: the tfidf scorer never sees the evaluation labels; HDF5 inputs honour ``classes``
and channel-first ``[N, 3, P]`` data is transposed with a notice."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from iclr26_common.testing import assert_one_line_error
from pointcloud_pgllm.cli import main
from pointcloud_pgllm.errors import PGLLMInputError
from pointcloud_pgllm.io import load_dataset, read_h5
from pointcloud_pgllm.scorers import TfidfScorer

ARGS = ["--n-points", "256", "--graph-k", "4", "--quiet"]  # --quiet: no progress lines


def _write_h5(path: Path, points: np.ndarray, labels: np.ndarray) -> Path:
    with h5py.File(path, "w") as f:
        f.create_dataset("data", data=points.astype("f4"))
        f.create_dataset("label", data=labels.reshape(-1, 1).astype("u1"))
    return path


@pytest.fixture(scope="module")
def h5_folder(small_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small OFF tree as a PointNet HDF5 release folder (train 30 clouds, test 18)."""
    folder = tmp_path_factory.mktemp("h5")
    for split in ("train", "test"):
        ds = load_dataset(small_tree, split, n_points=256, seed=0)
        _write_h5(folder / f"ply_data_{split}0.h5", ds.points, ds.labels)
    (folder / "shape_names.txt").write_text("\n".join(ds.class_names) + "\n")
    return folder


@pytest.fixture
def fitted(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Records what every TfidfScorer.fit call was given."""
    calls: list[dict] = []
    original = TfidfScorer.fit

    def spy(self, captions, labels, class_names):  # type: ignore[no-untyped-def]
        calls.append({"n": len(captions), "labels": np.asarray(labels), "names": list(class_names)})
        return original(self, captions, labels, class_names)

    monkeypatch.setattr(TfidfScorer, "fit", spy)
    return calls


def test_single_h5_file_is_refused_for_the_tfidf_scorer(
    h5_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Before the fix this ran with exit 0 and fitted the scorer on the file's own labels."""
    test_file = h5_folder / "ply_data_test0.h5"
    line = assert_one_line_error(
        main,
        ["classify", "--data", str(test_file), *ARGS, "--out", str(tmp_path / "o")],
        capsys,
        prog="pointcloud-pgllm",
    )
    assert "ply_data_test0.h5" in line and "--train-data" in line
    assert not (tmp_path / "o" / "metrics.json").exists()
    line = assert_one_line_error(
        main,
        [
            "classify",
            "--data",
            str(test_file),
            "--train-data",
            str(test_file),
            *ARGS,
            "--out",
            str(tmp_path / "o2"),
        ],
        capsys,
        prog="pointcloud-pgllm",
    )
    assert "evaluation labels" in line


def test_train_split_of_a_folder_is_not_its_own_training_set(
    small_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    line = assert_one_line_error(
        main,
        [
            "classify",
            "--data",
            str(small_tree),
            "--split",
            "train",
            *ARGS,
            "--out",
            str(tmp_path / "o"),
        ],
        capsys,
        prog="pointcloud-pgllm",
    )
    assert "evaluation labels" in line


def test_single_file_with_separate_train_data_fits_on_train_only(
    h5_folder: Path, tmp_path: Path, fitted: list[dict]
) -> None:
    test_file = h5_folder / "ply_data_test0.h5"
    train_file = h5_folder / "ply_data_train0.h5"
    out = tmp_path / "o"
    assert (
        main(
            [
                "classify",
                "--data",
                str(test_file),
                "--train-data",
                str(train_file),
                *ARGS,
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert [c["n"] for c in fitted] == [30]  # the 30 training clouds, never the 18 evaluated
    assert json.loads((out / "metrics.json").read_text())["train_data"] == str(train_file)


def test_h5_folder_honours_classes(h5_folder: Path) -> None:
    ds = load_dataset(h5_folder, "test", n_points=64, classes=["cup", "airplane"])
    assert ds.class_names == ["cup", "airplane"]
    assert len(ds) == 6 and sorted(ds.labels.tolist()) == [0, 0, 0, 1, 1, 1]
    cups = [s for s, lab in zip(ds.sources, ds.labels, strict=True) if lab == 0]
    full = load_dataset(h5_folder, "test", n_points=64)
    cup = full.class_names.index("cup")
    assert cups == [s for s, lab in zip(full.sources, full.labels, strict=True) if lab == cup]
    with pytest.raises(PGLLMInputError, match="'sofa'"):
        load_dataset(h5_folder, "test", classes=["sofa"])


def test_ood_scorer_is_never_trained_on_ood_classes(
    h5_folder: Path, tmp_path: Path, fitted: list[dict]
) -> None:
    """Before the fix the HDF5 folder ignored ``classes`` and the scorer saw all 6 classes."""
    ids = ["chair", "cup", "airplane"]
    out = tmp_path / "o"
    assert (
        main(
            [
                "ood",
                "--data",
                str(h5_folder),
                "--n-points",
                "256",
                "--id-classes",
                ",".join(ids),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    payload = json.loads((out / "metrics.json").read_text())
    assert (payload["graph"], payload["graph_k"]) == ("official", 3)  # AUROC.py's K
    (call,) = fitted
    assert call["names"] == ids and call["n"] == 15  # 3 ID classes x 5 training clouds
    assert set(call["labels"].tolist()) == {0, 1, 2}


def test_channel_first_h5_is_transposed_with_a_notice(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    rng = np.random.default_rng(0)
    points = rng.normal(size=(2, 100, 3))
    path = _write_h5(tmp_path / "cf.h5", points.transpose(0, 2, 1), np.array([0, 1]))
    data, label, _ = read_h5(path)
    assert data.shape == (2, 100, 3) and label.tolist() == [0, 1]
    np.testing.assert_allclose(data, points.astype("f4"))
    err = capsys.readouterr().err
    assert "cf.h5" in err and "channel-first" in err


@pytest.mark.parametrize("case", ["file-data-folder-train", "folder-data-file-train"])
def test_train_data_sharing_an_evaluated_file_is_refused(
    case: str, h5_folder: Path, tmp_path: Path, fitted: list[dict], capsys: pytest.CaptureFixture
) -> None:
    """Review of issue 22, #4: before the fix both ran with exit 0 and fitted the scorer on the
    evaluated file's labels (the guard only compared the two paths)."""
    if case == "file-data-folder-train":  # the folder's train split holds the evaluated file
        data = ["--data", str(h5_folder / "ply_data_train0.h5"), "--train-data", str(h5_folder)]
    else:  # a single file ignores --split: --train-data is the evaluated test file
        data = [
            "--data",
            str(h5_folder),
            "--split",
            "test",
            "--train-data",
            str(h5_folder / "ply_data_test0.h5"),
        ]
    out = tmp_path / "o"
    line = assert_one_line_error(
        main, ["classify", *data, *ARGS, "--out", str(out)], capsys, prog="pointcloud-pgllm"
    )
    shared = "ply_data_train0.h5" if case == "file-data-folder-train" else "ply_data_test0.h5"
    assert shared in line and "evaluation labels" in line
    assert fitted == [] and not (out / "metrics.json").exists()


def test_test_file_with_its_folder_as_train_data_runs(
    h5_folder: Path, tmp_path: Path, fitted: list[dict]
) -> None:
    """The guard is not over-broad: the folder's train split shares no file with the test file."""
    out = tmp_path / "o"
    assert (
        main(
            [
                "classify",
                "--data",
                str(h5_folder / "ply_data_test0.h5"),
                "--train-data",
                str(h5_folder),
                *ARGS,
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert [c["n"] for c in fitted] == [30]


def test_classes_dropping_h5_items_says_how_many(
    h5_folder: Path, capsys: pytest.CaptureFixture
) -> None:
    """Review of issue 22, #11: before the fix the 12 other clouds were dropped silently."""
    load_dataset(h5_folder, "test", n_points=64, classes=["cup", "airplane"])
    err = capsys.readouterr().err
    assert "ply_data_test0.h5" in err and "kept 6 of 18 items" in err
    load_dataset(h5_folder, "test", n_points=64)
    assert "kept" not in capsys.readouterr().err
