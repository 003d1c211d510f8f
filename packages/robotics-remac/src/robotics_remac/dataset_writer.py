"""Writing demonstrations as a LeRobot dataset (v2.1 or v3.0 layout, via pyarrow); the layout is
described in :mod:`robotics_remac.dataset_format`."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from iclr26_common.outputs import PARTIAL_MARKER, write_bytes, write_text
from robotics_remac.dataset_format import (
    CHUNKS_SIZE,
    CODEBASE_VERSION,
    DATA_PATH,
    TASK_FPS,
    V3_DATA_PATH,
    V3_VERSION,
    Episode,
    check_episode,
)
from robotics_remac.env import DT

__all__ = ["episode_stats", "write_lerobot_dataset"]


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


def _write_table(table, path: Path) -> None:  # type: ignore[no-untyped-def]
    """A parquet file written atomically with mode 0644."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    write_bytes(path, sink.getvalue().to_pybytes())


def write_lerobot_dataset(
    root: Path | str,
    episodes: Sequence[Episode],
    version: str = CODEBASE_VERSION,
    overwrite: bool = False,
) -> Path:
    """Writes ``episodes`` under ``root`` (which must not exist or be empty, unless ``overwrite``:
    then an earlier dataset's ``data/`` and ``meta/`` are removed first); returns ``root``. Files
    are written atomically with mode 0644.

    ``version="v2.1"``: one parquet file per episode, ``meta/episodes.jsonl``,
    ``meta/tasks.jsonl`` and ``meta/episodes_stats.jsonl``. ``version="v3.0"``: LeRobot's current
    layout (documented, not checked against ``lerobot``, which is not installed here): every
    episode in ``data/chunk-000/file-000.parquet``, one row per episode in
    ``meta/episodes/chunk-000/file-000.parquet`` (``episode_index``, ``tasks``, ``length``,
    ``data/chunk_index``, ``data/file_index``, ``dataset_from_index``, ``dataset_to_index``),
    ``meta/tasks.parquet`` and ``meta/stats.json``.
    """
    import pyarrow as pa

    if version not in (CODEBASE_VERSION, V3_VERSION):
        raise ValueError(f"version must be {CODEBASE_VERSION} or {V3_VERSION}, got {version!r}")
    root = Path(root)
    if not episodes:
        raise ValueError("no episodes to write")
    if overwrite:
        for part in ("data", "meta"):
            if (root / part).is_dir():
                shutil.rmtree(root / part)
    # an output folder the CLI marked partial while it works counts as empty
    if root.exists() and not overwrite and any(p.name != PARTIAL_MARKER for p in root.iterdir()):
        raise FileExistsError(f"{root} exists and is not empty; choose a new --out folder")
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
            _write_table(table, path)
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
        _write_table(data, root / V3_DATA_PATH.format(chunk_index=0, file_index=0))
        _write_table(pa.Table.from_pylist(rows), meta / "episodes/chunk-000/file-000.parquet")
        _write_table(
            pa.table({"task_index": list(range(len(tasks))), "task": tasks}),
            meta / "tasks.parquet",
        )
        write_text(meta / "stats.json", json.dumps(episode_stats(data), indent=2))
    else:
        info.update({"total_videos": 0, "total_chunks": (len(episodes) - 1) // CHUNKS_SIZE + 1})
        write_text(meta / "episodes.jsonl", "".join(json.dumps(x) + "\n" for x in rows))
        write_text(meta / "episodes_stats.jsonl", "".join(json.dumps(x) + "\n" for x in stats))
        write_text(
            meta / "tasks.jsonl",
            "".join(json.dumps({"task_index": i, "task": t}) + "\n" for i, t in enumerate(tasks)),
        )
    write_text(meta / "info.json", json.dumps(info, indent=2))
    return root
