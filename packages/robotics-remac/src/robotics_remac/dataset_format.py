"""The LeRobot dataset layout the demonstrations are stored in (codebase versions v2.1 and v3.0):
its constants, the :class:`Episode` record, the format error and the per-episode checks shared by
:mod:`robotics_remac.dataset_reader` and :mod:`robotics_remac.dataset_writer` (via pyarrow).

v2.1 layout written and read (v3.0: see
:func:`robotics_remac.dataset_writer.write_lerobot_dataset`)::

    ROOT/meta/info.json          codebase_version, fps, total_episodes, total_frames, features, ...
    ROOT/meta/episodes.jsonl     {"episode_index": i, "tasks": [...], "length": n} per line
    ROOT/meta/tasks.jsonl        {"task_index": 0, "task": "..."} per line
    ROOT/meta/episodes_stats.jsonl  {"episode_index": i, "stats": {column: {min, max, mean, ...}}}
    ROOT/data/chunk-000/episode_000000.parquet
        observation.state  list<float32>[O]     action  list<float32>[A]
        timestamp float32  frame_index int64  episode_index int64  index int64  task_index int64

The sizes ``O`` and ``A`` are those ``meta/info.json`` declares (``features[name].shape == [n]``;
the chase task's demonstrations have ``O = 8``, ``A = 2``);
:func:`robotics_remac.dataset_reader.dataset_dims` reads them.

Every problem with a file (missing, wrong column, wrong length, NaN, frames out of order, an
``fps`` other than the task's, timestamps off ``frame_index / fps``, ``features`` shapes that do
not match the data, an ``episode_index`` column that disagrees with the file, an episode listed
twice) raises :class:`RemacFormatError` naming the file and the field.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robotics_remac.env import DT

__all__ = [
    "CHUNKS_SIZE",
    "CODEBASE_VERSION",
    "DATA_PATH",
    "DEFAULT_TASK",
    "TASK_FPS",
    "TIMESTAMP_TOL_S",
    "V3_DATA_PATH",
    "V3_VERSION",
    "Episode",
    "RemacFormatError",
    "check_episode",
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
    """Malformed input (demonstration data, a checkpoint file); the message names the file and the
    field."""


@dataclass
class Episode:
    """One demonstration: ``states`` float32 ``[T, O]``, ``actions`` float32 ``[T, A]`` (the chase
    task: ``O = 8``, ``A = 2``); ``index``: its ``episode_index`` in the dataset it was read from
    (``None`` for one made in memory)."""

    states: np.ndarray
    actions: np.ndarray
    task: str = DEFAULT_TASK
    index: int | None = None

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
