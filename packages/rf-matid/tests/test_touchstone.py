from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import skrf

from rf_matid.io import RFMatIDFormatError, read_frequency_csv, write_frequency_csv
from rf_matid.touchstone import read_s1p, write_s1p

FREQ = np.linspace(4e9, 43.5e9, 2048)


def s11(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=2048) + 1j * rng.normal(size=2048)).astype(np.complex64) * 0.5


def test_round_trip_is_exact_and_suffix_added(tmp_path: Path) -> None:
    values = s11()
    written = write_s1p(tmp_path / "sample", FREQ, values)
    assert written == tmp_path / "sample.s1p" and written.is_file()
    freq, loaded = read_s1p(written)
    np.testing.assert_array_equal(freq, FREQ)
    np.testing.assert_array_equal(loaded, values)
    assert loaded.dtype == np.complex64


def test_csv_to_s1p_to_csv_is_lossless(tmp_path: Path) -> None:
    write_frequency_csv(tmp_path / "a.csv", FREQ, s11(1))
    freq, values = read_frequency_csv(tmp_path / "a.csv")
    freq2, values2 = read_s1p(write_s1p(tmp_path / "a.s1p", freq, values))
    write_frequency_csv(tmp_path / "b.csv", freq2, values2)
    assert (tmp_path / "a.csv").read_text() == (tmp_path / "b.csv").read_text()


def test_file_is_standard_touchstone_readable_by_skrf(tmp_path: Path) -> None:
    path = write_s1p(tmp_path / "x.s1p", FREQ, s11(2))
    assert path.read_text().splitlines()[0].split()[:4] == ["#", "Hz", "S", "RI"]
    network = skrf.Network(str(path))
    assert network.nports == 1 and network.frequency.npoints == 2048
    np.testing.assert_allclose(network.z0[:, 0], 50.0)


def test_reads_other_units_and_formats(tmp_path: Path) -> None:
    path = tmp_path / "ma.s1p"
    path.write_text("# GHz S MA R 50\n4.0 0.5 90\n5.0 1.0 180\n")
    freq, values = read_s1p(path)
    np.testing.assert_allclose(freq, [4e9, 5e9])
    np.testing.assert_allclose(values, [0.5j, -1.0], atol=1e-6)


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(RFMatIDFormatError, match="does not exist"):
        read_s1p(tmp_path / "missing.s1p")
    bad = tmp_path / "bad.s1p"
    bad.write_text("# Hz S RI R 50\n4e9 abc 0.1\n")
    with pytest.raises(RFMatIDFormatError, match="cannot parse") as info:
        read_s1p(bad)
    assert info.value.path == str(bad)
    two_port = tmp_path / "two.s2p"
    skrf.Network(
        frequency=skrf.Frequency.from_f(FREQ[:3], unit="hz"), s=np.zeros((3, 2, 2)), z0=50
    ).write_touchstone(str(two_port.with_suffix("")))
    with pytest.raises(RFMatIDFormatError, match="one-port"):
        read_s1p(two_port)
    with pytest.raises(ValueError, match="equal length"):
        write_s1p(tmp_path / "y", FREQ, s11()[:-1])
    with pytest.raises(ValueError, match="increasing"):
        write_s1p(tmp_path / "y", FREQ[::-1], s11())
