"""``load_dataset``: every sample of a domain root, in sorted order, through the parsed-array cache."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rf_matid.cache import (
    CacheEntry,
    FileStat,
    cache_key,
    commit,
    default_cache_dir,
    open_output,
)
from rf_matid.cache import read_entry as read_cache_entry
from rf_matid.constants import (
    FREQ_POINTS,
    TIME_DECIMATION,
    TIME_LENGTH,
    TIME_POINTS,
)
from rf_matid.csvio import read_csvs
from rf_matid.layout import (
    Domain,
    Position,
    RFMatIDData,
    RFMatIDFormatError,
    combined_roots,
    domain_root,
    parse_position_folder,
)

logger = logging.getLogger("rf_matid")


# --------------------------------------------------------------------------- dataset loading


@dataclass(frozen=True)
class _Source:
    """One candidate sample: file to read (relative to the loader root) and its position."""

    rel: str
    position: Position | None
    problem: RFMatIDFormatError | None = None  # known bad before parsing


class _Skipper:
    """Raises bad-sample errors, or (``skip_bad``) logs and records them."""

    def __init__(self, skip_bad: bool) -> None:
        self.skip_bad = skip_bad
        self.skipped: list[tuple[str, str]] = []

    def __call__(self, rel: str, error: RFMatIDFormatError) -> None:
        if not self.skip_bad:
            raise error
        logger.warning("skipping %s: %s", rel, error)
        self.skipped.append((rel, str(error)))


def _scan_domain_root(
    root: Path, domain_root: Path, skipper: _Skipper
) -> tuple[list[_Source], list[FileStat]]:
    """List ``<domain_root>/<position>/*.csv`` (non-recursive, as upstream glob) sorted by path.

    Returns the candidate samples and the cache-key stat of every file seen.
    """
    sources: list[_Source] = []
    stats: list[FileStat] = []
    try:
        entries = sorted(os.scandir(domain_root), key=lambda entry: entry.name)
    except OSError as error:
        raise RFMatIDFormatError(domain_root, f"cannot list directory: {error}") from None
    for entry in entries:
        if entry.name.startswith("."):
            continue
        rel_folder = Path(entry.path).relative_to(root).as_posix()
        if not entry.is_dir():
            if entry.name.lower().endswith(".csv"):
                stats.append(FileStat.of(rel_folder, entry.stat()))
                skipper(
                    rel_folder,
                    RFMatIDFormatError(
                        entry.path,
                        "CSV file outside a position folder; expected <root>/<position>/*.csv",
                    ),
                )
            continue
        position: Position | None
        problem: RFMatIDFormatError | None = None
        try:
            position = parse_position_folder(entry.path)
        except RFMatIDFormatError as error:
            position, problem = None, error
        csv_entries = sorted(
            (
                item
                for item in os.scandir(entry.path)
                if item.name.endswith(".csv") and item.is_file()
            ),
            key=lambda item: item.name,
        )
        if not csv_entries:
            logger.debug("position folder %s holds no *.csv files", entry.path)
            if problem is not None:
                skipper(rel_folder, problem)
            continue
        for item in csv_entries:
            rel = f"{rel_folder}/{item.name}"
            stats.append(FileStat.of(rel, item.stat()))
            sources.append(_Source(rel, position, problem))
    return sources, stats


def _zscore_decimated(path: str, amplitude: np.ndarray) -> np.ndarray:
    """Upstream TD_dataset: keep amplitude[::3], then (x - mean) / std (unbiased std)."""
    kept = amplitude[::TIME_DECIMATION].astype(np.float64)
    std = kept.std(ddof=1)
    if not np.isfinite(std) or std == 0.0:
        raise RFMatIDFormatError(
            path, "amplitude is constant after decimation; cannot z-score", field="amplitude"
        )
    return ((kept - kept.mean()) / std).astype(np.float32)


def _resolve_layout(root: Path, domain: Domain) -> tuple[str, Path, Path | None]:
    """Return (layout, root of the files to read, frequency root for pairing or None)."""
    roots = combined_roots(root)
    if roots is None:
        return "plain", root, None
    freq_root, time_root = roots
    read_root = domain_root(root, domain)  # raises when the combined root lacks the domain
    if domain == "frequency":
        return "combined", read_root, None
    assert time_root is not None
    return "combined", time_root, freq_root


def _pair_time_sources(
    root: Path, freq_root: Path, time_root: Path, skipper: _Skipper
) -> tuple[list[_Source], list[FileStat]]:
    """Time samples of a combined root: the twins of the frequency samples, in their order.

    A frequency sample without a time twin, and a time file without a frequency twin, are
    errors (or skipped and recorded).
    """
    freq_sources, stats = _scan_domain_root(root, freq_root, skipper)
    time_sources, time_stats = _scan_domain_root(root, time_root, skipper)
    stats += time_stats
    freq_prefix = f"{freq_root.relative_to(root).as_posix()}/"
    time_prefix = f"{time_root.relative_to(root).as_posix()}/"
    available = {source.rel for source in time_sources}
    sources = []
    for source in freq_sources:
        twin = time_prefix + source.rel[len(freq_prefix) :]
        problem = source.problem
        if problem is None and twin not in available:
            problem = RFMatIDFormatError(
                root / twin, f"missing time-domain file for frequency sample {source.rel}"
            )
        sources.append(_Source(twin, source.position, problem))
    paired = {source.rel for source in sources}
    for source in time_sources:
        if source.rel not in paired:
            skipper(
                source.rel,
                RFMatIDFormatError(
                    root / source.rel,
                    "time-domain file has no frequency-domain twin under "
                    f"{freq_prefix} (would be silently unused)",
                ),
            )
    return sources, stats


def _data_from_cache(entry: CacheEntry, skip_bad: bool) -> RFMatIDData | None:
    """The cached dataset of ``entry``, or None on a miss (or a strict load of a lossy entry)."""
    cached = read_cache_entry(entry)
    if cached is None:
        return None
    x, axis, meta = cached
    try:
        skipped = tuple((str(rel), str(reason)) for rel, reason in meta["skipped"])
        if skipped and not skip_bad:
            return None  # re-parse so that the first bad file raises
        files = tuple(meta["files"])
        data = RFMatIDData(
            x=x,
            axis=axis,
            class_names=tuple(meta["class_names"]),
            distance_mm=np.asarray(meta["distance_mm"], dtype=np.int32),
            angle_deg=np.asarray(meta["angle_deg"], dtype=np.int32),
            files=files,
            skipped=skipped,
            domain=meta["domain"],
        )
    except (KeyError, TypeError, ValueError):
        return None
    if not (x.shape[0] == len(files) == len(data.class_names) == len(data.distance_mm)):
        return None
    # A cache hit must report the skipped samples as loudly as the parse that recorded them.
    for rel, reason in skipped:
        logger.warning("skipping %s (recorded in the cache): %s", rel, reason)
    return data


def load_dataset(
    root: str | os.PathLike[str],
    domain: Domain = "frequency",
    cache_dir: str | os.PathLike[str] | None = None,
    skip_bad: bool = False,
    use_cache: bool = True,
    threads: int | None = None,
) -> RFMatIDData:
    """Load every sample of one domain, sorted by relative path, with a parsed-array cache.

    Frequency: x complex64 [N, 2048] raw S11 (no whitening), axis freq_hz [2048].
    Time: x float32 [N, 3414] = z-scored ``amplitude[::3]`` (upstream ``TD_dataset``), axis the
    matching time_ps [3414]. In a combined root the time samples are the frequency samples' twins
    (same relative path under ``time_domain``); a missing twin is an error.

    The cache (``cache_dir``, default :func:`rf_matid.cache.default_cache_dir`, i.e.
    ``cache_root() / "rf-matid"``, never inside ``root``; see :mod:`rf_matid.cache`) is
    keyed on every source file's relative path, size, mtime_ns and ctime_ns; a hit returns ``x``
    as a read-only memmap. An unwritable cache directory falls back to in-memory arrays.
    ``skip_bad=True`` logs (warning) and records bad samples in ``skipped`` instead of raising,
    on a cache hit too. A first read parses the CSVs in ``threads`` threads (default
    :func:`parse_threads`); the result does not depend on it.
    """
    if domain not in ("frequency", "time"):
        raise ValueError(f"domain must be 'frequency' or 'time', got {domain!r}")
    root = Path(root)
    if not root.is_dir():
        raise RFMatIDFormatError(root, "dataset root is not a directory")
    layout, read_root, pair_root = _resolve_layout(root, domain)
    skipper = _Skipper(skip_bad)
    if pair_root is not None:
        sources, stats = _pair_time_sources(root, pair_root, read_root, skipper)
    else:
        sources, stats = _scan_domain_root(root, read_root, skipper)
    if not sources:
        raise RFMatIDFormatError(
            read_root, "no samples found: expected <root>/<position folder>/*.csv"
        )

    cache_root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    params = {
        "domain": domain,
        "layout": layout,
        "freq_points": FREQ_POINTS,
        "time_points": TIME_POINTS,
        "time_decimation": TIME_DECIMATION,
    }
    entry = CacheEntry.for_root(cache_root, root, domain, cache_key(params, stats))
    if use_cache:
        cached = _data_from_cache(entry, skip_bad)
        if cached is not None:
            logger.debug("cache hit %s", entry.x)
            return cached

    shape = (len(sources), FREQ_POINTS if domain == "frequency" else TIME_LENGTH)
    dtype = np.complex64 if domain == "frequency" else np.float32
    if use_cache:
        out, x_tmp = open_output(entry, shape, dtype)
    else:
        out, x_tmp = np.empty(shape, dtype=dtype), None
    try:
        threads = parse_threads() if threads is None else max(1, int(threads))
        data = _parse_sources(root, sources, domain, skipper, out, threads)
        if x_tmp is not None:
            meta = {
                "domain": data.domain,
                "class_names": list(data.class_names),
                "distance_mm": data.distance_mm.tolist(),
                "angle_deg": data.angle_deg.tolist(),
                "files": list(data.files),
                "skipped": [list(item) for item in data.skipped],
            }
            try:
                data.x = commit(
                    entry, data.x, data.axis, meta, x_tmp, complete=len(data) == len(sources)
                )
            except OSError as error:
                logger.warning(
                    "cannot write cache in %s (%s); using in-memory arrays", cache_root, error
                )
                data.x = np.array(data.x)
    finally:
        if x_tmp is not None:
            with contextlib.suppress(OSError):
                x_tmp.unlink()
    return data


# Files parsed per pyarrow call on a first read (the call's fixed cost dominates a 2048-row
# file; csvio.read_csvs), and batches in flight in the thread pool (bounded so that parsed
# arrays do not pile up).
_BATCH = 32
_WINDOW = 8


def parse_threads() -> int:
    """Threads that parse CSVs on a first read: ``OMP_NUM_THREADS`` when it is a positive
    integer (``iclr26 reproduce`` sets it to each experiment's share of the cores), else the
    cores this process may use; at most 4. pyarrow's parser releases the GIL, so threads help."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) > 0:
        threads = int(value)
    else:
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    return max(1, min(4, threads))


def _read_batch(
    root: Path, sources: Sequence[_Source], domain: Domain
) -> list[tuple[np.ndarray, np.ndarray] | RFMatIDFormatError]:
    """(axis, values) of each sample, or the format error that makes it unusable, in order.

    The CSVs go through one batched parse (:func:`rf_matid.csvio.read_csvs`: the same results
    and errors as one file at a time). Time samples are decimated and z-scored as upstream.
    """
    out: list[tuple[np.ndarray, np.ndarray] | RFMatIDFormatError] = []
    todo = [source for source in sources if source.problem is None]
    parsed = iter(read_csvs([os.path.join(root, source.rel) for source in todo], domain))
    for source in sources:
        if source.problem is not None:
            out.append(source.problem)
            continue
        result = next(parsed)
        if domain == "time" and not isinstance(result, RFMatIDFormatError):
            time_ps, amplitude = result
            try:
                path = os.path.join(root, source.rel)
                result = (time_ps[::TIME_DECIMATION], _zscore_decimated(path, amplitude))
            except RFMatIDFormatError as error:
                result = error
        out.append(result)
    return out


def _read_all(
    root: Path, sources: Sequence[_Source], domain: Domain, threads: int
) -> Iterator[tuple[np.ndarray, np.ndarray] | RFMatIDFormatError]:
    """:func:`_read_batch` of every batch of ``_BATCH`` sources, in order; ``threads`` > 1
    parses batches in a pool."""
    batches = [sources[start : start + _BATCH] for start in range(0, len(sources), _BATCH)]
    if threads <= 1:
        for batch in batches:
            yield from _read_batch(root, batch, domain)
        return
    with ThreadPoolExecutor(threads) as pool:
        for start in range(0, len(batches), _WINDOW):
            window = batches[start : start + _WINDOW]
            for results in pool.map(lambda batch: _read_batch(root, batch, domain), window):
                yield from results


def _parse_sources(
    root: Path,
    sources: Sequence[_Source],
    domain: Domain,
    skipper: _Skipper,
    x: np.ndarray,
    threads: int = 1,
) -> RFMatIDData:
    """Parse ``sources`` into the rows of x [len(sources), width]; returns the kept rows.

    Files are read by ``threads`` threads; results are taken in source order, so errors and
    skips come in the same order as a sequential read."""
    axis: np.ndarray | None = None
    axis_file = ""
    kept: list[_Source] = []
    positions: list[Position] = []
    for source, result in zip(sources, _read_all(root, sources, domain, threads), strict=True):
        try:
            if isinstance(result, RFMatIDFormatError):
                raise result
            sample_axis, values = result
            if axis is None:
                axis, axis_file = sample_axis, source.rel
            elif not np.array_equal(sample_axis, axis) and not np.allclose(
                sample_axis, axis, rtol=1e-9, atol=0.0
            ):
                row = int(np.argmax(~np.isclose(sample_axis, axis, rtol=1e-9, atol=0.0)))
                step = 1 if domain == "frequency" else TIME_DECIMATION
                column = "freq_hz" if domain == "frequency" else "time_ps"
                raise RFMatIDFormatError(
                    root / source.rel,
                    f"{column} {sample_axis[row]!r} differs from {axis[row]!r} in {axis_file}",
                    line=row * step + 2,
                    field=column,
                )
        except RFMatIDFormatError as error:
            skipper(source.rel, error)
            continue
        assert source.position is not None  # a None position always carries a problem
        x[len(kept)] = values
        kept.append(source)
        positions.append(source.position)
    if not kept or axis is None:
        raise RFMatIDFormatError(root, f"no readable samples ({len(skipper.skipped)} skipped)")
    return RFMatIDData(
        x=x[: len(kept)],
        axis=axis,
        class_names=tuple(position.class_name for position in positions),
        distance_mm=np.array([position.distance_mm for position in positions], dtype=np.int32),
        angle_deg=np.array([position.angle_deg for position in positions], dtype=np.int32),
        files=tuple(source.rel for source in kept),
        skipped=tuple(skipper.skipped),
        domain=domain,
    )
