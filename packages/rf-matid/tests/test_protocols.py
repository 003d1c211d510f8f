from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rf_matid.protocols import (
    PROTOCOL_BINS,
    PROTOCOL_GRID,
    PROTOCOLS,
    apply_protocol,
    protocol_indices,
    protocol_mask,
    protocol_ranges,
)


def test_protocol_table_matches_the_documented_table() -> None:
    readme = Path(__file__).resolve().parents[1] / "README.md"
    section = readme.read_text(encoding="utf-8").split("### Protocols", 1)[1].split("\n#", 1)[0]
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if re.match(r"^\| P\d", line)
    ]
    assert [row[0].split()[0] for row in rows] == sorted(PROTOCOLS)
    for name, ranges, bins in rows:
        key = name.split()[0]
        documented = tuple(
            tuple(float(bound) for bound in part.split("–")) for part in ranges.split(",")
        )
        assert PROTOCOLS[key] == documented, key
        assert int(protocol_mask(PROTOCOL_GRID, key).sum()) == int(bins), key


@pytest.mark.parametrize(
    ("key", "bins"), [("P1", 2048), ("P2", 700), ("P3", 1348), ("P4", 938), ("P5", 1883)]
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_bin_counts_on_grid(key: str, bins: int, dtype) -> None:
    grid = PROTOCOL_GRID.astype(dtype)  # upstream parses frequencies as float32
    assert protocol_mask(grid, key).sum() == bins == PROTOCOL_BINS[key]
    x = np.zeros((3, 2, 2048), dtype=np.float32)
    cropped, freq = apply_protocol(x, grid, key)
    assert cropped.shape == (3, 2, bins) and freq.shape == (bins,)


def test_per_range_counts_and_inclusive_bounds() -> None:
    counts = [int(protocol_mask(PROTOCOL_GRID, (r,)).sum()) for r in PROTOCOLS["P4"]]
    assert counts == [6, 25, 622, 285]
    # grid endpoints are exactly 4 and 43.5 GHz; both must be kept by inclusive bounds
    mask = protocol_mask(PROTOCOL_GRID, "P2")
    assert mask[-1] and PROTOCOL_GRID[mask][0] >= 30e9
    edge = np.array([30e9, 30e9 + 1, 43.5e9, 43.5e9 + 1])
    np.testing.assert_array_equal(protocol_mask(edge, "P2"), [True, True, True, False])


def test_cropped_values_follow_the_mask() -> None:
    x = np.arange(2048, dtype=np.float32)[None, :] * np.ones((4, 1), dtype=np.float32)
    cropped, freq = apply_protocol(x, PROTOCOL_GRID, "P5")
    mask = protocol_mask(PROTOCOL_GRID, "P5")
    np.testing.assert_array_equal(cropped[2], np.flatnonzero(mask))
    np.testing.assert_array_equal(freq, PROTOCOL_GRID[mask])
    assert np.all(np.diff(freq) > 0)


def test_ranges_are_concatenated_in_listed_order_like_upstream() -> None:
    indices = protocol_indices(PROTOCOL_GRID, [(30.0, 43.5), (4.0, 5.0)])
    assert PROTOCOL_GRID[indices[0]] >= 30e9 and PROTOCOL_GRID[indices[-1]] <= 5e9


def test_none_keeps_every_bin_and_torch_works() -> None:
    freq = np.linspace(3e9, 44e9, 100)  # outside the band on purpose
    assert protocol_indices(freq, None).size == 100
    assert protocol_mask(freq, "P1").sum() < 100
    x = torch.randn(2, 2, 2048)
    cropped, _ = apply_protocol(x, PROTOCOL_GRID, "P4")
    assert isinstance(cropped, torch.Tensor) and cropped.shape == (2, 2, 938)
    torch.testing.assert_close(
        cropped, x[..., torch.from_numpy(np.flatnonzero(protocol_mask(PROTOCOL_GRID, "P4")))]
    )


def test_apply_protocol_accepts_complex_memmap(tmp_path) -> None:
    path = tmp_path / "x.npy"
    np.save(path, (np.ones((2, 2048)) * (1 + 2j)).astype(np.complex64))
    x = np.load(path, mmap_mode="r")
    cropped, _ = apply_protocol(x, PROTOCOL_GRID, "P2")
    assert cropped.dtype == np.complex64 and cropped.shape == (2, 700)


@pytest.mark.parametrize("protocol", ["P9", [(3.0, 10.0)], [(10.0, 10.0)], [(20.0, 44.0)], []])
def test_invalid_protocols(protocol) -> None:
    with pytest.raises(ValueError):
        protocol_ranges(protocol)


def test_shape_mismatch_and_empty_crop() -> None:
    with pytest.raises(ValueError, match="frequency bins"):
        apply_protocol(np.zeros((2, 100)), PROTOCOL_GRID, "P1")
    with pytest.raises(ValueError, match="keeps no bins"):
        apply_protocol(np.zeros((2, 3)), np.array([1e9, 2e9, 3e9]), "P2")


@given(low=st.floats(4.0, 43.0), width=st.floats(0.01, 10.0))
@settings(max_examples=100, deadline=None)
def test_mask_equals_inclusive_bounds(low: float, width: float) -> None:
    high = min(low + width, 43.5)
    mask = protocol_mask(PROTOCOL_GRID, [(low, high)])
    expected = (PROTOCOL_GRID >= low * 1e9) & (PROTOCOL_GRID <= high * 1e9)
    np.testing.assert_array_equal(mask, expected)
