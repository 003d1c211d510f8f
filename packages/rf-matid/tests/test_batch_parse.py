"""The first read parses many CSVs in one pyarrow call (``csvio.read_csvs``): the same values
and the same errors as one file at a time, whatever else is in the batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rf_matid import csvfast, csvio
from rf_matid.constants import TIME_POINTS
from rf_matid.io import (
    UPSTREAM_FREQ_HEADER,
    RFMatIDFormatError,
    read_frequency_csv,
    read_time_csv,
    write_frequency_csv,
    write_time_csv,
)

FREQ = np.linspace(4e9, 43.5e9, 2048)


@pytest.fixture(autouse=True)
def fresh_notices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(csvio, "_UNIT_NOTICES", set())


def _s11(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=2048) + 1j * rng.normal(size=2048)).astype(np.complex64)


def _good(path: Path, seed: int, header: str = UPSTREAM_FREQ_HEADER) -> Path:
    write_frequency_csv(path, FREQ, _s11(seed), header)
    return path


def _edit(path: Path, seed: int, edit) -> Path:
    _good(path, seed)
    path.write_bytes(edit(path.read_bytes()))
    return path


def _one_at_a_time(paths, reader):
    out = []
    for path in paths:
        try:
            out.append(reader(path))
        except RFMatIDFormatError as error:
            out.append(error)
    return out


def _assert_same(batched, single) -> None:
    assert len(batched) == len(single)
    for got, want in zip(batched, single, strict=True):
        if isinstance(want, RFMatIDFormatError):
            assert isinstance(got, RFMatIDFormatError) and str(got) == str(want)
        else:
            assert not isinstance(got, RFMatIDFormatError), got
            for a, b in zip(got, want, strict=True):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)


def test_a_clean_batch_is_parsed_in_one_call_with_the_single_file_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [_good(tmp_path / f"{i}.csv", i) for i in range(5)]
    # one file with its columns in another order and CRLF line ends, still clean
    reordered = tmp_path / "r.csv"
    freq_hz, s11 = read_frequency_csv(paths[0])
    pairs = zip(freq_hz.tolist(), s11.astype(complex).tolist(), strict=True)
    rows = [f"{z.imag!r},{f!r},{z.real!r}" for f, z in pairs]
    reordered.write_bytes(("\r\n".join(["imag,freq_hz,real", *rows]) + "\r\n").encode())
    paths.append(reordered)
    single = _one_at_a_time(paths, read_frequency_csv)
    calls: list[int] = []
    arrow_rows = csvfast._arrow_rows

    def counting(data, n_columns, skip_rows):
        calls.append(len(data))
        return arrow_rows(data, n_columns, skip_rows)

    monkeypatch.setattr(csvfast, "_arrow_rows", counting)
    batched = csvio.read_csvs(paths, "frequency")
    assert len(calls) == 1  # one pyarrow call for six files
    _assert_same(batched, single)
    np.testing.assert_array_equal(batched[-1][1], batched[0][1])


BAD_EDITS = {
    "text in a row": lambda raw: raw.replace(b"\n", b"\nabc,1,2\n", 2),
    "short row": lambda raw: raw[: raw.rindex(b",")] + b"\n",
    "no final newline": lambda raw: raw.rstrip(b"\n"),
    "one row too many": lambda raw: raw + b"43600000000.0,1,2\n",
    "lone CR line end": lambda raw: raw.replace(b"\n", b"\r", 3),
    "blank line inside": lambda raw: raw.replace(b"\n", b"\n\n", 2),
    "header only": lambda raw: raw[: raw.index(b"\n") + 1],
    "non-finite value": lambda raw: raw.replace(b"\n", b"\n4.0e9,nan,1\n", 1),
    "not increasing": lambda raw: raw.replace(b"\n", b"\n3.9e9,1,1\n", 2),
    "no header": lambda raw: raw[raw.index(b"\n") + 1 :],
    "header line ends CR CR LF": lambda raw: raw.replace(b"\n", b"\r\r\n", 1),
    "lone CR inside the header line": lambda raw: raw.replace(b",real", b"\r,real", 1),
    "BOM at the start of line 2": lambda raw: raw.replace(b"\n", b"\n\xef\xbb\xbf", 1),
    "trailing blank lines": lambda raw: raw + b"\n\n",
    "value overflows float32": lambda raw: raw.replace(b"\n", b"\n4.0e9,1e39,1\n", 1),
    "no newline at all (CR only)": lambda raw: raw.replace(b"\n", b"\r"),
}


@pytest.mark.parametrize("position", [0, 1, 3])
@pytest.mark.parametrize("bad", sorted(BAD_EDITS))
def test_a_bad_file_gets_its_single_file_result_and_spoils_no_other(
    tmp_path: Path, bad: str, position: int
) -> None:
    """Wherever the odd file sits in the batch (first, inside, last), every file gets what a
    one-file read gives it."""
    paths = [_good(tmp_path / f"{i}.csv", i) for i in range(3)]
    paths.insert(position, _edit(tmp_path / "bad.csv", 9, BAD_EDITS[bad]))
    paths.append(tmp_path / "missing.csv")
    single = _one_at_a_time(paths, read_frequency_csv)
    assert isinstance(single[-1], RFMatIDFormatError)
    _assert_same(csvio.read_csvs(paths, "frequency"), single)
    others = [r for i, r in enumerate(single[:-1]) if i != position]
    assert not any(isinstance(r, RFMatIDFormatError) for r in others)
    if isinstance(single[position], RFMatIDFormatError):
        assert "\n" not in str(single[position]) and len(str(single[position])) < 400


@pytest.mark.parametrize(
    "edit",
    [
        lambda raw: raw.rstrip(b"\n"),  # no final newline: still joins the batch
        lambda raw: raw + b"\n\n",  # trailing blank lines: read alone, the others stay joined
    ],
)
def test_common_file_endings_keep_the_batch_joined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit
) -> None:
    paths = [_good(tmp_path / f"{i}.csv", i) for i in range(4)]
    paths.append(_edit(tmp_path / "odd.csv", 9, edit))
    single = _one_at_a_time(paths, read_frequency_csv)
    calls: list[int] = []
    arrow_rows = csvfast._arrow_rows

    def counting(data, n_columns, skip_rows):
        calls.append(len(data))
        return arrow_rows(data, n_columns, skip_rows)

    monkeypatch.setattr(csvfast, "_arrow_rows", counting)
    _assert_same(csvio.read_csvs(paths, "frequency"), single)
    assert len(calls) <= 2  # one joined call (+ one for a file read alone)


def test_rows_are_never_shifted_between_files(tmp_path: Path) -> None:
    """A file one row short next to a file one row long: the total matches, but each file is
    split at its own newlines, so both are refused (not silently re-cut)."""
    short = _edit(tmp_path / "a.csv", 1, lambda raw: raw[: raw.rindex(b"\n", 0, -1) + 1])
    long = _edit(tmp_path / "b.csv", 2, lambda raw: raw + b"43600000000.0,1,2\n")
    results = csvio.read_csvs([short, long], "frequency")
    assert [str(r) for r in results] == [
        str(e) for e in _one_at_a_time([short, long], read_frequency_csv)
    ]
    assert all(isinstance(r, RFMatIDFormatError) for r in results)
    assert "found 2047" in str(results[0]) and "found 2049" in str(results[1])


def test_time_files_batch_the_same_way(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    time_ps = np.arange(TIME_POINTS) * 0.5
    paths = []
    for i in range(3):
        path = tmp_path / f"t{i}.csv"
        write_time_csv(path, time_ps, rng.normal(size=TIME_POINTS))
        paths.append(path)
    paths.append(_edit(tmp_path / "bad.csv", 0, lambda raw: raw))  # a frequency file
    _assert_same(csvio.read_csvs(paths, "time"), _one_at_a_time(paths, read_time_csv))


def test_a_remembered_header_answers_only_for_the_same_header(tmp_path: Path) -> None:
    good = _good(tmp_path / "good.csv", 0, "freq_hz,real,imag")
    read_frequency_csv(good)  # remembered
    swapped = _edit(
        tmp_path / "swapped.csv", 0, lambda raw: raw.replace(b"real,imag", b"imag,real", 1)
    )
    s11 = read_frequency_csv(good)[1]
    np.testing.assert_array_equal(read_frequency_csv(swapped)[1], 1j * np.conj(s11))
    repeated = _edit(
        tmp_path / "rep.csv", 0, lambda raw: raw.replace(b"real,imag", b"real,real", 1)
    )
    with pytest.raises(RFMatIDFormatError, match="repeats"):
        read_frequency_csv(repeated)
    with pytest.raises(RFMatIDFormatError, match="repeats"):  # errors are never remembered
        read_frequency_csv(repeated)
