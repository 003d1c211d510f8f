"""RF-MatID sample CSVs: header-aware parsing with errors naming file, line and field (writing:
:mod:`rf_matid.csvwrite`).

Frequency CSV: header + 2048 rows ``freq_hz, real, imag``; time CSV: header + 10240 rows
``time_ps, amplitude``. Columns are placed by header name (see :func:`read_frequency_csv`).
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rf_matid import csvfast
from rf_matid.constants import (
    FREQ_POINTS,
    PLAUSIBLE_FREQ_HZ,
    TIME_POINTS,
)
from rf_matid.layout import (
    RFMatIDFormatError,
)

FREQ_HEADER = "freq_hz,real,imag"
# The header of the released RF-MatID frequency CSVs: it says GHz, but the values are in Hz
# (upstream ``dataset/dataset.py`` crops with ``freq >= low_ghz * 1e9`` and divides by 1e9).
UPSTREAM_FREQ_HEADER = "freq.GHZ,real,imag"
TIME_HEADER = "time_ps,amplitude"

# Units a frequency column may be written in. The readers decide the unit from the values, not
# from the header: the MS46131A band (4-43.5 GHz) read in each unit falls into a different decade
# range (Hz 4e9-4.35e10, MHz 4e3-4.35e4, GHz 4-43.5), so the ranges of PLAUSIBLE_FREQ_HZ in the
# three units do not overlap and the values alone are unambiguous.
FREQ_UNITS: dict[str, float] = {"Hz": 1.0, "MHz": 1e6, "GHz": 1e9}


# --------------------------------------------------------------------------- CSV parsing


@dataclass(frozen=True)
class _Column:
    """A recognised header name: the canonical column it fills and the unit it declares."""

    role: str
    unit: str | None = None  # frequency columns: the unit the header names (None: no unit)


def _header_key(name: str) -> str:
    """Header cell -> lookup key: lower case, letters and digits only ('Freq (GHz)' -> 'freqghz')."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


# Header names the readers map to columns (after ``_header_key``). Columns are matched by name,
# so any order is accepted. A frequency column's unit is decided from its values
# (``frequency_unit``); a unit in its name that disagrees is reported on stderr.
_FREQ_HEADER_NAMES: dict[str, _Column] = {
    **dict.fromkeys(("freq", "frequency"), _Column("freq_hz")),
    **dict.fromkeys(("freqhz", "frequencyhz", "fhz"), _Column("freq_hz", "Hz")),
    **dict.fromkeys(("freqmhz", "frequencymhz", "fmhz"), _Column("freq_hz", "MHz")),
    **dict.fromkeys(("freqghz", "frequencyghz", "fghz"), _Column("freq_hz", "GHz")),
    **dict.fromkeys(("real", "re", "s11real", "reals11", "res11", "s11re"), _Column("real")),
    **dict.fromkeys(
        ("imag", "im", "imaginary", "s11imag", "imags11", "ims11", "s11im"), _Column("imag")
    ),
}
_TIME_HEADER_NAMES: dict[str, _Column] = {
    **dict.fromkeys(("timeps", "tps", "time"), _Column("time_ps")),
    **dict.fromkeys(("amplitude", "amp"), _Column("amplitude")),
}
_FREQ_COLUMNS = ("freq_hz", "real", "imag")
_TIME_COLUMNS = ("time_ps", "amplitude")

# (header cell, declared unit, decided unit) already reported on stderr in this process; the
# lock keeps it to one notice when the loader parses in several threads.
_UNIT_NOTICES: set[tuple[str, str, str]] = set()
_NOTICE_LOCK = threading.Lock()


# Headers already mapped (header line, canonical columns, id of the name table) -> the mapping of
# _parse_header; only headers that mapped without error, at most 64.
_HEADERS: dict[tuple[str, tuple[str, ...], int], tuple[tuple[int, ...], tuple, tuple]] = {}


@dataclass(frozen=True)
class _Table:
    """Parsed CSV: ``values`` float64 [R, C] in canonical column order, as written in the file.

    ``names`` are the file's own header names per canonical column (used in error messages) and
    ``columns`` the header entry each one matched.
    """

    values: np.ndarray
    names: tuple[str, ...]
    columns: tuple[_Column, ...]


