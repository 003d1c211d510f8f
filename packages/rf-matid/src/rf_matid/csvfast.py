"""The vectorised row parse of the RF-MatID CSV readers (:mod:`rf_matid.csvio`): pyarrow's C++
CSV reader on one file (:func:`fast_rows`) or on the joined rows of a batch of files
(:func:`fast_rows_batch`, what a first read of a dataset uses). Both accept only clean numeric
rows and return None for anything else, so that the readers' line-by-line path parses it or
names the bad line: values and errors never depend on which path or batch a file took.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["fast_rows", "fast_rows_batch"]


def _pyarrow_csv() -> Any:
    """``(pyarrow, pyarrow.csv)``, or None when pyarrow (an optional dependency) is not
    installed: the numpy path then parses everything."""
    try:
        import pyarrow
        import pyarrow.csv
    except ImportError:  # pragma: no cover - pyarrow is installed in the workspace
        return None
    return pyarrow, pyarrow.csv


def _arrow_rows(data: bytes, n_columns: int, skip_rows: int) -> np.ndarray | None:
    """float64 [R, C] of the lines of ``data`` after ``skip_rows``, or None: one call of
    pyarrow's C++ CSV reader (single-threaded, correctly rounded float parsing) that accepts only
    clean rows (exactly ``n_columns`` unquoted numbers per line, no empty line, no empty field).
    None when pyarrow is missing or any row is anything else."""
    modules = _pyarrow_csv()
    if modules is None:
        return None
    pa, arrow_csv = modules
    names = [f"c{i}" for i in range(n_columns)]
    try:
        table = arrow_csv.read_csv(
            pa.BufferReader(data),
            read_options=arrow_csv.ReadOptions(
                skip_rows=skip_rows, column_names=names, use_threads=False
            ),
            parse_options=arrow_csv.ParseOptions(quote_char=False, ignore_empty_lines=False),
            convert_options=arrow_csv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.float64()),
                null_values=[],
                strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows == 0 or table.num_columns != n_columns:
        return None
    columns = [table.column(name) for name in names]
    if any(column.null_count for column in columns):
        return None
    return np.column_stack([column.to_numpy() for column in columns])


def fast_rows(raw: bytes, n_columns: int) -> np.ndarray | None:
    """float64 [R, C] of every line after the header (:func:`_arrow_rows`), or None.

    None when pyarrow is missing or the rows are anything else (a malformed row, text, a
    trailing blank line, ...), so that the line-by-line parse (``rf_matid.csvio._slow_rows``) reads the file and names the bad
    line. Values are those numpy's ``loadtxt`` gives for the same text.
    """
    return _arrow_rows(raw, n_columns, skip_rows=1)


def _body(raw: bytes) -> bytes | None:
    """The lines after a file's first line, each ended by a newline (one is added after a last
    line that lacks it: pyarrow reads that line the same either way), or None when the file
    cannot join a batch: no line after the first; a carriage return in the first line other
    than right before its newline (pyarrow ends a line at a lone ``\\r`` too, and skipping the
    header must skip what a one-file parse, ``skip_rows=1``, skips); trailing blank lines (a
    one-file read strips them on the line-by-line path, a joined parse would fail)."""
    newline = raw.find(b"\n")
    if newline < 0 or newline + 1 == len(raw):
        return None
    if b"\r" in raw[: newline - 1]:  # a lone CR in the first line: pyarrow would end it there
        return None
    body = raw[newline + 1 :]
    if body.endswith((b"\n\n", b"\n\r\n")):
        return None
    return body if body.endswith(b"\n") else body + b"\n"


def fast_rows_batch(raws: Sequence[bytes], n_columns: int) -> list[np.ndarray | None]:
    """:func:`fast_rows` of several files in ONE pyarrow call (the call's fixed cost dominates
    a 2048-row file): the files' lines after their first (:func:`_body`) are joined, parsed at
    once and split back by each file's newline count.

    The joined text starts with a dummy line that is skipped, as a one-file parse skips the
    header: pyarrow drops a byte-order mark only at the very start of its input, so a BOM at the
    start of the first file's second line is an error here as it is in a one-file read. A file
    :func:`_body` refuses gets None; so does every file when the joined parse fails or yields
    another row count than the newlines (e.g. a lone ``\\r`` line end): the caller then parses
    each file alone, so values and errors are those of one file at a time.
    """
    out: list[np.ndarray | None] = [None] * len(raws)
    bodies = [(i, body) for i, raw in enumerate(raws) if (body := _body(raw)) is not None]
    if not bodies:
        return out
    # newlines per file (numpy's compare-and-count is ~7x bytes.count here)
    counts = [int(np.count_nonzero(np.frombuffer(body, np.uint8) == 10)) for _, body in bodies]
    joined = b"".join([b"skipped\n", *(body for _, body in bodies)])
    table = _arrow_rows(joined, n_columns, skip_rows=1)
    if table is None or table.shape[0] != sum(counts):
        return out
    for (i, _), part in zip(bodies, np.split(table, np.cumsum(counts)[:-1]), strict=True):
        out[i] = part
    return out
