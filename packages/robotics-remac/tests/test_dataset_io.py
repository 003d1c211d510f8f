from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robotics_remac.dataset_format import Episode, RemacFormatError
from robotics_remac.dataset_reader import read_lerobot_dataset
from robotics_remac.dataset_writer import write_lerobot_dataset


def test_round_trip_keeps_every_frame(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    eps = [Episode(rng.normal(size=(n, 8)), rng.normal(size=(n, 2))) for n in (5, 9)]
    root = write_lerobot_dataset(tmp_path / "d", eps)
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v2.1" and info["total_frames"] == 14 and info["fps"] == 20
    table = pq.read_table(root / "data/chunk-000/episode_000001.parquet")
    assert table.column("index").to_pylist() == list(range(5, 14))
    assert set(table.column_names) >= {
        "observation.state",
        "action",
        "timestamp",
        "frame_index",
        "episode_index",
        "task_index",
    }
    back = read_lerobot_dataset(root)
    for a, b in zip(eps, back, strict=True):
        np.testing.assert_allclose(a.states, b.states)
        np.testing.assert_allclose(a.actions, b.actions)


def test_refuses_to_write_into_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_text("mine")
    with pytest.raises(FileExistsError):
        write_lerobot_dataset(tmp_path / "d", [Episode(np.zeros((2, 8)), np.zeros((2, 2)))])


def _copy(demo_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(demo_dir, tmp_path / "copy"))


def _rewrite(path: Path, column: str, values: list) -> None:
    table = pq.read_table(path)
    i = table.column_names.index(column)
    pq.write_table(table.set_column(i, column, pa.array(values)), path)


def _with(values: list, index: int, value: object) -> list:
    """``values`` with ``values[index]`` replaced by ``value``."""
    return [value if i == index else v for i, v in enumerate(values)]


@pytest.mark.parametrize(
    ("episode", "column", "edit", "message"),
    [
        pytest.param(
            2,
            "action",
            lambda actions: _with(actions, 7, [float("nan"), 0.0]),
            r"episode_000002\.parquet: action is NaN/inf at frame 7",
            id="nan_action",
        ),
        pytest.param(
            0,
            "observation.state",
            lambda states: _with(states, 3, states[3][:5]),
            r"'observation.state' row 3 has length 5",
            id="wrong_state_width",
        ),
        # issue 25: columns that used to load silently
        pytest.param(
            3,
            "timestamp",
            lambda old: [np.float32(k / 50) for k in range(len(old))],  # written at 50 fps
            # frame 1 is the first off: 0.02 s instead of 0.05 s
            r"episode_000003\.parquet: column 'timestamp' is 0\.02 at frame 1, expected 0\.05",
            id="timestamps_inconsistent_with_fps",
        ),
        pytest.param(
            0,
            "episode_index",
            lambda old: [7] * len(old),
            r"episode_000000\.parquet: column 'episode_index' holds 7, but the file is episode 0",
            id="episode_index_other_than_the_file",
        ),
        pytest.param(  # used to fall back to the default task silently
            4,
            "task_index",
            lambda old: [3] * len(old),
            r"episode_000004\.parquet: column 'task_index' holds 3, which .*tasks\.jsonl "
            r"does not list",
            id="task_index_missing_from_tasks_jsonl",
        ),
    ],
)
def test_bad_parquet_column_names_file_and_field(
    demo_dir: Path, tmp_path: Path, episode: int, column: str, edit, message: str
) -> None:
    """The ``column`` of episode ``episode``, rewritten by ``edit`` (old values -> new)."""
    root = _copy(demo_dir, tmp_path)
    path = root / f"data/chunk-000/episode_{episode:06d}.parquet"
    _rewrite(path, column, edit(pq.read_table(path).column(column).to_pylist()))
    with pytest.raises(RemacFormatError, match=message):
        read_lerobot_dataset(root)


def test_missing_column_and_missing_file(demo_dir: Path, tmp_path: Path) -> None:
    root = _copy(demo_dir, tmp_path)
    path = root / "data/chunk-000/episode_000001.parquet"
    pq.write_table(pq.read_table(path).drop(["action"]), path)
    with pytest.raises(RemacFormatError, match="column 'action' missing"):
        read_lerobot_dataset(root)
    path.unlink()
    with pytest.raises(RemacFormatError, match=r"episode_000001\.parquet: missing"):
        read_lerobot_dataset(root)


def test_bad_meta(tmp_path: Path, demo_dir: Path) -> None:
    with pytest.raises(RemacFormatError, match="not found"):
        read_lerobot_dataset(tmp_path / "nope")
    root = _copy(demo_dir, tmp_path)
    (root / "meta/episodes.jsonl").write_text('{"episode_index": 0, "length": 3}\n')
    with pytest.raises(RemacFormatError, match="says 3"):
        read_lerobot_dataset(root)
    (root / "meta/info.json").write_text("{not json")
    with pytest.raises(RemacFormatError, match=r"info\.json: not JSON"):
        read_lerobot_dataset(root)


def test_episode_shape_checks() -> None:
    with pytest.raises(RemacFormatError, match=r"observation.state must have shape"):
        Episode(np.zeros(4), np.zeros((4, 2)))
    with pytest.raises(RemacFormatError, match=r"action must have shape"):
        Episode(np.zeros((4, 8)), np.zeros((4, 0)))
    assert Episode(np.zeros((4, 7)), np.zeros((4, 3))).states.shape == (4, 7)  # any sizes
    with pytest.raises(RemacFormatError, match="has 4 frames, action 3"):
        Episode(np.zeros((4, 8)), np.zeros((3, 2)))


# -- issue 25: fields that used to load silently; each planted defect is one error naming the
# -- file and the field (each of these loaded without error before the fix).


def _edit_info(root: Path, **changes: object) -> None:
    path = root / "meta/info.json"
    info = json.loads(path.read_text())
    info.update(changes)
    path.write_text(json.dumps(info))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({"fps": 50}, r"info\.json: fps 50 but the task runs at 20 fps", id="fps"),
        pytest.param({"fps": "twenty"}, r"info\.json: fps 'twenty'", id="fps_not_a_number"),
        # review of issue 25: these raised raw Python errors (a traceback in the CLI)
        pytest.param(
            {"chunks_size": "abc"},
            r"info\.json: chunks_size 'abc' is not a positive integer",
            id="chunks_size",
        ),
        pytest.param(
            {"data_path": "data/{foo}.parquet"},
            r"info\.json: data_path 'data/\{foo\}\.parquet' is not a template",
            id="data_path_with_unknown_fields",
        ),
    ],
)
def test_bad_info_field_is_one_line_naming_it(
    demo_dir: Path, tmp_path: Path, changes: dict, message: str
) -> None:
    root = _copy(demo_dir, tmp_path)
    _edit_info(root, **changes)
    with pytest.raises(RemacFormatError, match=message) as info:
        read_lerobot_dataset(root)
    assert "\n" not in str(info.value)


