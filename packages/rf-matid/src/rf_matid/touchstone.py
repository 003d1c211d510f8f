"""Touchstone (``.s1p``) import/export of one-port S11 sweeps through ``skrf.Network``.

Not part of upstream (which reads only CSV); lets RF-MatID samples move to and from VNA tools.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rf_matid.io import RFMatIDFormatError


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


def read_s1p(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """Read a one-port Touchstone file -> (freq_hz float64 [F], s11 complex64 [F])."""
    import skrf

    source = Path(path)
    if not source.is_file():
        raise RFMatIDFormatError(source, "Touchstone file does not exist")
    try:
        network = skrf.Network(str(source))
    except Exception as error:  # skrf raises many exception types for malformed files
        raise RFMatIDFormatError(source, f"cannot parse Touchstone file: {error}") from None
    if network.nports != 1:
        raise RFMatIDFormatError(
            source, f"expected a one-port (S11) file, got {network.nports} ports"
        )
    freq = np.asarray(network.f, dtype=np.float64)
    s11 = np.asarray(network.s[:, 0, 0])
    if not (np.isfinite(freq).all() and np.isfinite(s11).all()):
        raise RFMatIDFormatError(source, "Touchstone data contains NaN or inf")
    return freq, s11.astype(np.complex64)
