"""On-disk cache of parsed dataset arrays (``.npy``, memory-mapped on later reads).

The cache lives in the workspace's one cache folder, ``iclr26_common.cachedir.cache_root() /
"rf-matid"`` (``$ICLR26_CACHE``, else ``~/.cache/iclr26``), never inside the user's data
folder; ``load_dataset(cache_dir=...)`` chooses another. One cache entry is three files in the
cache directory, named ``<prefix>-<key>.{x.npy,axis.npy,
meta.json}``: ``prefix`` identifies the (dataset root, domain) pair, so that one cache directory can
serve several roots, and ``key`` is a digest of the loader's parameters and of every source file's
``(relative path, size, mtime_ns, ctime_ns)``.

What the key guarantees: adding, removing or renaming a file, changing its size, or writing to it
so that its modification or status-change time moves, gives a new key. Contents are not hashed
(that would mean reading every byte on every load), so a same-size rewrite that leaves both
timestamps unchanged -- possible only within one timestamp tick of the file system -- goes
unnoticed; ``load_dataset(use_cache=False)`` always re-parses. A new entry replaces the older
entries of its prefix. Writes are atomic (temporary file + ``os.replace``): readers see a complete
entry or none.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common.cachedir import cache_root
from iclr26_common.report import atomic_write_text

logger = logging.getLogger("rf_matid")

#: The package's folder under :func:`iclr26_common.cachedir.cache_root`.
CACHE_SUBDIR = "rf-matid"
# 2: status-change time in the key; header-mapped columns and frequency plausibility checks.
# 3: the frequency unit is decided from the values (a header saying GHz over Hz values loads).
CACHE_FORMAT_VERSION = 3


def default_cache_dir() -> Path:
    """``cache_root() / "rf-matid"``: where :func:`rf_matid.io.load_dataset` caches by default
    (read at call time, so ``ICLR26_CACHE`` set later is honoured)."""
    return cache_root() / CACHE_SUBDIR


@dataclass(frozen=True)
class FileStat:
    """The cache-key fields of one source file (``rel`` relative to the dataset root)."""

    rel: str
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, rel: str, stat: os.stat_result) -> FileStat:
        return cls(rel, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def cache_key(params: Mapping[str, Any], stats: Iterable[FileStat]) -> str:
    """Digest of the loader parameters (JSON-serialisable) and of every source file's stat."""
    digest = hashlib.sha256()
    header = {"version": CACHE_FORMAT_VERSION, **params}
    digest.update(json.dumps(header, sort_keys=True).encode())
    for item in sorted(stats, key=lambda stat: stat.rel):
        digest.update(f"\n{item.rel}\0{item.size}\0{item.mtime_ns}\0{item.ctime_ns}".encode())
    return digest.hexdigest()[:24]


@dataclass(frozen=True)
class CacheEntry:
    """Paths of one cache entry; ``prefix`` names the (root, domain) pair, ``key`` the content."""

    cache_dir: Path
    prefix: str
    key: str

    @staticmethod
    def prefix_for(root: Path, domain: str) -> str:
        """``<domain>-<digest of the resolved root path>``: the entries of one (root, domain)."""
        root_digest = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:8]
        return f"{domain}-{root_digest}"

    @classmethod
    def for_root(cls, cache_dir: Path, root: Path, domain: str, key: str) -> CacheEntry:
        return cls(Path(cache_dir), cls.prefix_for(root, domain), key)

    def _path(self, suffix: str) -> Path:
        return self.cache_dir / f"{self.prefix}-{self.key}.{suffix}"

    @property
    def x(self) -> Path:
        return self._path("x.npy")

    @property
    def axis(self) -> Path:
        return self._path("axis.npy")

    @property
    def meta(self) -> Path:
        return self._path("meta.json")


def read_entry(entry: CacheEntry) -> tuple[np.ndarray, np.ndarray, dict[str, Any]] | None:
    """(x read-only memmap [N, W], axis [W], meta) of a complete entry, or None (miss/corrupt)."""
    try:
        meta = json.loads(entry.meta.read_text(encoding="utf-8"))
        x = np.load(entry.x, mmap_mode="r", allow_pickle=False)
        axis = np.load(entry.axis, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or x.ndim != 2 or axis.shape != (x.shape[1],):
        return None
    return x, axis, meta


def open_output(
    entry: CacheEntry, shape: tuple[int, int], dtype: type
) -> tuple[np.ndarray, Path | None]:
    """A temporary ``.npy`` memmap [shape] in the cache dir to parse into, and its path.

    Falls back to an in-memory array (path None) with a logged warning if the cache directory is
    not writable.
    """
    try:
        entry.cache_dir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=entry.cache_dir, prefix=entry.x.name, suffix=".tmp")
        os.close(fd)
    except OSError as error:
        logger.warning(
            "cannot write cache in %s (%s); using in-memory arrays", entry.cache_dir, error
        )
        return np.empty(shape, dtype=dtype), None
    tmp = Path(name)
    try:
        return np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape), tmp
    except (OSError, ValueError) as error:
        with contextlib.suppress(OSError):
            tmp.unlink()
        logger.warning(
            "cannot write cache in %s (%s); using in-memory arrays", entry.cache_dir, error
        )
        return np.empty(shape, dtype=dtype), None


def _atomic_save_array(path: Path, array: np.ndarray) -> None:
    """``np.save`` through a temporary file + ``os.replace`` (binary twin of atomic_write_text)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            np.save(handle, array)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def commit(
    entry: CacheEntry,
    x: np.ndarray,
    axis: np.ndarray,
    meta: Mapping[str, Any],
    x_tmp: Path,
    complete: bool,
) -> np.ndarray:
    """Store x [N, W] (parsed into the memmap at ``x_tmp``), axis [W] and meta as ``entry``.

    ``complete`` says whether x uses every row of ``x_tmp`` (then the file is renamed into place;
    otherwise the used rows are saved and ``x_tmp`` removed). Older entries of the same prefix
    are deleted. Returns x re-opened as a read-only memmap.
    """
    if isinstance(x, np.memmap):
        x.flush()
    if complete:
        os.replace(x_tmp, entry.x)
    else:
        _atomic_save_array(entry.x, np.ascontiguousarray(x))
        x_tmp.unlink()
    _atomic_save_array(entry.axis, np.asarray(axis))
    atomic_write_text(entry.meta, json.dumps(dict(meta)))
    keep = {entry.x.name, entry.axis.name, entry.meta.name}
    for stale in entry.cache_dir.glob(f"{entry.prefix}-*"):
        if stale.name not in keep and not stale.name.endswith(".tmp"):
            with contextlib.suppress(OSError):
                stale.unlink()
    return np.load(entry.x, mmap_mode="r", allow_pickle=False)
