"""Frequency protocols P1-P5 of RF-MatID (paper Sec. "frequency protocols"; upstream
``config_hub/freq_domain/all_classes/freq_protocol_{1..5}`` ``freq_range`` and ``freq_crop``).

A protocol is a tuple of (low, high) GHz ranges. Cropping follows upstream ``freq_crop``: each range
keeps the bins with ``low * 1e9 <= f <= high * 1e9`` (both bounds inclusive) and the per-range
selections are concatenated in the listed order. On ``PROTOCOL_GRID`` (the MS46131A 2048-point
sweep) this gives P1..P5 = 2048 / 700 / 1348 / 938 / 1883 bins, identically for float64 and for the
float32 frequencies upstream parses.
"""

from __future__ import annotations

import numpy as np

from rf_matid.constants import BAND_GHZ, FREQ_GRID_HZ

GHZ = 1e9
# The MS46131A grid (one definition, in rf_matid.constants; read-only).
PROTOCOL_GRID: np.ndarray = FREQ_GRID_HZ

PROTOCOLS: dict[str, tuple[tuple[float, float], ...]] = {
    # P1: full band.
    "P1": ((4.0, 43.5),),
    # P2: high band.
    "P2": ((30.0, 43.5),),
    # P3: low band.
    "P3": ((4.0, 30.0),),
    # P4: bands usable in the US.
    "P4": ((5.725, 5.85), (23.12, 23.6), (24.0, 36.0), (37.0, 42.5)),
    # P5: bands usable in China.
    "P5": (
        (4.0, 5.65),
        (5.85, 10.0),
        (10.7, 15.35),
        (15.4, 23.6),
        (24.25, 31.3),
        (31.8, 36.43),
        (36.5, 42.5),
    ),
}

PROTOCOL_BINS: dict[str, int] = {"P1": 2048, "P2": 700, "P3": 1348, "P4": 938, "P5": 1883}

Protocol = str | tuple[tuple[float, float], ...] | list[tuple[float, float]] | None


def protocol_ranges(protocol: Protocol) -> tuple[tuple[float, float], ...]:
    """GHz ranges of a protocol key ("P1".."P5") or of explicit ranges; None gives P1's.

    Ranges must satisfy upstream's check ``4 <= low < high <= 43.5``.
    """
    if protocol is None:
        return PROTOCOLS["P1"]
    if isinstance(protocol, str):
        key = protocol.upper()
        if key not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}; expected one of {sorted(PROTOCOLS)}")
        return PROTOCOLS[key]
    ranges = tuple((float(low), float(high)) for low, high in protocol)
    if not ranges:
        raise ValueError("a protocol needs at least one (low, high) GHz range")
    for low, high in ranges:
        if not (BAND_GHZ[0] <= low < high <= BAND_GHZ[1]):
            raise ValueError(
                f"crop range ({low}, {high}) GHz must satisfy {BAND_GHZ[0]} <= low < high <= "
                f"{BAND_GHZ[1]}"
            )
    return ranges


def protocol_indices(freq_hz: np.ndarray, protocol: Protocol) -> np.ndarray:
    """Bin indices kept by ``protocol`` on freq_hz [F], concatenated per range (upstream order).

    ``None`` keeps every bin (upstream ``freq_range: null`` skips ``freq_crop``).
    """
    freq = np.asarray(freq_hz)
    if freq.ndim != 1:
        raise ValueError(f"freq_hz must be 1-D, got shape {freq.shape}")
    if protocol is None:
        return np.arange(freq.shape[0], dtype=np.int64)
    parts = [
        np.flatnonzero((freq >= low * GHZ) & (freq <= high * GHZ))
        for low, high in protocol_ranges(protocol)
    ]
    return np.concatenate(parts).astype(np.int64)


def protocol_mask(freq_hz: np.ndarray, protocol: Protocol) -> np.ndarray:
    """Boolean mask [F] of the bins inside any range of ``protocol`` (inclusive bounds)."""
    freq = np.asarray(freq_hz)
    mask = np.zeros(freq.shape, dtype=bool)
    mask[protocol_indices(freq, protocol)] = True
    return mask


def apply_protocol(
    x: np.ndarray, freq_hz: np.ndarray, protocol: Protocol
) -> tuple[np.ndarray, np.ndarray]:
    """Crop x [..., F] and freq_hz [F] to ``protocol``; returns (x [..., F'], freq_hz [F']).

    Works on numpy arrays, memmaps (the result is an in-memory copy) and torch tensors.
    """
    freq = np.asarray(freq_hz)
    if x.shape[-1] != freq.shape[0]:
        raise ValueError(
            f"x has {x.shape[-1]} frequency bins on its last axis but freq_hz has {freq.shape[0]}"
        )
    indices = protocol_indices(freq, protocol)
    if indices.size == 0:
        raise ValueError(f"protocol {protocol!r} keeps no bins of the given frequency axis")
    if isinstance(x, np.ndarray):
        return np.take(x, indices, axis=-1), freq[indices]
    import torch

    if isinstance(x, torch.Tensor):
        return x[..., torch.as_tensor(indices, device=x.device)], freq[indices]
    raise TypeError(f"x must be a numpy array or torch tensor, got {type(x).__name__}")