def _parse_header(
    path: str | os.PathLike[str],
    line: str,
    canonical: Sequence[str],
    known: dict[str, _Column],
) -> tuple[list[int], tuple[str, ...], tuple[_Column, ...]]:
    """Map header cells to canonical columns -> (file column per canonical column, names, columns).

    A header seen before (a dataset's files share one) is answered from ``_HEADERS``.
    """
    key = (line, tuple(canonical), id(known))
    seen = _HEADERS.get(key)
    if seen is not None:
        return list(seen[0]), seen[1], seen[2]
    cells = [cell.strip() for cell in line.split(",")]
    expected = ",".join(canonical)
    if len(cells) != len(canonical):
        raise RFMatIDFormatError(
            path,
            f"header {_shorten(line.strip())!r} has {len(cells)} fields, expected {len(canonical)} "
            f"({expected})",
            line=1,
        )
    found: dict[str, tuple[int, str, _Column]] = {}
    for index, cell in enumerate(cells):
        column = known.get(_header_key(cell))
        if column is None:
            raise RFMatIDFormatError(
                path,
                f"unknown column name {cell!r} in the header; expected the columns {expected} "
                "in any order",
                line=1,
                field=cell,
            )
        if column.role in found:
            raise RFMatIDFormatError(
                path,
                f"column {cell!r} repeats {found[column.role][1]!r} ({column.role})",
                line=1,
                field=cell,
            )
        found[column.role] = (index, cell, column)
    order = [found[role][0] for role in canonical]
    names = tuple(found[role][1] for role in canonical)
    columns = tuple(found[role][2] for role in canonical)
    if len(_HEADERS) < 64:
        _HEADERS[key] = (tuple(order), names, columns)
    return order, names, columns


