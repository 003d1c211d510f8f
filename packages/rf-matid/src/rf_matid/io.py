"""Readers and writers for the RF-MatID on-disk format, and a cached dataset loader.

On-disk layout (upstream ``dataset/dataset.py`` and ``dataset/TD_dataset.py``): a *domain root*
holds one folder per measurement position, ``ms46131a-4To43.5GHz-2048-{class}-{dist}mm-{deg}deg``,
and every ``*.csv`` directly inside a position folder is one sample. Upstream tells frequency and
time samples apart only by the root they live in: the frequency and the time-domain loaders are
pointed at different ``data_dir`` roots with the same folder layout. ``write_sample`` therefore
writes a *combined root* with two upstream-compatible domain roots side by side::

    root/freq_domain/<position folder>/<index>.csv   # header + 2048 rows: freq_hz, real, imag
    root/time_domain/<position folder>/<index>.csv   # header + 10240 rows: time_ps, amplitude

``load_dataset`` reads either a combined root or a plain upstream domain root (position folders
directly below ``root``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

logger = logging.getLogger("rf_matid")

FOLDER_PREFIX = "ms46131a-4To43.5GHz-2048"
FREQ_DOMAIN_DIR = "freq_domain"
TIME_DOMAIN_DIR = "time_domain"
CACHE_DIR_NAME = ".rfmatid_cache"
FREQ_POINTS = 2048
TIME_POINTS = 10240
TIME_DECIMATION = 3
# Upstream TD_dataset keeps amplitude[::3]: ceil(10240 / 3) samples.
TIME_LENGTH = len(range(0, TIME_POINTS, TIME_DECIMATION))  # 3414
FREQ_HEADER = "freq_hz,real,imag"
TIME_HEADER = "time_ps,amplitude"

_CACHE_FORMAT_VERSION = 1
_FREQ_COLUMNS = ("freq_hz", "real", "imag")
_TIME_COLUMNS = ("time_ps", "amplitude")
_DISTANCE_RE = re.compile(r"^(\d+)mm$")
_ANGLE_RE = re.compile(r"^(\d+)deg$")
_CLASS_RE = re.compile(r"^[A-Za-z0-9_.]+$")

Domain = Literal["frequency", "time"]


class RFMatIDFormatError(ValueError):
    """Malformed RF-MatID input; names the offending file and, where known, line and field."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        message: str,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        location = self.path
        if line is not None:
            location += f", line {line}"
        if field is not None:
            location += f", field {field!r}"
        super().__init__(f"{location}: {message}")


@dataclass(frozen=True)
class Position:
    """One measurement position: fine class name, distance (mm) and angle (deg)."""

    class_name: str
    distance_mm: int
    angle_deg: int


@dataclass
class RFMatIDData:
    """A loaded domain: ``x`` is complex64 [N, 2048] (frequency) or float32 [N, 3414] (time).

    ``axis`` is freq_hz [2048] or time_ps [3414]; ``files`` are the source CSVs relative to the
    root passed to ``load_dataset``; ``skipped`` holds ``(file, reason)`` for every sample dropped
    with ``skip_bad=True``.
    """

    x: np.ndarray
    axis: np.ndarray
    class_names: tuple[str, ...]
    distance_mm: np.ndarray
    angle_deg: np.ndarray
    files: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]
    domain: str = "frequency"

    def __len__(self) -> int:
        return len(self.files)


# --------------------------------------------------------------------------- folder names


def position_folder_name(class_name: str, distance_mm: int, angle_deg: int) -> str:
    """Upstream folder name ``ms46131a-4To43.5GHz-2048-{class}-{dist}mm-{deg}deg``."""
    if not isinstance(class_name, str) or not _CLASS_RE.match(class_name):
        raise ValueError(
            f"class name {class_name!r} must be non-empty and use only letters, digits, '_' or '.'"
            " (upstream parses folder names by splitting on '-')"
        )
    for name, value in (("distance_mm", distance_mm), ("angle_deg", angle_deg)):
        if isinstance(value, bool) or int(value) != value or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return f"{FOLDER_PREFIX}-{class_name}-{int(distance_mm)}mm-{int(angle_deg)}deg"


