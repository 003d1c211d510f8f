"""Writing RF-MatID sample CSVs in the released format (the readers are in :mod:`rf_matid.csvio`).

Frequency CSV: header + rows ``freq (Hz), real, imag``; time CSV: header + rows
``time_ps, amplitude``; :func:`write_sample` places both in upstream's ``RFMatID_Dataset`` layout.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from iclr26_common.outputs import FILE_MODE
from rf_matid.csvio import FREQ_HEADER, TIME_HEADER, UPSTREAM_FREQ_HEADER
from rf_matid.layout import (
    FREQ_DOMAIN_DIR,
    TIME_DOMAIN_DIR,
    Position,
    position_folder_name,
    sample_file_name,
)


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
    os.chmod(path, FILE_MODE)  # an ordinary output file whatever the umask


def write_frequency_csv(
    path: str | os.PathLike[str],
    freq_hz: np.ndarray,
    s11: np.ndarray,
    header: str = FREQ_HEADER,
) -> None:
    """Write freq_hz [F] and complex s11 [F] as rows ``freq (Hz), real, imag`` after ``header``.

    ``header``: ``FREQ_HEADER`` (``freq_hz,real,imag``) or ``UPSTREAM_FREQ_HEADER``
    (``freq.GHZ,real,imag``, the released files' header over the same Hz values). Frequencies are
    written with shortest round-trip precision, S11 parts with 9 significant digits (exact for
    complex64).
    """
    if header not in (FREQ_HEADER, UPSTREAM_FREQ_HEADER):
        raise ValueError(f"header must be {FREQ_HEADER!r} or {UPSTREAM_FREQ_HEADER!r}")
    freq = _as_1d("freq_hz", freq_hz).astype(np.float64)
    s11_values = _as_1d("s11", s11, len(freq)).astype(np.complex64)
    _write_text(
        Path(path),
        header,
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
    freq_header: str = FREQ_HEADER,
) -> list[Path]:
    """Write one sample into a combined root; returns the written paths (frequency first).

    Frequency CSV: ``root/frequency_domain/<position folder>/<index:04d>.csv`` (upstream's
    ``RFMatID_Dataset`` layout) with header ``freq_header``; time CSV (if given): the same
    relative path under ``root/time_domain``.
    """
    if (time_ps is None) != (amplitude is None):
        raise ValueError("time_ps and amplitude must be given together")
    folder = position_folder_name(position.class_name, position.distance_mm, position.angle_deg)
    name = sample_file_name(index)
    root = Path(root)
    freq_path = root / FREQ_DOMAIN_DIR / folder / name
    write_frequency_csv(freq_path, freq_hz, s11, header=freq_header)
    written = [freq_path]
    if time_ps is not None and amplitude is not None:
        time_path = root / TIME_DOMAIN_DIR / folder / name
        write_time_csv(time_path, time_ps, amplitude)
        written.append(time_path)
    return written
