"""Demonstrations in the LeRobot dataset layout (codebase version v2.1), via pyarrow.

Layout written and read here::

    ROOT/meta/info.json          codebase_version, fps, total_episodes, total_frames, features, ...
    ROOT/meta/episodes.jsonl     {"episode_index": i, "tasks": [...], "length": n} per line
    ROOT/meta/tasks.jsonl        {"task_index": 0, "task": "..."} per line
    ROOT/data/chunk-000/episode_000000.parquet
        observation.state  list<float32>[8]     action  list<float32>[2]
        timestamp float32  frame_index int64  episode_index int64  index int64  task_index int64

Every problem with a file (missing, wrong column, wrong length, NaN, frames out of order, an
``fps`` other than the task's, timestamps off ``frame_index / fps``, ``features`` shapes that do
not match the data, an ``episode_index`` column that disagrees with the file, an episode listed
twice) raises :class:`RemacFormatError` naming the file and the field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robotics_remac.env import ACTION_DIM, DT, OBS_DIM

__all__ = ["Episode", "RemacFormatError", "read_lerobot_dataset", "write_lerobot_dataset"]

CODEBASE_VERSION = "v2.1"
CHUNKS_SIZE = 1000
DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
DEFAULT_TASK = "chase the moving target with the point mass"
TASK_FPS = round(1.0 / DT)  # the point-mass task steps at dt = 0.05 s
TIMESTAMP_TOL_S = 1e-4  # LeRobot's own default ``tolerance_s``


class RemacFormatError(ValueError):
    """Malformed demonstration data; the message names the file and the field."""


@dataclass
class Episode:
    """One demonstration: ``states`` float32 ``[T, 8]``, ``actions`` float32 ``[T, 2]``."""

    states: np.ndarray
    actions: np.ndarray
    task: str = DEFAULT_TASK

    def __post_init__(self) -> None:
        self.states = np.asarray(self.states, dtype=np.float32)
        self.actions = np.asarray(self.actions, dtype=np.float32)
        check_episode(self.states, self.actions, "episode")


def check_episode(states: np.ndarray, actions: np.ndarray, where: str) -> None:
    """Raises :class:`RemacFormatError` for wrong shapes or non-finite values."""
    if states.ndim != 2 or states.shape[1] != OBS_DIM:
        raise RemacFormatError(
            f"{where}: observation.state must have shape [T, {OBS_DIM}], got {states.shape}"
        )
    if actions.ndim != 2 or actions.shape[1] != ACTION_DIM:
        raise RemacFormatError(
            f"{where}: action must have shape [T, {ACTION_DIM}], got {actions.shape}"
        )
    if len(states) != len(actions) or len(states) == 0:
        raise RemacFormatError(
            f"{where}: observation.state has {len(states)} frames, action {len(actions)}"
        )
    for name, arr in (("observation.state", states), ("action", actions)):
        bad = ~np.isfinite(arr).all(axis=1)
        if bad.any():
            raise RemacFormatError(f"{where}: {name} is NaN/inf at frame {int(np.argmax(bad))}")


def _features() -> dict:
    return {
        "observation.state": {"dtype": "float32", "shape": [OBS_DIM], "names": None},
        "action": {"dtype": "float32", "shape": [ACTION_DIM], "names": None},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None},
    }


def write_lerobot_dataset(root: Path | str, episodes: Sequence[Episode]) -> Path:
    """Writes ``episodes`` under ``root`` (which must not exist or be empty); returns ``root``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(root)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} exists and is not empty; choose a new --out folder")
    if not episodes:
        raise ValueError("no episodes to write")
    tasks = sorted({ep.task for ep in episodes})
    task_index = {task: i for i, task in enumerate(tasks)}
    (root / "meta").mkdir(parents=True, exist_ok=True)
    index = 0
    lines = []
    for i, ep in enumerate(episodes):
        n = len(ep.states)
        path = root / DATA_PATH.format(episode_chunk=i // CHUNKS_SIZE, episode_index=i)
        path.parent.mkdir(parents=True, exist_ok=True)
        vec = pa.list_(pa.float32())
        table = pa.table(
            {
                "observation.state": pa.array(list(ep.states), type=vec),
                "action": pa.array(list(ep.actions), type=vec),
                "timestamp": pa.array(np.arange(n, dtype=np.float32) * np.float32(DT)),
                "frame_index": pa.array(np.arange(n, dtype=np.int64)),
                "episode_index": pa.array(np.full(n, i, dtype=np.int64)),
                "index": pa.array(np.arange(index, index + n, dtype=np.int64)),
                "task_index": pa.array(np.full(n, task_index[ep.task], dtype=np.int64)),
            }
        )
        pq.write_table(table, path)
        index += n
        lines.append({"episode_index": i, "tasks": [ep.task], "length": n})
    total_chunks = (len(episodes) - 1) // CHUNKS_SIZE + 1
    info = {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": "point_mass_2d",
        "total_episodes": len(episodes),
        "total_frames": index,
        "total_tasks": len(tasks),
        "total_videos": 0,
        "total_chunks": total_chunks,
        "chunks_size": CHUNKS_SIZE,
        "fps": TASK_FPS,
        "splits": {"train": f"0:{len(episodes)}"},
        "data_path": DATA_PATH,
        "video_path": None,
        "features": _features(),
    }
    (root / "meta" / "info.json").write_text(json.dumps(info, indent=2))
    (root / "meta" / "episodes.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (root / "meta" / "tasks.jsonl").write_text(
        "".join(json.dumps({"task_index": i, "task": t}) + "\n" for i, t in enumerate(tasks))
    )
    return root


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise RemacFormatError(f"{path}: missing (LeRobot v2.1 layout expected)")
    rows = []
    for k, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise RemacFormatError(f"{path}: line {k} is not JSON ({error.msg})") from None
    return rows


def _column(table, name: str, path: Path, width: int | None) -> np.ndarray:
    if name not in table.column_names:
        raise RemacFormatError(f"{path}: column {name!r} missing (has {table.column_names})")
    values = table.column(name).to_pylist()
    if width is None:
        if any(v is None for v in values):
            raise RemacFormatError(f"{path}: column {name!r} has nulls")
        return np.asarray(values)
    for k, v in enumerate(values):
        if v is None or len(v) != width:
            got = None if v is None else len(v)
            raise RemacFormatError(
                f"{path}: column {name!r} row {k} has length {got}, expected {width}"
            )
    return np.asarray(values, dtype=np.float32).reshape(len(values), width)


def _feature_width(info: dict, name: str, info_path: Path) -> int:
    """The vector width ``features[name].shape == [n]`` declared in ``meta/info.json``."""
    feature = info.get("features", {}).get(name) if isinstance(info.get("features"), dict) else None
    if not isinstance(feature, dict):
        raise RemacFormatError(f"{info_path}: features[{name!r}] missing")
    shape = feature.get("shape")
    if not (isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int)):
        raise RemacFormatError(f"{info_path}: features[{name!r}].shape {shape!r} is not [n]")
    return shape[0]


