"""Touchstone (``.s1p``) import/export of one-port S11 sweeps through ``skrf.Network``.

Not part of upstream (which reads only CSV); lets RF-MatID samples move to and from VNA tools.
``read_s1p`` checks as much as the CSV reader: it scans the file itself first (an option line,
three finite numbers per data line, strictly increasing frequencies; errors name the line and
field), lets scikit-rf parse it (units, RI/MA/DB, Y/Z parameters), then checks the frequencies'
plausibility and renormalises a non-50-ohm reference to 50 ohm (logged).
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path

import numpy as np

from rf_matid.io import RFMatIDFormatError, check_frequency_range

logger = logging.getLogger("rf_matid")

REFERENCE_OHM = 50.0

# Names of the two values after the frequency, per Touchstone data format (default MA).
_PAIR_FIELDS = {"RI": ("real", "imag"), "MA": ("magnitude", "angle"), "DB": ("dB", "angle")}


def write_s1p(
    path: str | os.PathLike[str], freq_hz: np.ndarray, s11: np.ndarray, z0: float = 50.0
) -> Path:
    """Write freq_hz [F] and complex s11 [F] as a Touchstone 1.0 one-port file (RI, Hz).

    ``path`` gets the ``.s1p`` suffix if it has none; returns the written path.
    """
    import skrf

    freq = np.asarray(freq_hz, dtype=np.float64)
    values = np.asarray(s11)
    if freq.ndim != 1 or values.shape != freq.shape:
        raise ValueError(
            f"freq_hz and s11 must be 1-D of equal length, got {freq.shape}, {values.shape}"
        )
    if not (np.isfinite(freq).all() and np.isfinite(values).all()):
        raise ValueError("freq_hz and s11 must be finite")
    if not (np.diff(freq) > 0).all():
        raise ValueError("freq_hz must be strictly increasing")
    target = Path(path)
    if target.suffix.lower() != ".s1p":
        target = target.with_name(target.name + ".s1p")
    target.parent.mkdir(parents=True, exist_ok=True)
    network = skrf.Network(
        frequency=skrf.Frequency.from_f(freq, unit="hz"),
        s=values.astype(np.complex128).reshape(-1, 1, 1),
        z0=z0,
        name=target.stem,
    )
    # 17 significant digits so that a CSV -> s1p -> CSV round trip is lossless
    network.write_touchstone(
        filename=target.stem,
        dir=str(target.parent),
        form="ri",
        format_spec_A="{:.17g}",
        format_spec_B="{:.17g}",
        format_spec_freq="{:.17g}",
        skrf_comment=False,
    )
    return target


def _scan_s1p(path: Path) -> tuple[str | None, list[int]]:
    """Check the layout of a one-port Touchstone file without scikit-rf.

    Returns the option line (None if absent) and the file line of every data row. Raises
    ``RFMatIDFormatError`` naming the line and field for an empty file, a data line without
    exactly 3 numbers (e.g. a 2-port file named ``.s1p``), a non-numeric or non-finite value, or
    frequencies that do not strictly increase.
    """
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as error:
        raise RFMatIDFormatError(path, f"cannot read file: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise RFMatIDFormatError(path, f"not UTF-8 text ({error.reason})") from None
    option: str | None = None
    fields = ("frequency", *_PAIR_FIELDS["MA"])
    rows: list[int] = []
    previous: float | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("!", 1)[0].strip()
        if not line or line.startswith("["):  # comments, blank lines, Touchstone 2 keywords
            continue
        if line.startswith("#"):
            if option is None:
                option = line
                tokens = line[1:].upper().split()
                form = next((token for token in tokens if token in _PAIR_FIELDS), "MA")
                fields = ("frequency", *_PAIR_FIELDS[form])
            continue
        cells = line.split()
        if len(cells) != 3:
            ports = math.isqrt((len(cells) - 1) // 2) if len(cells) > 3 else 0
            guess = f" (a {ports}-port file?)" if 2 * ports**2 + 1 == len(cells) else ""
            raise RFMatIDFormatError(
                path,
                f"expected 3 values per data line of a one-port (S11) file (frequency and "
                f"{fields[1]}, {fields[2]}), got {len(cells)}{guess}",
                line=number,
            )
        values = []
        for cell, field in zip(cells, fields, strict=True):
            try:
                value = float(cell)
            except ValueError:
                raise RFMatIDFormatError(
                    path, f"non-numeric value {cell!r}", line=number, field=field
                ) from None
            if not math.isfinite(value):
                raise RFMatIDFormatError(
                    path, f"non-finite value {cell!r}", line=number, field=field
                )
            values.append(value)
        if previous is not None and values[0] <= previous:
            raise RFMatIDFormatError(
                path,
                f"frequencies must be strictly increasing ({previous!r} then {values[0]!r})",
                line=number,
                field="frequency",
            )
        previous = values[0]
        rows.append(number)
    if not rows:
        raise RFMatIDFormatError(path, "no data lines (empty Touchstone file)")
    return option, rows


def read_s1p(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """Read a one-port Touchstone file -> (freq_hz float64 [F], s11 complex64 [F]).

    S11 is referred to 50 ohm: a file with another reference impedance (option line ``R 75``) is
    renormalised with ``skrf.Network.renormalize`` and a warning is logged. Frequencies must lie
    in ``rf_matid.constants.PLAUSIBLE_FREQ_HZ``; a file without an option line is read, as the
    Touchstone standard says, in GHz.
    """
    import skrf

    source = Path(path)
    if not source.is_file():
        raise RFMatIDFormatError(source, "Touchstone file does not exist")
    option, rows = _scan_s1p(source)
    try:
        with open(source, encoding="utf-8-sig") as handle:
            network = skrf.Network(handle)
    except Exception as error:  # skrf raises many exception types for malformed files
        raise RFMatIDFormatError(source, f"cannot parse Touchstone file: {error}") from None
    if network.nports != 1:
        raise RFMatIDFormatError(
            source, f"expected a one-port (S11) file, got {network.nports} ports"
        )
    freq = np.asarray(network.f, dtype=np.float64)
    if freq.shape != (len(rows),):
        raise RFMatIDFormatError(
            source, f"scikit-rf read {freq.size} frequencies from {len(rows)} data lines"
        )
    hint = (
        "the file has no option line (e.g. '# Hz S RI R 50'), so Touchstone reads GHz"
        if option is None
        else f"option line {option!r}"
    )
    check_frequency_range(source, freq, "frequency", lines=rows, hint=hint)
    z0 = np.asarray(network.z0[:, 0])
    if not np.allclose(z0, REFERENCE_OHM, rtol=0, atol=1e-9):
        logger.warning(
            "%s: reference impedance %s ohm; renormalising S11 to %g ohm",
            source,
            np.unique(z0).tolist() if np.unique(z0).size <= 3 else "per-frequency",
            REFERENCE_OHM,
        )
        network.renormalize(REFERENCE_OHM)
    s11 = np.asarray(network.s[:, 0, 0])
    if not (np.isfinite(freq).all() and np.isfinite(s11).all()):
        raise RFMatIDFormatError(source, "Touchstone data contains NaN or inf")
    return freq, s11.astype(np.complex64)