def parse_position_folder(path_or_name: str | os.PathLike[str]) -> Position:
    """Parse a position folder name from the right, as upstream ``_get_data_info``."""
    name = Path(path_or_name).name
    parts = name.split("-")
    if len(parts) < 3:
        raise RFMatIDFormatError(
            path_or_name,
            f"folder name {name!r} is not '<prefix>-<class>-<dist>mm-<deg>deg'",
            field="folder name",
        )
    class_name, distance_text, angle_text = parts[-3], parts[-2], parts[-1]
    if not _CLASS_RE.match(class_name):
        raise RFMatIDFormatError(
            path_or_name, f"invalid class name {class_name!r} in {name!r}", field="class_name"
        )
    distance = _DISTANCE_RE.match(distance_text)
    if distance is None:
        raise RFMatIDFormatError(
            path_or_name,
            f"expected '<int>mm' as the second-to-last '-' part of {name!r}, got {distance_text!r}",
            field="distance_mm",
        )
    angle = _ANGLE_RE.match(angle_text)
    if angle is None:
        raise RFMatIDFormatError(
            path_or_name,
            f"expected '<int>deg' as the last '-' part of {name!r}, got {angle_text!r}",
            field="angle_deg",
        )
    return Position(class_name, int(distance.group(1)), int(angle.group(1)))


def sample_file_name(index: int) -> str:
    """File name of sample ``index`` inside a position folder (upstream reads any ``*.csv``)."""
    if isinstance(index, bool) or int(index) != index or index < 0:
        raise ValueError(f"sample index must be a non-negative integer, got {index!r}")
    return f"{int(index):04d}.csv"


def domain_root(root: str | os.PathLike[str], domain: Domain = "frequency") -> Path:
    """Directory holding the position folders of ``domain``.

    ``root/freq_domain`` or ``root/time_domain`` in a combined root (as ``write_sample`` writes),
    else ``root`` itself (a plain upstream ``data_dir``).
    """
    if domain not in ("frequency", "time"):
        raise ValueError(f"domain must be 'frequency' or 'time', got {domain!r}")
    base = Path(root)
    if (base / FREQ_DOMAIN_DIR).is_dir() or (base / TIME_DOMAIN_DIR).is_dir():
        return base / (FREQ_DOMAIN_DIR if domain == "frequency" else TIME_DOMAIN_DIR)
    return base


def position_folders(
    root: str | os.PathLike[str], domain: Domain = "frequency"
) -> list[tuple[Path, Position]]:
    """Sorted ``(folder, Position)`` of every position folder of ``domain`` (cheap: no CSV reads).

    Hidden entries and plain files are ignored; a malformed folder name raises
    ``RFMatIDFormatError``.
    """
    base = domain_root(root, domain)
    if not base.is_dir():
        raise RFMatIDFormatError(base, "dataset root is not a directory")
    folders = sorted(
        (entry for entry in base.iterdir() if entry.is_dir() and not entry.name.startswith(".")),
        key=lambda entry: entry.name,
    )
    return [(folder, parse_position_folder(folder)) for folder in folders]


def sample_csvs(folder: str | os.PathLike[str]) -> list[Path]:
    """Sorted sample CSVs of one position folder (``*.csv``, non-recursive, as upstream glob)."""
    return sorted(
        (path for path in Path(folder).iterdir() if path.name.endswith(".csv") and path.is_file()),
        key=lambda path: path.name,
    )


# A position folder of a frequency domain root holds only frequency CSVs.
frequency_csvs = sample_csvs


# --------------------------------------------------------------------------- CSV parsing