def _check_fps(info: dict, info_path: Path, fps: float | None) -> float:
    value = info.get("fps")
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise RemacFormatError(f"{info_path}: fps {value!r} is not a positive number")
    if fps is not None and abs(value - fps) > 1e-9:
        raise RemacFormatError(f"{info_path}: fps {value} but the task runs at {fps} fps")
    return float(value)


def read_lerobot_dataset(root: Path | str, fps: float | None = TASK_FPS) -> list[Episode]:
    """Reads every episode listed in ``meta/episodes.jsonl`` of a LeRobot v2.1 dataset.

    ``fps``: the frame rate the dataset must declare (the task's 20 fps; ``None`` accepts any);
    timestamps must equal ``frame_index / fps`` within ``TIMESTAMP_TOL_S``.
    """
    import pyarrow.parquet as pq

    root = Path(root)
    if not root.is_dir():
        raise RemacFormatError(f"{root}: dataset folder not found")
    info_path = root / "meta" / "info.json"
    if not info_path.is_file():
        raise RemacFormatError(f"{info_path}: missing (LeRobot v2.1 layout expected)")
    try:
        info = json.loads(info_path.read_text())
    except json.JSONDecodeError as error:
        raise RemacFormatError(f"{info_path}: not JSON ({error.msg})") from None
    version = str(info.get("codebase_version", ""))
    if not version.startswith("v2"):
        raise RemacFormatError(f"{info_path}: codebase_version {version!r}, expected v2.x")
    rate = _check_fps(info, info_path, fps)
    widths = {
        name: _feature_width(info, name, info_path) for name in ("observation.state", "action")
    }
    for name, width in zip(widths, (OBS_DIM, ACTION_DIM), strict=True):
        if widths[name] != width:
            raise RemacFormatError(
                f"{info_path}: features[{name!r}].shape [{widths[name]}], the task needs [{width}]"
            )
    data_path = info.get("data_path", DATA_PATH)
    chunks_size = int(info.get("chunks_size", CHUNKS_SIZE))
    tasks = {int(row["task_index"]): row["task"] for row in _read_jsonl(root / "meta/tasks.jsonl")}
    episodes = []
    seen: set[int] = set()
    episodes_path = root / "meta" / "episodes.jsonl"
    for row in _read_jsonl(episodes_path):
        if not isinstance(row.get("episode_index"), int):
            raise RemacFormatError(
                f"{episodes_path}: episode_index {row.get('episode_index')!r} is not an integer"
            )
        i = row["episode_index"]
        if i in seen:
            raise RemacFormatError(f"{episodes_path}: episode_index {i} listed twice")
        seen.add(i)
        path = root / data_path.format(episode_chunk=i // chunks_size, episode_index=i)
        if not path.is_file():
            raise RemacFormatError(f"{path}: missing (listed in meta/episodes.jsonl)")
        try:
            table = pq.read_table(path)
        except Exception as error:  # pyarrow raises several types for corrupt files
            raise RemacFormatError(f"{path}: not a readable parquet file ({error})") from None
        for name, width in widths.items():
            first = table.column(name)[0].as_py() if name in table.column_names else None
            if first is not None and table.num_rows and len(first) != width:
                raise RemacFormatError(
                    f"{path}: column {name!r} is {len(first)} wide but {info_path.name} "
                    f"features[{name!r}].shape is [{width}]"
                )
        states = _column(table, "observation.state", path, widths["observation.state"])
        actions = _column(table, "action", path, widths["action"])
        frames = _column(table, "frame_index", path, None)
        if not np.array_equal(frames, np.arange(len(frames))):
            raise RemacFormatError(f"{path}: column 'frame_index' is not 0..{len(frames) - 1}")
        ep_ids = _column(table, "episode_index", path, None)
        if len(ep_ids) and not (ep_ids == i).all():
            other = int(ep_ids[np.argmax(ep_ids != i)])
            raise RemacFormatError(
                f"{path}: column 'episode_index' holds {other}, but the file is episode {i}"
            )
        stamps = _column(table, "timestamp", path, None).astype(np.float64).reshape(-1)
        off = np.abs(stamps - frames / rate)
        if len(off) and off.max() > TIMESTAMP_TOL_S:
            k = int(np.argmax(off > TIMESTAMP_TOL_S))  # the first frame off
            raise RemacFormatError(
                f"{path}: column 'timestamp' is {stamps[k]:.6g} at frame {k}, "
                f"expected {frames[k] / rate:.6g} (fps {rate:g})"
            )
        if "length" in row and int(row["length"]) != len(frames):
            raise RemacFormatError(
                f"{path}: {len(frames)} frames but meta/episodes.jsonl says {row['length']}"
            )
        task_ids = _column(table, "task_index", path, None)
        task = tasks.get(int(task_ids[0]), DEFAULT_TASK) if len(task_ids) else DEFAULT_TASK
        check_episode(states, actions, str(path))
        episodes.append(Episode(states, actions, task))
    if not episodes:
        raise RemacFormatError(f"{root / 'meta/episodes.jsonl'}: lists no episodes")
    return episodes
