"""LeRobot v3.0 read/write and the v2.1 writer's ``meta/episodes_stats.jsonl`` (issue 25).

``lerobot`` is not installed in the workspace, so these test the documented layout: a v3.0
dataset built by hand (two data files, episodes split across them, tasks as pandas writes them)
and the files our writer produces.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robotics_remac.dataset_format import Episode, RemacFormatError
from robotics_remac.dataset_reader import read_lerobot_dataset
from robotics_remac.dataset_writer import write_lerobot_dataset


def _episodes(lengths=(5, 9, 7), seed=0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    return [Episode(rng.normal(size=(n, 8)), rng.normal(size=(n, 2))) for n in lengths]


def test_v21_writer_writes_episode_stats(tmp_path: Path) -> None:
    actions = np.array([[0.0, 1.0], [2.0, -1.0], [4.0, 3.0]], dtype=np.float32)
    ep = Episode(np.zeros((3, 8)), actions)
    root = write_lerobot_dataset(tmp_path / "d", [ep, ep])
    lines = (root / "meta/episodes_stats.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["episode_index"] for r in rows] == [0, 1]
    act = rows[0]["stats"]["action"]
    # by hand: column 0 is 0, 2, 4 -> mean 2, population std sqrt(8/3); column 1 is 1, -1, 3
    assert act["min"] == [0.0, -1.0] and act["max"] == [4.0, 3.0] and act["count"] == [3]
    assert act["mean"] == pytest.approx([2.0, 1.0])
    assert act["std"] == pytest.approx([np.sqrt(8 / 3), np.sqrt(8 / 3)])
    assert rows[1]["stats"]["index"]["min"] == [3.0]  # global index of episode 1's first frame
    assert rows[0]["stats"]["timestamp"]["max"] == pytest.approx([0.1])
    assert set(rows[0]["stats"]) == {
        "observation.state",
        "action",
        "timestamp",
        "frame_index",
        "episode_index",
        "index",
        "task_index",
    }


def test_v3_round_trip(tmp_path: Path) -> None:
    eps = _episodes()
    root = write_lerobot_dataset(tmp_path / "d", eps, version="v3.0")
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["total_frames"] == 21
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    meta = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [(m["dataset_from_index"], m["dataset_to_index"]) for m in meta] == [
        (0, 5),
        (5, 14),
        (14, 21),
    ]
    assert pq.read_table(root / "data/chunk-000/file-000.parquet").num_rows == 21
    assert json.loads((root / "meta/stats.json").read_text())["action"]["count"] == [21]
    back = read_lerobot_dataset(root)
    for a, b in zip(eps, back, strict=True):
        np.testing.assert_allclose(a.states, b.states)
        np.testing.assert_allclose(a.actions, b.actions)
        assert b.task == a.task


def _frames(episode: int, n: int, first: int, task: int = 0) -> pa.Table:
    vec = pa.list_(pa.float32())
    return pa.table(
        {
            "observation.state": pa.array([[float(episode)] * 8] * n, type=vec),
            "action": pa.array([[float(k), -1.0] for k in range(n)], type=vec),
            "timestamp": pa.array(np.arange(n, dtype=np.float32) * np.float32(0.05)),
            "frame_index": pa.array(np.arange(n, dtype=np.int64)),
            "episode_index": pa.array(np.full(n, episode, dtype=np.int64)),
            "index": pa.array(np.arange(first, first + n, dtype=np.int64)),
            "task_index": pa.array(np.full(n, task, dtype=np.int64)),
        }
    )


def _hand_built_v3(root: Path) -> Path:
    """Episodes 0 and 1 in file-000 (rows of episode 1 stored before episode 0's), episode 2 in
    file-001; tasks stored with the task text as the (pandas) index column."""
    (root / "data/chunk-000").mkdir(parents=True)
    (root / "meta/episodes/chunk-000").mkdir(parents=True)
    f0 = pa.concat_tables([_frames(1, 4, 3, task=1), _frames(0, 3, 0)])
    pq.write_table(f0, root / "data/chunk-000/file-000.parquet")
    pq.write_table(_frames(2, 5, 7), root / "data/chunk-000/file-001.parquet")
    rows = [
        {
            "episode_index": e,
            "tasks": ["t"],
            "length": n,
            "data/chunk_index": 0,
            "data/file_index": f,
            "dataset_from_index": lo,
            "dataset_to_index": lo + n,
        }
        for e, n, f, lo in ((0, 3, 0, 0), (1, 4, 0, 3), (2, 5, 1, 7))
    ]
    pq.write_table(pa.Table.from_pylist(rows), root / "meta/episodes/chunk-000/file-000.parquet")
    tasks = pa.table({"task_index": [0, 1], "__index_level_0__": ["reach", "chase"]})
    pq.write_table(tasks, root / "meta/tasks.parquet")
    features = {
        "observation.state": {"dtype": "float32", "shape": [8], "names": None},
        "action": {"dtype": "float32", "shape": [2], "names": None},
    }
    info = {
        "codebase_version": "v3.0",
        "fps": 20,
        "chunks_size": 1000,
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "features": features,
    }
    (root / "meta/info.json").write_text(json.dumps(info))
    return root


def test_v3_documented_layout_by_hand(tmp_path: Path) -> None:
    episodes = read_lerobot_dataset(_hand_built_v3(tmp_path / "d"))
    assert [len(ep.states) for ep in episodes] == [3, 4, 5]
    assert [float(ep.states[0, 0]) for ep in episodes] == [0.0, 1.0, 2.0]
    np.testing.assert_array_equal(episodes[1].actions[:, 0], [0, 1, 2, 3])  # frame order kept
    assert [ep.task for ep in episodes] == ["reach", "chase", "reach"]


def _edit_meta_row(root: Path, episode: int, **changes: object) -> None:
    path = root / "meta/episodes/chunk-000/file-000.parquet"
    rows = pq.read_table(path).to_pylist()
    rows[episode].update(changes)
    pq.write_table(pa.Table.from_pylist(rows), path)


def test_v3_index_range_disagreeing_with_the_data_is_one_line(tmp_path: Path) -> None:
    root = _hand_built_v3(tmp_path / "d")
    _edit_meta_row(root, 2, dataset_to_index=14)  # 7 frames claimed, the file has 5
    with pytest.raises(RemacFormatError) as err:
        read_lerobot_dataset(root)
    msg = str(err.value)
    assert "\n" not in msg and "file-001.parquet: column 'index' holds 5" in msg
    assert "dataset_to_index" in msg


def test_v3_range_holding_another_episode_is_rejected(tmp_path: Path) -> None:
    root = _hand_built_v3(tmp_path / "d")
    _edit_meta_row(root, 0, dataset_from_index=3, dataset_to_index=6, length=3)  # episode 1's
    with pytest.raises(
        RemacFormatError, match=r"file-000\.parquet: column 'episode_index' holds 1"
    ):
        read_lerobot_dataset(root)


def test_v3_duplicated_episode_and_missing_file(tmp_path: Path) -> None:
    root = _hand_built_v3(tmp_path / "d")
    _edit_meta_row(root, 2, episode_index=1)
    with pytest.raises(RemacFormatError, match="episode_index 1 listed twice"):
        read_lerobot_dataset(root)
    _edit_meta_row(root, 2, episode_index=2, **{"data/file_index": 9})
    with pytest.raises(RemacFormatError, match=r"file-009\.parquet: missing"):
        read_lerobot_dataset(root)


def test_v3_fps_and_shape_checks_apply(tmp_path: Path) -> None:
    root = _hand_built_v3(tmp_path / "d")
    info = json.loads((root / "meta/info.json").read_text())
    info["features"]["action"]["shape"] = [3]
    (root / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(RemacFormatError, match=r"info\.json: features\['action'\]\.shape \[3\]"):
        read_lerobot_dataset(root)
    info["features"]["action"]["shape"] = [2]
    info["fps"] = 30
    (root / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(RemacFormatError, match="fps 30 but the task runs at 20"):
        read_lerobot_dataset(root)


def test_unknown_version_is_one_line(tmp_path: Path) -> None:
    root = _hand_built_v3(tmp_path / "d")
    info = json.loads((root / "meta/info.json").read_text())
    info["codebase_version"] = "v1.6"
    (root / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(
        RemacFormatError, match=r"codebase_version 'v1\.6', expected v2\.x or v3\.x"
    ):
        read_lerobot_dataset(root)
    with pytest.raises(ValueError, match="version must be"):
        write_lerobot_dataset(tmp_path / "new", _episodes(), version="v1.6")


def test_collect_v3_then_datamodule_reads_it(tmp_path: Path) -> None:
    from robotics_remac.cli import main
    from robotics_remac.data import DemoDataModule

    out = tmp_path / "v3"
    assert (
        main(["collect", "--out", str(out), "--episodes", "3", "--codebase-version", "v3.0"]) == 0
    )
    assert (out / "meta/episodes/chunk-000/file-000.parquet").is_file()
    dm = DemoDataModule(str(out), horizon=8, batch_size=16)
    dm.setup()
    assert (dm.obs_dim, dm.action_dim) == (8, 2) and len(dm.train_set) == 2 * (120 - 8 + 1)