def test_features_shape_must_match_the_data(demo_dir: Path, tmp_path: Path) -> None:
    root = _copy(demo_dir, tmp_path)
    info = json.loads((root / "meta/info.json").read_text())
    info["features"]["observation.state"]["shape"] = [6]
    (root / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(
        RemacFormatError, match=r"info\.json: features\['observation.state'\]\.shape \[6\]"
    ):
        read_lerobot_dataset(root)


def test_episode_listed_twice_is_rejected(demo_dir: Path, tmp_path: Path) -> None:
    """A duplicated row would put the same episode in both train and validation."""
    root = _copy(demo_dir, tmp_path)
    path = root / "meta/episodes.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[2]]) + "\n")
    with pytest.raises(RemacFormatError, match=r"episodes\.jsonl: episode_index 2 listed twice"):
        read_lerobot_dataset(root)


# -- review of issue 25: meta fields that raised raw Python errors (KeyError / ValueError, a
# -- traceback in the CLI) or loaded silently before; each is now one error naming file and field.


def test_tasks_row_without_task_index(demo_dir: Path, tmp_path: Path) -> None:
    root = _copy(demo_dir, tmp_path)
    (root / "meta/tasks.jsonl").write_text('{"task": "chase the target"}\n')
    with pytest.raises(
        RemacFormatError, match=r"tasks\.jsonl: line 1: task_index None missing or not an integer"
    ):
        read_lerobot_dataset(root)
