"""Demonstrations in the LeRobot dataset layout (codebase versions v2.1 and v3.0), via pyarrow.

v2.1 layout written and read here (v3.0: see :func:`write_lerobot_dataset`)::

    ROOT/meta/info.json          codebase_version, fps, total_episodes, total_frames, features, ...
    ROOT/meta/episodes.jsonl     {"episode_index": i, "tasks": [...], "length": n} per line
    ROOT/meta/tasks.jsonl        {"task_index": 0, "task": "..."} per line
    ROOT/meta/episodes_stats.jsonl  {"episode_index": i, "stats": {column: {min, max, mean, ...}}}
    ROOT/data/chunk-000/episode_000000.parquet
        observation.state  list<float32>[O]     action  list<float32>[A]
        timestamp float32  frame_index int64  episode_index int64  index int64  task_index int64

The sizes ``O`` and ``A`` are those ``meta/info.json`` declares (``features[name].shape == [n]``;
the chase task's demonstrations have ``O = 8``, ``A = 2``); :func:`dataset_dims` reads them.

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

from robotics_remac.env import DT

__all__ = [
    "Episode",
    "RemacFormatError",
    "dataset_dims",
    "read_lerobot_dataset",
    "write_lerobot_dataset",
]

CODEBASE_VERSION = "v2.1"
V3_VERSION = "v3.0"
V3_DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
CHUNKS_SIZE = 1000
DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
DEFAULT_TASK = "chase the moving target with the point mass"
TASK_FPS = round(1.0 / DT)  # the point-mass task steps at dt = 0.05 s
TIMESTAMP_TOL_S = 1e-4  # LeRobot's own default ``tolerance_s``


class RemacFormatError(ValueError):
    """Malformed demonstration data; the message names the file and the field."""


@dataclass
class Episode:
    """One demonstration: ``states`` float32 ``[T, O]``, ``actions`` float32 ``[T, A]`` (the chase
    task: ``O = 8``, ``A = 2``)."""

    states: np.ndarray
    actions: np.ndarray
    task: str = DEFAULT_TASK

    def __post_init__(self) -> None:
        self.states = np.asarray(self.states, dtype=np.float32)
        self.actions = np.asarray(self.actions, dtype=np.float32)
        check_episode(self.states, self.actions, "episode")


def check_episode(
    states: np.ndarray,
    actions: np.ndarray,
    where: str,
    obs_dim: int | None = None,
    action_dim: int | None = None,
) -> None:
    """Raises :class:`RemacFormatError` for wrong shapes (``[T, O]`` / ``[T, A]``, with ``O`` /
    ``A`` checked when given) or non-finite values."""
    for name, arr, width in (
        ("observation.state", states, obs_dim),
        ("action", actions, action_dim),
    ):
        if arr.ndim != 2 or arr.shape[1] < 1 or (width is not None and arr.shape[1] != width):
            want = f"[T, {width}]" if width is not None else "[T, n]"
            raise RemacFormatError(f"{where}: {name} must have shape {want}, got {arr.shape}")
    if len(states) != len(actions) or len(states) == 0:
        raise RemacFormatError(
            f"{where}: observation.state has {len(states)} frames, action {len(actions)}"
        )
    for name, arr in (("observation.state", states), ("action", actions)):
        bad = ~np.isfinite(arr).all(axis=1)
        if bad.any():
            raise RemacFormatError(f"{where}: {name} is NaN/inf at frame {int(np.argmax(bad))}")


def _features(obs_dim: int, action_dim: int) -> dict:
    return {
        "observation.state": {"dtype": "float32", "shape": [obs_dim], "names": None},
        "action": {"dtype": "float32", "shape": [action_dim], "names": None},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None},
    }


def _episode_table(ep: Episode, i: int, first_index: int, task_index: int):  # type: ignore[no-untyped-def]
    """The frame table of episode ``i`` (global ``index`` from ``first_index``)."""
    import pyarrow as pa

    n = len(ep.states)
    vec = pa.list_(pa.float32())
    return pa.table(
        {
            "observation.state": pa.array(list(ep.states), type=vec),
            "action": pa.array(list(ep.actions), type=vec),
            "timestamp": pa.array(np.arange(n, dtype=np.float32) * np.float32(DT)),
            "frame_index": pa.array(np.arange(n, dtype=np.int64)),
            "episode_index": pa.array(np.full(n, i, dtype=np.int64)),
            "index": pa.array(np.arange(first_index, first_index + n, dtype=np.int64)),
            "task_index": pa.array(np.full(n, task_index, dtype=np.int64)),
        }
    )


def episode_stats(table) -> dict[str, dict[str, list]]:  # type: ignore[no-untyped-def]
    """LeRobot's per-episode statistics of every feature column: ``min``, ``max``, ``mean``,
    ``std`` (population) per vector component and ``count`` ``[T]`` (one-element lists for
    scalar columns), as in v2.1 ``meta/episodes_stats.jsonl``."""
    stats = {}
    for name in table.column_names:
        values = np.asarray(table.column(name).to_pylist(), dtype=np.float64)
        values = values.reshape(len(values), -1)
        stats[name] = {
            "min": values.min(0).tolist(),
            "max": values.max(0).tolist(),
            "mean": values.mean(0).tolist(),
            "std": values.std(0).tolist(),
            "count": [len(values)],
        }
    return stats


def write_lerobot_dataset(
    root: Path | str, episodes: Sequence[Episode], version: str = CODEBASE_VERSION
) -> Path:
    """Writes ``episodes`` under ``root`` (which must not exist or be empty); returns ``root``.

    ``version="v2.1"``: one parquet file per episode, ``meta/episodes.jsonl``,
    ``meta/tasks.jsonl`` and ``meta/episodes_stats.jsonl``. ``version="v3.0"``: LeRobot's current
    layout (documented, not checked against ``lerobot``, which is not installed here): every
    episode in ``data/chunk-000/file-000.parquet``, one row per episode in
    ``meta/episodes/chunk-000/file-000.parquet`` (``episode_index``, ``tasks``, ``length``,
    ``data/chunk_index``, ``data/file_index``, ``dataset_from_index``, ``dataset_to_index``),
    ``meta/tasks.parquet`` and ``meta/stats.json``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if version not in (CODEBASE_VERSION, V3_VERSION):
        raise ValueError(f"version must be {CODEBASE_VERSION} or {V3_VERSION}, got {version!r}")
    root = Path(root)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} exists and is not empty; choose a new --out folder")
    if not episodes:
        raise ValueError("no episodes to write")
    obs_dim, action_dim = episodes[0].states.shape[1], episodes[0].actions.shape[1]
    for i, ep in enumerate(episodes):
        check_episode(ep.states, ep.actions, f"episode {i}", obs_dim, action_dim)
    tasks = sorted({ep.task for ep in episodes})
    task_index = {task: i for i, task in enumerate(tasks)}
    (root / "meta").mkdir(parents=True, exist_ok=True)
    index = 0
    rows, tables, stats = [], [], []
    for i, ep in enumerate(episodes):
        table = _episode_table(ep, i, index, task_index[ep.task])
        rows.append({"episode_index": i, "tasks": [ep.task], "length": len(ep.states)})
        if version == V3_VERSION:
            rows[-1].update(
                {
                    "data/chunk_index": 0,
                    "data/file_index": 0,
                    "dataset_from_index": index,
                    "dataset_to_index": index + len(ep.states),
                    "meta/episodes/chunk_index": 0,
                    "meta/episodes/file_index": 0,
                }
            )
            tables.append(table)
        else:
            path = root / DATA_PATH.format(episode_chunk=i // CHUNKS_SIZE, episode_index=i)
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, path)
            stats.append({"episode_index": i, "stats": episode_stats(table)})
        index += len(ep.states)
    info = {
        "codebase_version": version,
        "robot_type": "point_mass_2d",
        "total_episodes": len(episodes),
        "total_frames": index,
        "total_tasks": len(tasks),
        "chunks_size": CHUNKS_SIZE,
        "fps": TASK_FPS,
        "splits": {"train": f"0:{len(episodes)}"},
        "data_path": V3_DATA_PATH if version == V3_VERSION else DATA_PATH,
        "video_path": None,
        "features": _features(obs_dim, action_dim),
    }
    meta = root / "meta"
    if version == V3_VERSION:
        info.update({"data_files_size_in_mb": 100, "video_files_size_in_mb": 500})
        data = pa.concat_tables(tables)
        (root / "data/chunk-000").mkdir(parents=True)
        pq.write_table(data, root / V3_DATA_PATH.format(chunk_index=0, file_index=0))
        (meta / "episodes/chunk-000").mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), meta / "episodes/chunk-000/file-000.parquet")
        pq.write_table(
            pa.table({"task_index": list(range(len(tasks))), "task": tasks}),
            meta / "tasks.parquet",
        )
        (meta / "stats.json").write_text(json.dumps(episode_stats(data), indent=2))
    else:
        info.update({"total_videos": 0, "total_chunks": (len(episodes) - 1) // CHUNKS_SIZE + 1})
        (meta / "episodes.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
        (meta / "episodes_stats.jsonl").write_text("".join(json.dumps(x) + "\n" for x in stats))
        (meta / "tasks.jsonl").write_text(
            "".join(json.dumps({"task_index": i, "task": t}) + "\n" for i, t in enumerate(tasks))
        )
    (meta / "info.json").write_text(json.dumps(info, indent=2))
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


def _read_info(root: Path) -> tuple[dict, Path]:
    """``meta/info.json`` of a v2.x dataset (one-line errors)."""
    if not root.is_dir():
        raise RemacFormatError(f"{root}: dataset folder not found")
    info_path = root / "meta" / "info.json"
    if not info_path.is_file():
        raise RemacFormatError(f"{info_path}: missing (LeRobot v2.1 layout expected)")
    try:
        info = json.loads(info_path.read_text())
    except json.JSONDecodeError as error:
        raise RemacFormatError(f"{info_path}: not JSON ({error.msg})") from None
    if not isinstance(info, dict):
        raise RemacFormatError(f"{info_path}: not a JSON object")
    version = str(info.get("codebase_version", ""))
    if not version.startswith(("v2", "v3")):
        raise RemacFormatError(f"{info_path}: codebase_version {version!r}, expected v2.x or v3.x")
    return info, info_path


def _declared_widths(
    info: dict, info_path: Path, obs_dim: int | None, action_dim: int | None
) -> dict[str, int]:
    widths = {
        name: _feature_width(info, name, info_path) for name in ("observation.state", "action")
    }
    for name, width in zip(widths, (obs_dim, action_dim), strict=True):
        if widths[name] < 1:
            raise RemacFormatError(f"{info_path}: features[{name!r}].shape [{widths[name]}] < [1]")
        if width is not None and widths[name] != width:
            raise RemacFormatError(
                f"{info_path}: features[{name!r}].shape [{widths[name]}], expected [{width}]"
            )
    return widths


def dataset_dims(root: Path | str) -> tuple[int, int]:
    """``(obs_dim, action_dim)`` declared by ``meta/info.json`` (``features[...].shape``)."""
    info, info_path = _read_info(Path(root))
    widths = _declared_widths(info, info_path, None, None)
    return widths["observation.state"], widths["action"]


def read_lerobot_dataset(
    root: Path | str,
    fps: float | None = TASK_FPS,
    obs_dim: int | None = None,
    action_dim: int | None = None,
) -> list[Episode]:
    """Reads every episode of a LeRobot dataset: v2.x (the episodes listed in
    ``meta/episodes.jsonl``, one parquet file each) or v3.x (the rows of
    ``meta/episodes/*/*.parquet``, frames ``dataset_from_index <= index < dataset_to_index`` of
    the data file their ``data/chunk_index``, ``data/file_index`` name).

    ``fps``: the frame rate the dataset must declare (the task's 20 fps; ``None`` accepts any);
    timestamps must equal ``frame_index / fps`` within ``TIMESTAMP_TOL_S``. The vector sizes are
    those ``meta/info.json`` declares (``features[...].shape``); ``obs_dim`` / ``action_dim``,
    when given, must equal them.
    """
    root = Path(root)
    info, info_path = _read_info(root)
    rate = _check_fps(info, info_path, fps)
    widths = _declared_widths(info, info_path, obs_dim, action_dim)
    read = _read_v3 if str(info["codebase_version"]).startswith("v3") else _read_v2
    episodes = read(
        root,
        info,
        lambda table, path, i, row, src, tasks: _episode_from_table(
            table, path, i, row, src, tasks, widths, info_path, rate
        ),
    )
    if not episodes:
        raise RemacFormatError(f"{root / 'meta'}: lists no episodes")
    return episodes


def _read_parquet(path: Path, listed_in: str):  # type: ignore[no-untyped-def]
    import pyarrow.parquet as pq

    if not path.is_file():
        raise RemacFormatError(f"{path}: missing (listed in {listed_in})")
    try:
        return pq.read_table(path)
    except Exception as error:  # pyarrow raises several types for corrupt files
        raise RemacFormatError(f"{path}: not a readable parquet file ({error})") from None


def _episode_index(row: dict, where: Path, seen: set[int]) -> int:
    i = row.get("episode_index")
    if not isinstance(i, int) or isinstance(i, bool):
        raise RemacFormatError(f"{where}: episode_index {i!r} is not an integer")
    if i in seen:
        raise RemacFormatError(f"{where}: episode_index {i} listed twice")
    seen.add(i)
    return i


def _data_path(template: object, info_path: Path, **fields: int) -> str:
    """``info.json``'s ``data_path`` template filled with ``fields`` (the layout's only ones)."""
    if not isinstance(template, str):
        raise RemacFormatError(f"{info_path}: data_path {template!r} is not a string")
    try:
        return template.format(**fields)
    except (KeyError, IndexError, ValueError) as error:
        raise RemacFormatError(
            f"{info_path}: data_path {template!r} is not a template over {sorted(fields)} "
            f"({type(error).__name__}: {error})"
        ) from None


def _read_tasks_jsonl(path: Path) -> dict[int, str]:
    tasks: dict[int, str] = {}
    for k, row in enumerate(_read_jsonl(path), start=1):
        i = row.get("task_index") if isinstance(row, dict) else None
        if not isinstance(i, int) or isinstance(i, bool):
            raise RemacFormatError(f"{path}: line {k}: task_index {i!r} missing or not an integer")
        tasks[i] = str(row.get("task", ""))
    return tasks


def _read_v2(root: Path, info: dict, make) -> list[Episode]:  # type: ignore[no-untyped-def]
    info_path = root / "meta" / "info.json"
    data_path = info.get("data_path", DATA_PATH)
    chunks_size = info.get("chunks_size", CHUNKS_SIZE)
    if not isinstance(chunks_size, int) or isinstance(chunks_size, bool) or chunks_size < 1:
        raise RemacFormatError(
            f"{info_path}: chunks_size {chunks_size!r} is not a positive integer"
        )
    tasks_path = root / "meta" / "tasks.jsonl"
    tasks = _read_tasks_jsonl(tasks_path)
    episodes, seen = [], set()
    episodes_path = root / "meta" / "episodes.jsonl"
    for row in _read_jsonl(episodes_path):
        i = _episode_index(row, episodes_path, seen)
        path = root / _data_path(
            data_path, info_path, episode_chunk=i // chunks_size, episode_index=i
        )
        table = _read_parquet(path, "meta/episodes.jsonl")
        episodes.append(make(table, path, i, row, "meta/episodes.jsonl", (tasks, tasks_path)))
    return episodes


def _read_v3(root: Path, info: dict, make) -> list[Episode]:  # type: ignore[no-untyped-def]
    import pyarrow as pa
    import pyarrow.compute as pc

    files = sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    if not files:
        raise RemacFormatError(f"{root / 'meta/episodes'}: no chunk-*/file-*.parquet (v3 layout)")
    tasks_path = root / "meta" / "tasks.parquet"
    tasks: tuple[dict[int, str], Path] | None = None  # no task table: every frame DEFAULT_TASK
    if tasks_path.is_file():
        table = _read_parquet(tasks_path, "meta")
        names = [c for c in ("task", "__index_level_0__") if c in table.column_names]
        if names and "task_index" in table.column_names:
            ids, texts = table.column("task_index").to_pylist(), table.column(names[0]).to_pylist()
            tasks = (dict(zip(ids, texts, strict=True)), tasks_path)
    info_path = root / "meta" / "info.json"
    data_path = info.get("data_path", V3_DATA_PATH)
    cache: dict[Path, pa.Table] = {}
    episodes, seen = [], set()
    for meta_file in files:
        for row in _read_parquet(meta_file, "meta/episodes").to_pylist():
            i = _episode_index(row, meta_file, seen)
            keys = ("data/chunk_index", "data/file_index", "dataset_from_index", "dataset_to_index")
            bad = [k for k in keys if not isinstance(row.get(k), int)]
            if bad:
                raise RemacFormatError(f"{meta_file}: episode {i}: {bad[0]} missing or not an int")
            path = root / _data_path(
                data_path,
                info_path,
                chunk_index=row["data/chunk_index"],
                file_index=row["data/file_index"],
            )
            if path not in cache:
                cache[path] = _read_parquet(path, str(meta_file))
            data = cache[path]
            index = _column(data, "index", path, None)
            lo, hi = row["dataset_from_index"], row["dataset_to_index"]
            table = data.filter(pa.array((index >= lo) & (index < hi)))
            if table.num_rows != hi - lo:
                raise RemacFormatError(
                    f"{path}: column 'index' holds {table.num_rows} of episode {i}'s frames "
                    f"{lo}..{hi - 1} ({meta_file.name} dataset_from_index/dataset_to_index)"
                )
            order = pc.sort_indices(table, [("index", "ascending")])
            episodes.append(make(table.take(order), path, i, row, str(meta_file), tasks))
    return episodes


def _episode_from_table(  # type: ignore[no-untyped-def]
    table,
    path: Path,
    i: int,
    row: dict,
    listed_in: str,
    tasks: tuple[dict[int, str], Path] | None,
    widths: dict[str, int],
    info_path: Path,
    rate: float,
) -> Episode:
    """One episode's frames (``table``, from ``path``) checked against its meta row ``row``
    (listed in ``listed_in``); ``tasks`` is the task table (``task_index`` -> text) and the file
    it was read from, or ``None`` where the dataset has none (v3 without ``meta/tasks.parquet``):
    a ``task_index`` the table lacks is an error."""
    for name, width in widths.items():
        first = table.column(name)[0].as_py() if name in table.column_names else None
        if first is not None and table.num_rows and len(first) != width:
            raise RemacFormatError(
                f"{info_path}: features[{name!r}].shape [{width}] but column {name!r} of "
                f"{path} is {len(first)} wide"
            )
    states = _column(table, "observation.state", path, widths["observation.state"])
    actions = _column(table, "action", path, widths["action"])
    frames = _column(table, "frame_index", path, None)
    if not np.array_equal(frames, np.arange(len(frames))):
        raise RemacFormatError(
            f"{path}: column 'frame_index' of episode {i} is not 0..{len(frames) - 1}"
        )
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
        raise RemacFormatError(f"{path}: {len(frames)} frames but {listed_in} says {row['length']}")
    task_ids = _column(table, "task_index", path, None)
    check_episode(states, actions, str(path), *widths.values())
    if tasks is None or not len(task_ids):
        return Episode(states, actions, DEFAULT_TASK)
    table_of, tasks_file = tasks
    unknown = sorted({int(k) for k in task_ids} - set(table_of))
    if unknown:
        raise RemacFormatError(
            f"{path}: column 'task_index' holds {unknown[0]}, which {tasks_file} does not list"
        )
    return Episode(states, actions, table_of[int(task_ids[0])])
