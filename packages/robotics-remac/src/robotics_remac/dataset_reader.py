"""Reading a LeRobot dataset (v2.x or v3.x layout, via pyarrow) into :class:`Episode` records,
checking everything it reads (layout: :mod:`robotics_remac.dataset_format`).

Every problem with a file (missing, wrong column, wrong length, NaN, frames out of order, an
``fps`` other than the task's, timestamps off ``frame_index / fps``, ``features`` shapes that do
not match the data, an ``episode_index`` column that disagrees with the file, an episode listed
twice) raises :class:`~robotics_remac.dataset_format.RemacFormatError` naming the file and the
field.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from iclr26_common.textio import read_text
from robotics_remac.dataset_format import (
    CHUNKS_SIZE,
    DATA_PATH,
    DEFAULT_TASK,
    TASK_FPS,
    TIMESTAMP_TOL_S,
    V3_DATA_PATH,
    Episode,
    RemacFormatError,
    check_episode,
)

__all__ = ["dataset_dims", "read_lerobot_dataset"]


def _text(path: Path) -> str:
    """The UTF-8 text of a metadata file; other bytes are one line naming the file."""
    return read_text(path, "metadata file", error=RemacFormatError, gzip_suffix=False)


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise RemacFormatError(f"{path}: missing (LeRobot v2.1 layout expected)")
    rows = []
    for k, line in enumerate(_text(path).splitlines(), start=1):
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
        info = json.loads(_text(info_path))
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
        return Episode(states, actions, DEFAULT_TASK, index=i)
    table_of, tasks_file = tasks
    unknown = sorted({int(k) for k in task_ids} - set(table_of))
    if unknown:
        raise RemacFormatError(
            f"{path}: column 'task_index' holds {unknown[0]}, which {tasks_file} does not list"
        )
    return Episode(states, actions, table_of[int(task_ids[0])], index=i)