def _parse_table(
    path: str | os.PathLike[str], columns: Sequence[str], expected_rows: int | None
) -> np.ndarray:
    """Parse ``header + rows`` of ``len(columns)`` comma-separated finite floats -> float64 [R, C].

    Line numbers in errors are 1-based file lines (the header is line 1).
    """
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise RFMatIDFormatError(path, f"cannot read file: {error.strerror or error}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise RFMatIDFormatError(path, f"not UTF-8 text ({error.reason})") from None
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise RFMatIDFormatError(path, "file is empty", line=1)
    if _is_numeric_row(lines[0], len(columns)):
        raise RFMatIDFormatError(
            path, f"expected a header row ({','.join(columns)}), found numeric data", line=1
        )
    body = lines[1:]
    if not body:
        raise RFMatIDFormatError(path, "no data rows after the header", line=2)
    try:
        table = np.loadtxt(body, delimiter=",", dtype=np.float64, ndmin=2, comments=None)
    except ValueError as error:
        _diagnose_rows(path, body, columns)
        raise RFMatIDFormatError(path, f"unparseable CSV: {error}") from None
    if table.shape[0] != len(body) or table.shape[1] != len(columns):
        _diagnose_rows(path, body, columns)
        raise RFMatIDFormatError(
            path, f"expected {len(columns)} columns, parsed an array of shape {table.shape}"
        )
    finite = np.isfinite(table)
    if not finite.all():
        row, col = np.argwhere(~finite)[0]
        raise RFMatIDFormatError(
            path,
            f"non-finite value {float(table[row, col])!r}",
            line=int(row) + 2,
            field=columns[col],
        )
    if expected_rows is not None and table.shape[0] != expected_rows:
        extra_line = expected_rows + 2 if table.shape[0] > expected_rows else None
        raise RFMatIDFormatError(
            path,
            f"expected {expected_rows} data rows after the header, found {table.shape[0]}",
            line=extra_line,
        )
    return table


def _is_numeric_row(line: str, n_columns: int) -> bool:
    cells = line.split(",")
    if len(cells) != n_columns:
        return False
    try:
        [float(cell) for cell in cells]
    except ValueError:
        return False
    return True


def _diagnose_rows(
    path: str | os.PathLike[str], body: Sequence[str], columns: Sequence[str]
) -> None:
    """Find the first bad data row and raise an error naming its line and field."""
    for row, line in enumerate(body):
        number = row + 2
        if not line.strip():
            raise RFMatIDFormatError(path, "blank line inside the data rows", line=number)
        cells = line.split(",")
        if len(cells) != len(columns):
            raise RFMatIDFormatError(
                path,
                f"expected {len(columns)} comma-separated fields ({','.join(columns)}), "
                f"got {len(cells)}",
                line=number,
            )
        for cell, column in zip(cells, columns, strict=True):
            try:
                value = float(cell)
            except ValueError:
                raise RFMatIDFormatError(
                    path, f"non-numeric value {cell.strip()!r}", line=number, field=column
                ) from None
            if not np.isfinite(value):
                raise RFMatIDFormatError(
                    path, f"non-finite value {cell.strip()!r}", line=number, field=column
                )


def _check_increasing(path: str | os.PathLike[str], axis: np.ndarray, column: str) -> None:
    steps = np.diff(axis)
    if not (steps > 0).all():
        row = int(np.argmin(steps > 0)) + 1
        raise RFMatIDFormatError(
            path,
            f"{column} must be strictly increasing ({axis[row - 1]!r} then {axis[row]!r})",
            line=row + 2,
            field=column,
        )


def read_frequency_csv(
    path: str | os.PathLike[str], expected_rows: int | None = FREQ_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """Read a frequency CSV (header, then rows ``freq_hz, real, imag``).

    Returns freq_hz float64 [F] and s11 complex64 [F] (F = 2048 unless ``expected_rows=None``).
    Upstream ``load_raw_data`` drops the header row and parses the rest as float32.
    """
    table = _parse_table(path, _FREQ_COLUMNS, expected_rows)
    freq_hz = np.ascontiguousarray(table[:, 0])
    _check_increasing(path, freq_hz, "freq_hz")
    s11 = (table[:, 1] + 1j * table[:, 2]).astype(np.complex64)
    return freq_hz, s11


def read_time_csv(
    path: str | os.PathLike[str], expected_rows: int | None = TIME_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """Read a time-domain CSV (header, then rows ``time_ps, amplitude``), undecimated.

    Returns time_ps float64 [T] and amplitude float32 [T] (T = 10240 unless ``expected_rows=None``).
    """
    table = _parse_table(path, _TIME_COLUMNS, expected_rows)
    time_ps = np.ascontiguousarray(table[:, 0])
    _check_increasing(path, time_ps, "time_ps")
    return time_ps, table[:, 1].astype(np.float32)


# --------------------------------------------------------------------------- CSV writing


def _as_1d(name: str, values: np.ndarray, length: int | None = None) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
    if length is not None and array.shape[0] != length:
        raise ValueError(f"{name} has {array.shape[0]} points, expected {length}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} contains NaN or inf")
    return array


def _write_text(path: Path, header: str, row_format: str, columns: Sequence[np.ndarray]) -> None:
    flat = np.column_stack(columns).ravel().tolist()
    body = (row_format * len(columns[0])) % tuple(flat)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{header}\n{body}", encoding="utf-8", newline="\n")


def write_frequency_csv(path: str | os.PathLike[str], freq_hz: np.ndarray, s11: np.ndarray) -> None:
    """Write freq_hz [F] and complex s11 [F] as ``freq_hz,real,imag`` (header + F rows).

    Frequencies are written with shortest round-trip precision, S11 parts with 9 significant digits
    (exact for complex64).
    """
    freq = _as_1d("freq_hz", freq_hz).astype(np.float64)
    s11_values = _as_1d("s11", s11, len(freq)).astype(np.complex64)
    _write_text(
        Path(path),
        FREQ_HEADER,
        "%r,%.9g,%.9g\n",
        [freq, s11_values.real.astype(np.float64), s11_values.imag.astype(np.float64)],
    )


def write_time_csv(
    path: str | os.PathLike[str], time_ps: np.ndarray, amplitude: np.ndarray
) -> None:
    """Write time_ps [T] and amplitude [T] as ``time_ps,amplitude`` (header + T rows)."""
    time = _as_1d("time_ps", time_ps).astype(np.float64)
    values = _as_1d("amplitude", amplitude, len(time)).astype(np.float32).astype(np.float64)
    _write_text(Path(path), TIME_HEADER, "%r,%.9g\n", [time, values])


def write_sample(
    root: str | os.PathLike[str],
    position: Position,
    index: int,
    freq_hz: np.ndarray,
    s11: np.ndarray,
    time_ps: np.ndarray | None = None,
    amplitude: np.ndarray | None = None,
) -> list[Path]:
    """Write one sample into a combined root; returns the written paths (frequency first).

    Frequency CSV: ``root/freq_domain/<position folder>/<index:04d>.csv``; time CSV (if given):
    the same relative path under ``root/time_domain``.
    """
    if (time_ps is None) != (amplitude is None):
        raise ValueError("time_ps and amplitude must be given together")
    folder = position_folder_name(position.class_name, position.distance_mm, position.angle_deg)
    name = sample_file_name(index)
    root = Path(root)
    freq_path = root / FREQ_DOMAIN_DIR / folder / name
    write_frequency_csv(freq_path, freq_hz, s11)
    written = [freq_path]
    if time_ps is not None and amplitude is not None:
        time_path = root / TIME_DOMAIN_DIR / folder / name
        write_time_csv(time_path, time_ps, amplitude)
        written.append(time_path)
    return written


# --------------------------------------------------------------------------- dataset loading


@dataclass(frozen=True)
class _Source:
    """One candidate sample: file to read (relative to the loader root) and its position."""

    rel: str
    position: Position | None
    problem: RFMatIDFormatError | None = None  # known bad before parsing


class _Skipper:
    """Raises bad-sample errors, or (``skip_bad``) logs and records them."""

    def __init__(self, skip_bad: bool, silent: bool = False) -> None:
        self.skip_bad = skip_bad
        self.silent = silent
        self.skipped: list[tuple[str, str]] = []

    def __call__(self, rel: str, error: RFMatIDFormatError) -> None:
        if not self.skip_bad:
            raise error
        if not self.silent:
            logger.warning("skipping %s: %s", rel, error)
        self.skipped.append((rel, str(error)))


def _scan_domain_root(
    root: Path, domain_root: Path, skipper: _Skipper
) -> tuple[list[_Source], list[tuple[str, int, int]]]:
    """List ``<domain_root>/<position>/*.csv`` (non-recursive, as upstream glob) sorted by path.

    Returns the candidate samples and ``(relative path, size, mtime_ns)`` of every file seen.
    """
    sources: list[_Source] = []
    stats: list[tuple[str, int, int]] = []
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
                stat = entry.stat()
                stats.append((rel_folder, stat.st_size, stat.st_mtime_ns))
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
            stat = item.stat()
            stats.append((rel, stat.st_size, stat.st_mtime_ns))
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


def _cache_key(domain: str, layout: str, stats: Sequence[tuple[str, int, int]]) -> str:
    digest = hashlib.sha256()
    header = {
        "version": _CACHE_FORMAT_VERSION,
        "domain": domain,
        "layout": layout,
        "freq_points": FREQ_POINTS,
        "time_points": TIME_POINTS,
        "time_decimation": TIME_DECIMATION,
    }
    digest.update(json.dumps(header, sort_keys=True).encode())
    for rel, size, mtime_ns in sorted(stats):
        digest.update(f"\n{rel}\0{size}\0{mtime_ns}".encode())
    return digest.hexdigest()[:24]


def _atomic_save_array(path: Path, array: np.ndarray) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            np.save(handle, array)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _cache_paths(cache_dir: Path, root: Path, domain: str, key: str) -> dict[str, Path]:
    # The prefix identifies (root, domain): a cache_dir shared by several roots keeps one entry each.
    prefix = f"{domain}-{hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:8]}"
    stem = f"{prefix}-{key}"
    return {
        "prefix": cache_dir / prefix,
        "x": cache_dir / f"{stem}.x.npy",
        "axis": cache_dir / f"{stem}.axis.npy",
        "meta": cache_dir / f"{stem}.meta.json",
    }


def _read_cache(paths: dict[str, Path], skip_bad: bool) -> RFMatIDData | None:
    try:
        meta = json.loads(paths["meta"].read_text(encoding="utf-8"))
        if meta["skipped"] and not skip_bad:
            return None  # re-parse so that the first bad file raises
        x = np.load(paths["x"], mmap_mode="r", allow_pickle=False)
        axis = np.load(paths["axis"], allow_pickle=False)
    except (OSError, ValueError, KeyError):
        return None
    n = len(meta["files"])
    if x.shape[0] != n:
        return None
    return RFMatIDData(
        x=x,
        axis=axis,
        class_names=tuple(meta["class_names"]),
        distance_mm=np.asarray(meta["distance_mm"], dtype=np.int32),
        angle_deg=np.asarray(meta["angle_deg"], dtype=np.int32),
        files=tuple(meta["files"]),
        skipped=tuple((rel, reason) for rel, reason in meta["skipped"]),
        domain=meta["domain"],
    )


def _open_cache_output(
    cache_dir: Path, paths: dict[str, Path], shape: tuple[int, int], dtype: type
) -> tuple[np.ndarray, Path | None]:
    """A temporary ``.npy`` memmap in the cache dir to parse into, or a RAM array if unwritable."""
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=cache_dir, prefix=paths["x"].name, suffix=".tmp")
        os.close(fd)
    except OSError as error:
        logger.warning("cannot write cache in %s (%s); using in-memory arrays", cache_dir, error)
        return np.empty(shape, dtype=dtype), None
    tmp = Path(name)
    try:
        return np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape), tmp
    except (OSError, ValueError) as error:
        with contextlib.suppress(OSError):
            tmp.unlink()
        logger.warning("cannot write cache in %s (%s); using in-memory arrays", cache_dir, error)
        return np.empty(shape, dtype=dtype), None


def _write_cache(
    cache_dir: Path, paths: dict[str, Path], data: RFMatIDData, x_tmp: Path, complete: bool
) -> RFMatIDData:
    """Commit ``data`` (``x`` parsed into ``x_tmp``); returns it with ``x`` a read-only memmap.

    ``complete`` says whether every row of ``x_tmp`` is used (no samples were skipped).
    """
    if isinstance(data.x, np.memmap):
        data.x.flush()
    if complete:
        os.replace(x_tmp, paths["x"])
    else:
        _atomic_save_array(paths["x"], np.ascontiguousarray(data.x))
        x_tmp.unlink()
    _atomic_save_array(paths["axis"], data.axis)
    meta = {
        "domain": data.domain,
        "class_names": list(data.class_names),
        "distance_mm": data.distance_mm.tolist(),
        "angle_deg": data.angle_deg.tolist(),
        "files": list(data.files),
        "skipped": [list(item) for item in data.skipped],
    }
    _atomic_write_text(paths["meta"], json.dumps(meta))
    keep = {path.name for path in paths.values()}
    for stale in cache_dir.glob(f"{paths['prefix'].name}-*"):
        if stale.name not in keep and not stale.name.endswith(".tmp"):
            with contextlib.suppress(OSError):
                stale.unlink()
    data.x = np.load(paths["x"], mmap_mode="r", allow_pickle=False)
    return data


def _resolve_layout(root: Path, domain: Domain) -> tuple[str, Path, Path | None]:
    """Return (layout, root of the files to read, frequency root for pairing or None)."""
    freq_root = root / FREQ_DOMAIN_DIR
    time_root = root / TIME_DOMAIN_DIR
    if freq_root.is_dir() or time_root.is_dir():
        if domain == "frequency":
            if not freq_root.is_dir():
                raise RFMatIDFormatError(freq_root, "combined root has no frequency-domain folder")
            return "combined", freq_root, None
        if not time_root.is_dir():
            raise RFMatIDFormatError(time_root, "combined root has no time-domain folder")
        return "combined", time_root, freq_root if freq_root.is_dir() else None
    return "plain", root, None


def load_dataset(
    root: str | os.PathLike[str],
    domain: Domain = "frequency",
    cache_dir: str | os.PathLike[str] | None = None,
    skip_bad: bool = False,
    use_cache: bool = True,
) -> RFMatIDData:
    """Load every sample of one domain, sorted by relative path, with a parsed-array cache.

    Frequency: x complex64 [N, 2048] raw S11 (no whitening), axis freq_hz [2048].
    Time: x float32 [N, 3414] = z-scored ``amplitude[::3]`` (upstream ``TD_dataset``), axis the
    matching time_ps [3414]. In a combined root the time samples are the frequency samples' twins
    (same relative path under ``time_domain``); a missing twin is an error.

    The cache (``cache_dir``, default ``<root>/.rfmatid_cache``) is keyed on every source file's
    relative path, size and mtime_ns; a hit returns ``x`` as a read-only memmap. An unwritable
    cache directory falls back to in-memory arrays. ``skip_bad=True`` logs and records bad samples
    in ``skipped`` instead of raising.
    """
    if domain not in ("frequency", "time"):
        raise ValueError(f"domain must be 'frequency' or 'time', got {domain!r}")
    root = Path(root)
    if not root.is_dir():
        raise RFMatIDFormatError(root, "dataset root is not a directory")
    layout, read_root, pair_root = _resolve_layout(root, domain)
    skipper = _Skipper(skip_bad)
    if pair_root is not None:
        # Samples are defined by the frequency tree; the time tree must mirror it.
        freq_sources, stats = _scan_domain_root(root, pair_root, skipper)
        time_sources, time_stats = _scan_domain_root(
            root, read_root, _Skipper(skip_bad=True, silent=True)
        )
        stats += time_stats
        prefix = f"{TIME_DOMAIN_DIR}/"
        available = {source.rel for source in time_sources}
        sources = []
        for source in freq_sources:
            twin = prefix + source.rel.split("/", 1)[1]
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
                        f"{FREQ_DOMAIN_DIR}/ (would be silently unused)",
                    ),
                )
    else:
        sources, stats = _scan_domain_root(root, read_root, skipper)
    if not sources:
        raise RFMatIDFormatError(
            read_root, "no samples found: expected <root>/<position folder>/*.csv"
        )

    cache_root = Path(cache_dir) if cache_dir is not None else root / CACHE_DIR_NAME
    key = _cache_key(domain, layout, stats)
    paths = _cache_paths(cache_root, root, domain, key)
    if use_cache:
        cached = _read_cache(paths, skip_bad)
        if cached is not None:
            logger.debug("cache hit %s", paths["x"])
            return cached

    shape = (len(sources), FREQ_POINTS if domain == "frequency" else TIME_LENGTH)
    dtype = np.complex64 if domain == "frequency" else np.float32
    if use_cache:
        out, x_tmp = _open_cache_output(cache_root, paths, shape, dtype)
    else:
        out, x_tmp = np.empty(shape, dtype=dtype), None
    try:
        data = _parse_sources(root, sources, domain, skipper, out)
        if x_tmp is not None:
            data = _write_cache(cache_root, paths, data, x_tmp, complete=len(data) == len(sources))
    except OSError as error:
        if x_tmp is None:
            raise
        logger.warning("cannot write cache in %s (%s); using in-memory arrays", cache_root, error)
        data.x = np.array(data.x)
    finally:
        if x_tmp is not None:
            with contextlib.suppress(OSError):
                x_tmp.unlink()
    return data


def _parse_sources(
    root: Path, sources: Sequence[_Source], domain: Domain, skipper: _Skipper, x: np.ndarray
) -> RFMatIDData:
    """Parse ``sources`` into the rows of x [len(sources), width]; returns the kept rows."""
    axis: np.ndarray | None = None
    axis_file = ""
    kept: list[_Source] = []
    positions: list[Position] = []
    for source in sources:
        path = root / source.rel
        try:
            if source.problem is not None:
                raise source.problem
            if domain == "frequency":
                sample_axis, values = read_frequency_csv(path)
            else:
                time_ps, amplitude = read_time_csv(path)
                values = _zscore_decimated(str(path), amplitude)
                sample_axis = time_ps[::TIME_DECIMATION]
            if axis is None:
                axis, axis_file = sample_axis, source.rel
            elif not np.allclose(sample_axis, axis, rtol=1e-9, atol=0.0):
                row = int(np.argmax(~np.isclose(sample_axis, axis, rtol=1e-9, atol=0.0)))
                step = 1 if domain == "frequency" else TIME_DECIMATION
                column = "freq_hz" if domain == "frequency" else "time_ps"
                raise RFMatIDFormatError(
                    path,
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
