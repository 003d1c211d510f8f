from __future__ import annotations

import gc
import logging
import warnings
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
    with pytest.raises(RFMatIDFormatError, match="non-numeric value 'abc'") as info:
        read_s1p(bad)
    assert (info.value.path, info.value.line, info.value.field) == (str(bad), 2, "real")
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


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ("4e9 0.1 0.2\n5e9 0.1 0.3\n5e9 0.2 0.3\n", 5, "strictly increasing"),  # duplicate
        ("4e9 0.1 0.2\n6e9 0.1 0.3\n5e9 0.2 0.3\n", 5, "strictly increasing"),  # backwards
    ],
)
def test_non_increasing_frequencies_are_rejected(
    tmp_path: Path, body: str, line: int, message: str
) -> None:
    path = tmp_path / "x.s1p"
    path.write_text("! measured\n# Hz S RI R 50\n" + body)
    with pytest.raises(RFMatIDFormatError, match=message) as info:
        read_s1p(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), line, "frequency")


def test_non_50_ohm_reference_is_renormalised_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gamma_75 = np.array([0.1 + 0.2j, -0.3 + 0.05j, 0.6 - 0.1j])
    path = tmp_path / "z75.s1p"
    rows = [
        f"{float(f)!r} {float(g.real)!r} {float(g.imag)!r}"
        for f, g in zip(FREQ[:3], gamma_75, strict=True)
    ]
    path.write_text("# Hz S RI R 75\n" + "\n".join(rows) + "\n")
    with caplog.at_level(logging.WARNING, logger="rf_matid"):
        freq, values = read_s1p(path)
    impedance = 75 * (1 + gamma_75) / (1 - gamma_75)  # the load the file describes
    np.testing.assert_allclose(values, (impedance - 50) / (impedance + 50), atol=1e-7)
    np.testing.assert_array_equal(freq, FREQ[:3])
    assert str(path) in caplog.text and "75" in caplog.text and "renormalising" in caplog.text


def test_empty_file_is_named_and_leaks_no_handle(tmp_path: Path) -> None:
    path = tmp_path / "empty.s1p"
    path.write_text("")
    comments_only = tmp_path / "comments.s1p"
    comments_only.write_text("! nothing here\n# Hz S RI R 50\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for target in (path, comments_only):
            with pytest.raises(RFMatIDFormatError, match="no data lines") as info:
                read_s1p(target)
            assert info.value.path == str(target)
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_two_port_data_in_an_s1p_file(tmp_path: Path) -> None:
    path = tmp_path / "two.s1p"
    path.write_text("# Hz S RI R 50\n4e9 0.1 0.2 0 0 0 0 0.1 0.1\n5e9 0.1 0.3 0 0 0 0 0.1 0.1\n")
    with pytest.raises(RFMatIDFormatError, match=r"got 9 \(a 2-port file\?\)") as info:
        read_s1p(path)
    assert (info.value.path, info.value.line) == (str(path), 2)


def test_missing_option_line_with_hz_values_is_implausible(tmp_path: Path) -> None:
    path = tmp_path / "noopt.s1p"
    path.write_text("! exported without options\n4e9 0.1 0.2\n5e9 0.1 0.3\n")
    with pytest.raises(RFMatIDFormatError, match="no option line") as info:
        read_s1p(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 2, "frequency")
    assert "4e+18" in str(info.value)
    ghz = tmp_path / "ghz.s1p"
    ghz.write_text("4.0 0.5 90\n5.0 1.0 180\n")  # no option line: GHz, MA by the standard
    freq, values = read_s1p(ghz)
    np.testing.assert_allclose(freq, [4e9, 5e9])
    np.testing.assert_allclose(values, [0.5j, -1.0], atol=1e-6)


def test_non_finite_value_is_located(tmp_path: Path) -> None:
    path = tmp_path / "nan.s1p"
    path.write_text("# GHz S MA R 50\n4.0 0.5 90\n5.0 nan 180\n")
    with pytest.raises(RFMatIDFormatError, match="non-finite") as info:
        read_s1p(path)
    assert (info.value.line, info.value.field) == (3, "magnitude")