def _shorten(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters for a one-line message (a file without newlines
    would otherwise be quoted whole)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _read_bytes(path: str | os.PathLike[str]) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise RFMatIDFormatError(path, f"cannot read file: {error.strerror or error}") from None


def _parse_table(
    path: str | os.PathLike[str],
    canonical: Sequence[str],
    known: dict[str, _Column],
    expected_rows: int | None,
    raw: bytes | None = None,
    rows: np.ndarray | None = None,
) -> _Table:
    """Parse ``header + rows`` of ``len(canonical)`` comma-separated finite floats.

    Columns are mapped by their header names (``known``) into the ``canonical`` order; values are
    as written (units are the caller's business). The rows are parsed in one vectorised pass
    (:func:`rf_matid.csvfast.fast_rows`, pyarrow's CSV reader; ``rows``: that pass's result for this file when a
    batch of files was parsed at once, :func:`rf_matid.csvfast.fast_rows_batch`); anything that pass does not take
    as clean ``R x C`` numbers goes through the line-by-line path, which parses it the same way or
    raises the error. Line numbers in errors are 1-based file lines (the header is line 1);
    fields are the file's own column names. ``raw``: the file's bytes when already read.
    """
    if raw is None:
        raw = _read_bytes(path)
    newline = raw.find(b"\n")
    head = raw if newline < 0 else raw[:newline]
    try:
        header = head.decode("utf-8-sig").rstrip("\r")
    except UnicodeDecodeError as error:
        raise RFMatIDFormatError(path, f"not UTF-8 text ({error.reason})") from None
    table = None
    if header.strip() and not _is_numeric_row(header, len(canonical)):
        order, names, columns = _parse_header(path, header, canonical, known)
        table = rows if rows is not None else csvfast.fast_rows(raw, len(canonical))
    if table is None:
        table, order, names, columns = _slow_rows(path, raw, canonical, known)
    file_names = [""] * len(canonical)
    for position, index in enumerate(order):
        file_names[index] = names[position]
    finite = np.isfinite(table)
    if not finite.all():
        row, col = np.argwhere(~finite)[0]
        raise RFMatIDFormatError(
            path,
            f"non-finite value {float(table[row, col])!r}",
            line=int(row) + 2,
            field=file_names[col],
        )
    if expected_rows is not None and table.shape[0] != expected_rows:
        extra_line = expected_rows + 2 if table.shape[0] > expected_rows else None
        raise RFMatIDFormatError(
            path,
            f"expected {expected_rows} data rows after the header, found {table.shape[0]}",
            line=extra_line,
        )
    if order != list(range(len(canonical))):  # columns in another order than canonical
        table = table[:, order]
    return _Table(table, names, columns)


def _slow_rows(
    path: str | os.PathLike[str],
    raw: bytes,
    canonical: Sequence[str],
    known: dict[str, _Column],
) -> tuple[np.ndarray, list[int], tuple[str, ...], tuple[_Column, ...]]:
    """Line-by-line parse (``np.loadtxt``) with errors naming the file, line and field.

    Returns float64 [R, C] in file column order and the header mapping (see
    :func:`_parse_header`).
    """
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise RFMatIDFormatError(path, f"not UTF-8 text ({error.reason})") from None
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise RFMatIDFormatError(path, "file is empty", line=1)
    if _is_numeric_row(lines[0], len(canonical)):
        raise RFMatIDFormatError(
            path, f"expected a header row ({','.join(canonical)}), found numeric data", line=1
        )
    order, names, columns = _parse_header(path, lines[0], canonical, known)
    file_names = [""] * len(canonical)
    for position, index in enumerate(order):
        file_names[index] = names[position]
    body = lines[1:]
    if not body:
        raise RFMatIDFormatError(path, "no data rows after the header", line=2)
    try:
        table = np.loadtxt(body, delimiter=",", dtype=np.float64, ndmin=2, comments=None)
    except ValueError as error:
        _diagnose_rows(path, body, file_names)
        raise RFMatIDFormatError(path, f"unparseable CSV: {error}") from None
    if table.shape[0] != len(body) or table.shape[1] != len(canonical):
        _diagnose_rows(path, body, file_names)
        raise RFMatIDFormatError(
            path, f"expected {len(canonical)} columns, parsed an array of shape {table.shape}"
        )
    return table, order, names, columns


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


def check_frequency_range(
    path: str | os.PathLike[str],
    freq_hz: np.ndarray,
    field: str,
    lines: Sequence[int] | None = None,
    hint: str = "",
) -> None:
    """Raise unless every freq_hz [F] lies in ``PLAUSIBLE_FREQ_HZ`` (the band with a margin).

    ``lines[i]`` is the file line of ``freq_hz[i]`` (None: CSV data rows, starting at line 2);
    ``hint`` is appended to the message. Values that would be plausible in GHz say so.
    """
    low, high = PLAUSIBLE_FREQ_HZ
    bad = (freq_hz < low) | (freq_hz > high)
    if not bad.any():
        return
    row = int(np.argmax(bad))
    value = float(freq_hz[row])
    message = (
        f"frequency {value!r} Hz is outside the plausible range {low / 1e9:g}-{high / 1e9:g} GHz "
        "(MS46131A band 4-43.5 GHz)"
    )
    if low <= value * 1e9 <= high:
        message += "; the values look like GHz"
    if hint:
        message += f"; {hint}"
    line = row + 2 if lines is None else lines[row]
    raise RFMatIDFormatError(path, message, line=line, field=field)


def frequency_unit(values: np.ndarray) -> str | None:
    """The unit (key of ``FREQ_UNITS``) in which the median of the increasing axis ``values``
    (its middle value) lies in the plausible band ``PLAUSIBLE_FREQ_HZ``, or None when it lies in
    none of them.

    The three unit ranges are disjoint (1e9-1e11, 1e3-1e5, 1-100), so at most one fits; the
    median makes a single bad row an error located by :func:`check_frequency_range`, not a
    reason to read the whole axis in another unit.
    """
    if values.size == 0:
        return None
    median = float(values[values.size // 2])  # the axis is increasing: its middle value
    low, high = PLAUSIBLE_FREQ_HZ
    for unit, scale in FREQ_UNITS.items():
        if low <= median * scale <= high:
            return unit
    return None


def _unit_notice(path: str | os.PathLike[str], name: str, declared: str, decided: str) -> None:
    """Tell the user on stderr, once per process and header, that a header's unit was overruled."""
    key = (name, declared, decided)
    with _NOTICE_LOCK:
        if key in _UNIT_NOTICES:
            return
        _UNIT_NOTICES.add(key)
    print(
        f"rf-matid: notice: {path}: column {name!r} says {declared}, but its values are "
        f"{decided} (the 4-43.5 GHz band); reading them as {decided}. The released RF-MatID "
        f"files are written this way; further files with this header are read the same way "
        "without another notice.",
        file=sys.stderr,
        flush=True,
    )


def read_frequency_csv(
    path: str | os.PathLike[str], expected_rows: int | None = FREQ_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """Read a frequency CSV (header, then rows ``freq, real, imag``).

    Returns freq_hz float64 [F] and s11 complex64 [F] (F = 2048 unless ``expected_rows=None``).
    Upstream ``load_raw_data`` drops the header row and parses the rest as float32. Here the
    header's names place the columns (any order: ``imag,real,freq_hz`` is fine). The frequency
    unit (Hz, MHz or GHz) is decided from the values (:func:`frequency_unit`), never from the
    header: the released files say ``freq.GHZ`` over values in Hz. When the header names a unit
    that the values contradict, a notice goes to stderr (once per process and header).
    Frequencies must increase and lie in ``PLAUSIBLE_FREQ_HZ`` once converted.
    """
    table = _parse_table(path, _FREQ_COLUMNS, _FREQ_HEADER_NAMES, expected_rows)
    return _frequency_sample(path, table)


def _frequency_sample(path: str | os.PathLike[str], table: _Table) -> tuple[np.ndarray, np.ndarray]:
    """(freq_hz float64 [F], s11 complex64 [F]) of a parsed frequency table (see
    :func:`read_frequency_csv`)."""
    values = np.ascontiguousarray(table.values[:, 0])
    freq_name = table.names[0]
    declared = table.columns[0].unit
    _check_increasing(path, values, freq_name)
    decided = frequency_unit(values)
    if decided is None:
        # No unit puts the axis in the band: report the first implausible row, read as declared.
        freq_hz = values * FREQ_UNITS[declared or "Hz"]
        check_frequency_range(
            path, freq_hz, freq_name, hint=f"read as {declared or 'Hz'}; no unit fits the values"
        )
        raise RFMatIDFormatError(  # pragma: no cover - the median lies in no band: some row fails
            path, "frequencies are in no known unit (Hz, MHz, GHz)", field=freq_name
        )
    if declared is not None and declared != decided:
        _unit_notice(path, freq_name, declared, decided)
    freq_hz = values * FREQ_UNITS[decided] if decided != "Hz" else values
    check_frequency_range(
        path, freq_hz, freq_name, hint=f"the column's values are read as {decided}"
    )
    s11 = np.empty(len(values), dtype=np.complex64)  # each part rounded to float32
    with np.errstate(over="ignore"):  # reported below, with the line
        s11.real = table.values[:, 1]
        s11.imag = table.values[:, 2]
    _check_float32(path, s11.real, table.values[:, 1], table.names[1])
    _check_float32(path, s11.imag, table.values[:, 2], table.names[2])
    return freq_hz, s11


def _check_float32(
    path: str | os.PathLike[str], stored: np.ndarray, parsed: np.ndarray, field: str
) -> None:
    """Refuse a value that overflows float32 (the stored dtype; upstream parses as float32)."""
    bad = ~np.isfinite(stored)
    if bad.any():
        row = int(np.argmax(bad))
        raise RFMatIDFormatError(
            path,
            f"value {float(parsed[row])!r} does not fit float32 (|x| < 3.4e38)",
            line=row + 2,
            field=field,
        )


def read_time_csv(
    path: str | os.PathLike[str], expected_rows: int | None = TIME_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """Read a time-domain CSV (header, then rows ``time_ps, amplitude``), undecimated.

    Returns time_ps float64 [T] and amplitude float32 [T] (T = 10240 unless ``expected_rows=None``).
    Columns are placed by their header names (``amplitude,time_ps`` is fine).
    """
    table = _parse_table(path, _TIME_COLUMNS, _TIME_HEADER_NAMES, expected_rows)
    return _time_sample(path, table)


def _time_sample(path: str | os.PathLike[str], table: _Table) -> tuple[np.ndarray, np.ndarray]:
    """(time_ps float64 [T], amplitude float32 [T]) of a parsed time table."""
    time_ps = np.ascontiguousarray(table.values[:, 0])
    _check_increasing(path, time_ps, table.names[0])
    with np.errstate(over="ignore"):  # reported by _check_float32, with the line
        amplitude = table.values[:, 1].astype(np.float32)
    _check_float32(path, amplitude, table.values[:, 1], table.names[1])
    return time_ps, amplitude


Sample = tuple[np.ndarray, np.ndarray]

_KINDS = {
    "frequency": (_FREQ_COLUMNS, _FREQ_HEADER_NAMES, FREQ_POINTS, _frequency_sample),
    "time": (_TIME_COLUMNS, _TIME_HEADER_NAMES, TIME_POINTS, _time_sample),
}


def read_csvs(
    paths: Sequence[str | os.PathLike[str]], domain: str
) -> list[Sample | RFMatIDFormatError]:
    """:func:`read_frequency_csv` (``domain="frequency"``) or :func:`read_time_csv` (``"time"``)
    of every path, in order, each result or the file's format error (not raised).

    The same results and errors as reading the files one at a time, faster: the files' rows go
    through one pyarrow call (:func:`rf_matid.csvfast.fast_rows_batch`), whose fixed cost dominates the parse of
    a 2048-row file. Pass batches of tens of files (the parsed rows of all of them are held).
    """
    canonical, known, expected_rows, finish = _KINDS[domain]
    raws: list[bytes | RFMatIDFormatError] = []
    for path in paths:
        try:
            raws.append(_read_bytes(path))
        except RFMatIDFormatError as error:
            raws.append(error)
    readable = [i for i, raw in enumerate(raws) if isinstance(raw, bytes)]
    batch = csvfast.fast_rows_batch([raws[i] for i in readable], len(canonical))  # type: ignore[misc]
    rows: list[np.ndarray | None] = [None] * len(paths)
    for i, parsed in zip(readable, batch, strict=True):
        rows[i] = parsed
    out: list[Sample | RFMatIDFormatError] = []
    for path, raw, parsed in zip(paths, raws, rows, strict=True):
        if isinstance(raw, RFMatIDFormatError):
            out.append(raw)
            continue
        try:
            table = _parse_table(path, canonical, known, expected_rows, raw=raw, rows=parsed)
            out.append(finish(path, table))
        except RFMatIDFormatError as error:
            out.append(error)
    return out
