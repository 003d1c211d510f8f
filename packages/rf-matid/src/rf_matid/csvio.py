"""RF-MatID sample CSVs: header-aware parsing with errors naming file, line and field; writing.

Frequency CSV: header + 2048 rows ``freq_hz, real, imag``; time CSV: header + 10240 rows
``time_ps, amplitude``. Columns are placed by header name (see :func:`read_frequency_csv`).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rf_matid.constants import (
    FREQ_POINTS,
    PLAUSIBLE_FREQ_HZ,
    TIME_POINTS,
)
from rf_matid.layout import (
    FREQ_DOMAIN_DIR,
    TIME_DOMAIN_DIR,
    Position,
    RFMatIDFormatError,
    position_folder_name,
    sample_file_name,
)

logger = logging.getLogger("rf_matid")

FREQ_HEADER = "freq_hz,real,imag"
TIME_HEADER = "time_ps,amplitude"


# --------------------------------------------------------------------------- CSV parsing


@dataclass(frozen=True)
class _Column:
    """A recognised header name: the canonical column it fills and the factor to its unit."""

    role: str
    scale: float = 1.0
    unit: str = ""


def _header_key(name: str) -> str:
    """Header cell -> lookup key: lower case, letters and digits only ('Freq (GHz)' -> 'freqghz')."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


# Header names the readers map to columns (after ``_header_key``). Columns are matched by name,
# so any order is accepted; a frequency column without a unit is taken as Hz (the plausibility
# check below catches GHz values), one labelled GHz is converted.
_FREQ_HEADER_NAMES: dict[str, _Column] = {
    **dict.fromkeys(("freqhz", "frequencyhz", "fhz", "freq", "frequency"), _Column("freq_hz")),
    **dict.fromkeys(("freqghz", "frequencyghz", "fghz"), _Column("freq_hz", 1e9, "GHz")),
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


@dataclass(frozen=True)
class _Table:
    """Parsed CSV: ``values`` float64 [R, C] in canonical column order, scaled to canonical units.

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
    """Map header cells to canonical columns -> (file column per canonical column, names, columns)."""
    cells = [cell.strip() for cell in line.split(",")]
    expected = ",".join(canonical)
    if len(cells) != len(canonical):
        raise RFMatIDFormatError(
            path,
            f"header {line.strip()!r} has {len(cells)} fields, expected {len(canonical)} "
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
    return order, names, columns


def _parse_table(
    path: str | os.PathLike[str],
    canonical: Sequence[str],
    known: dict[str, _Column],
    expected_rows: int | None,
) -> _Table:
    """Parse ``header + rows`` of ``len(canonical)`` comma-separated finite floats.

    Columns are mapped by their header names (``known``) into the ``canonical`` order and scaled
    to canonical units. Line numbers in errors are 1-based file lines (the header is line 1);
    fields are the file's own column names.
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
    values = table[:, order]
    for position, column in enumerate(columns):
        if column.scale != 1.0:
            logger.info(
                "%s: column %r is in %s; converting to %s",
                path,
                names[position],
                column.unit,
                column.role,
            )
            values[:, position] *= column.scale
    return _Table(values, names, columns)


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


def read_frequency_csv(
    path: str | os.PathLike[str], expected_rows: int | None = FREQ_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """Read a frequency CSV (header, then rows ``freq_hz, real, imag``).

    Returns freq_hz float64 [F] and s11 complex64 [F] (F = 2048 unless ``expected_rows=None``).
    Upstream ``load_raw_data`` drops the header row and parses the rest as float32. Here the
    header's names place the columns (any order: ``imag,real,freq_hz`` is fine); a frequency
    column labelled GHz (``freq_ghz``) is converted to Hz with a logged message; frequencies must
    increase and lie in ``PLAUSIBLE_FREQ_HZ`` (so an unlabelled GHz axis is an error).
    """
    table = _parse_table(path, _FREQ_COLUMNS, _FREQ_HEADER_NAMES, expected_rows)
    freq_hz = np.ascontiguousarray(table.values[:, 0])
    freq_name = table.names[0]
    _check_increasing(path, freq_hz, freq_name)
    if table.columns[0].unit == "GHz":
        hint = f"column {freq_name!r} declares GHz; if the values are in Hz, name it 'freq_hz'"
    else:
        hint = "label the column 'freq_ghz' to read GHz values"
    check_frequency_range(path, freq_hz, freq_name, hint=hint)
    s11 = (table.values[:, 1] + 1j * table.values[:, 2]).astype(np.complex64)
    return freq_hz, s11


def read_time_csv(
    path: str | os.PathLike[str], expected_rows: int | None = TIME_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """Read a time-domain CSV (header, then rows ``time_ps, amplitude``), undecimated.

    Returns time_ps float64 [T] and amplitude float32 [T] (T = 10240 unless ``expected_rows=None``).
    Columns are placed by their header names (``amplitude,time_ps`` is fine).
    """
    table = _parse_table(path, _TIME_COLUMNS, _TIME_HEADER_NAMES, expected_rows)
    time_ps = np.ascontiguousarray(table.values[:, 0])
    _check_increasing(path, time_ps, table.names[0])
    return time_ps, table.values[:, 1].astype(np.float32)


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
