from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rf_matid import loader
from rf_matid.io import (
    FREQ_DOMAIN_DIR,
    FREQ_HEADER,
    TIME_DOMAIN_DIR,
    TIME_HEADER,
    TIME_LENGTH,
    Position,
    RFMatIDFormatError,
    domain_root,
    frequency_csvs,
    load_dataset,
    parse_position_folder,
    position_folder_name,
    position_folders,
    read_frequency_csv,
    read_time_csv,
    scan_position_folders,
    write_frequency_csv,
    write_sample,
    write_time_csv,
)

FREQ = np.linspace(4e9, 43.5e9, 2048)
TIME = np.arange(10240) * 0.25
POSITIONS = [
    Position("brick01", 200, 0),
    Position("brick01", 1000, 5),
    Position("wood02", 450, 10),
]


def random_s11(rng: np.random.Generator) -> np.ndarray:
    return (rng.normal(size=2048) + 1j * rng.normal(size=2048)).astype(np.complex64)


def build_dataset(root: Path, samples: int = 2, with_time: bool = True, seed: int = 0) -> dict:
    """Write POSITIONS x samples; returns {relative freq path: (s11, amplitude)}."""
    rng = np.random.default_rng(seed)
    written = {}
    for position in POSITIONS:
        for index in range(samples):
            s11 = random_s11(rng)
            amplitude = rng.normal(size=10240).astype(np.float32) if with_time else None
            paths = write_sample(
                root, position, index, FREQ, s11, TIME if with_time else None, amplitude
            )
            written[paths[0].relative_to(root).as_posix()] = (s11, amplitude)
    return written


def rewrite_line(path: Path, line: int, text: str) -> None:
    lines = path.read_text().splitlines()
    lines[line - 1] = text
    path.write_text("\n".join(lines) + "\n")


def bump_mtime(path: Path) -> None:
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))


# ----------------------------------------------------------------------------- folder names


@given(
    class_name=st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,20}", fullmatch=True),
    distance=st.integers(0, 100_000),
    angle=st.integers(0, 360),
)
@settings(max_examples=50, deadline=None)
def test_folder_name_round_trip(class_name: str, distance: int, angle: int) -> None:
    name = position_folder_name(class_name, distance, angle)
    assert name.startswith("ms46131a-4To43.5GHz-2048-")
    assert parse_position_folder(name) == Position(class_name, distance, angle)
    assert parse_position_folder(Path("/some/root") / name) == Position(class_name, distance, angle)


def test_folder_name_matches_upstream_example() -> None:
    assert position_folder_name("brick01", 200, 0) == "ms46131a-4To43.5GHz-2048-brick01-200mm-0deg"


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("brick01", "prefix"),
        ("ms46131a-4To40GHz-2048-brick01-200mm-0deg", "prefix"),
        ("ms46131a-4To43.5GHz-2048-200mm-0deg", "folder name"),
        ("ms46131a-4To43.5GHz-2048-brick-01-200mm-0deg", "class_name"),
        ("ms46131a-4To43.5GHz-2048-brick01-200cm-0deg", "distance_mm"),
        ("ms46131a-4To43.5GHz-2048-brick01-200mm-0", "angle_deg"),
        ("ms46131a-4To43.5GHz-2048-brick01-200mm-5.5deg", "angle_deg"),
        ("ms46131a-4To43.5GHz-2048--200mm-0deg", "class_name"),
        ("ms46131a-4To43.5GHz-2048-brick01-200mm--5deg", "distance_mm"),
    ],
)
def test_malformed_folder_names(name: str, field: str) -> None:
    with pytest.raises(RFMatIDFormatError) as info:
        parse_position_folder(name)
    assert info.value.field == field
    assert name in str(info.value)


@pytest.mark.parametrize(
    ("class_name", "distance", "angle"),
    [("brick-01", 200, 0), ("", 200, 0), ("brick01", -1, 0), ("brick01", 200, 1.5)],
)
def test_folder_name_rejects_unparseable_values(class_name: str, distance, angle) -> None:
    with pytest.raises(ValueError):
        position_folder_name(class_name, distance, angle)


# ----------------------------------------------------------------------------- CSV round trips


def test_frequency_csv_round_trip_is_exact(tmp_path: Path) -> None:
    s11 = random_s11(np.random.default_rng(1))
    path = tmp_path / "a.csv"
    write_frequency_csv(path, FREQ, s11)
    assert path.read_text().splitlines()[0] == "freq_hz,real,imag"
    freq, loaded = read_frequency_csv(path)
    assert freq.dtype == np.float64 and loaded.dtype == np.complex64
    np.testing.assert_array_equal(freq, FREQ)
    np.testing.assert_array_equal(loaded, s11)


def test_time_csv_round_trip_is_exact(tmp_path: Path) -> None:
    amplitude = np.random.default_rng(2).normal(size=10240).astype(np.float32)
    path = tmp_path / "t.csv"
    write_time_csv(path, TIME, amplitude)
    time_ps, loaded = read_time_csv(path)
    assert loaded.dtype == np.float32 and time_ps.shape == (10240,)
    np.testing.assert_array_equal(time_ps, TIME)
    np.testing.assert_array_equal(loaded, amplitude)


def test_writers_reject_bad_arrays(tmp_path: Path) -> None:
    s11 = random_s11(np.random.default_rng(3))
    with pytest.raises(ValueError, match="s11 has 2047"):
        write_frequency_csv(tmp_path / "a.csv", FREQ, s11[:-1])
    s11[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        write_frequency_csv(tmp_path / "a.csv", FREQ, s11)
    with pytest.raises(ValueError, match="together"):
        write_sample(tmp_path, POSITIONS[0], 0, FREQ, random_s11(np.random.default_rng(0)), TIME)


@pytest.fixture
def freq_file(tmp_path: Path) -> Path:
    path = tmp_path / "f.csv"
    write_frequency_csv(path, FREQ, random_s11(np.random.default_rng(4)))
    return path


@pytest.mark.parametrize(
    ("line", "text", "expected_line", "field", "message"),
    [
        (11, "4.2e9,0.1,abc", 11, "imag", "non-numeric value 'abc'"),
        (7, "4.2e9,,0.3", 7, "real", "non-numeric"),
        (20, "4.2e9,nan,0.3", 20, "real", "non-finite"),
        (30, "4.2e9,0.3,inf", 30, "imag", "non-finite"),
        (5, "4.2e9,0.3", 5, None, "expected 3 comma-separated fields"),
        (9, "", 9, None, "blank line"),
        (1, "4e9,0.1,0.2", 1, None, "header"),
        (100, "1e9,0.1,0.2", 100, "freq_hz", "strictly increasing"),
    ],
)
def test_frequency_csv_errors_name_file_line_field(
    freq_file: Path, line: int, text: str, expected_line: int, field, message: str
) -> None:
    rewrite_line(freq_file, line, text)
    with pytest.raises(RFMatIDFormatError) as info:
        read_frequency_csv(freq_file)
    error = info.value
    assert error.path == str(freq_file)
    assert error.line == expected_line
    assert error.field == field
    assert message in str(error)
    assert str(freq_file) in str(error) and f"line {expected_line}" in str(error)


def test_wrong_row_counts(freq_file: Path) -> None:
    lines = freq_file.read_text().splitlines()
    freq_file.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(RFMatIDFormatError, match=r"expected 2048 data rows.*found 2047"):
        read_frequency_csv(freq_file)
    freq_file.write_text("\n".join([*lines, "5e10,0.1,0.1"]) + "\n")
    with pytest.raises(RFMatIDFormatError, match="found 2049") as info:
        read_frequency_csv(freq_file)
    assert info.value.line == 2050
    freq, _ = read_frequency_csv(freq_file, expected_rows=None)
    assert freq.shape == (2049,)


def test_empty_and_header_only_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(RFMatIDFormatError, match="empty"):
        read_frequency_csv(empty)
    header = tmp_path / "header.csv"
    header.write_text("freq_hz,real,imag\n")
    with pytest.raises(RFMatIDFormatError, match="no data rows") as info:
        read_frequency_csv(header)
    assert info.value.line == 2


def test_crlf_and_bom_are_accepted(tmp_path: Path, freq_file: Path) -> None:
    windows = tmp_path / "win.csv"
    windows.write_bytes(b"\xef\xbb\xbf" + freq_file.read_bytes().replace(b"\n", b"\r\n"))
    np.testing.assert_array_equal(read_frequency_csv(windows)[1], read_frequency_csv(freq_file)[1])


def test_time_csv_row_count_and_cells(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    write_time_csv(path, TIME[:100], np.ones(100))
    with pytest.raises(RFMatIDFormatError, match="expected 10240 data rows"):
        read_time_csv(path)
    write_time_csv(path, TIME, np.ones(10240))
    rewrite_line(path, 500, "124.75,x1")
    with pytest.raises(RFMatIDFormatError) as info:
        read_time_csv(path)
    assert (info.value.line, info.value.field) == (500, "amplitude")


# ----------------------------------------------------------------------------- load_dataset


def test_load_frequency_labels_order_and_values(tmp_path: Path) -> None:
    written = build_dataset(tmp_path, samples=2, with_time=False)
    data = load_dataset(tmp_path)
    assert len(data) == 6 and data.x.shape == (6, 2048) and data.x.dtype == np.complex64
    assert list(data.files) == sorted(written)
    np.testing.assert_array_equal(data.axis, FREQ)
    for row, rel in enumerate(data.files):
        np.testing.assert_array_equal(data.x[row], written[rel][0])
        position = parse_position_folder(Path(rel).parent.name)
        assert data.class_names[row] == position.class_name
        assert data.distance_mm[row] == position.distance_mm
        assert data.angle_deg[row] == position.angle_deg
    assert data.distance_mm.dtype == np.int32 and data.angle_deg.dtype == np.int32
    assert data.skipped == ()


def test_plain_upstream_root_loads(tmp_path: Path) -> None:
    build_dataset(tmp_path, samples=1, with_time=False)
    plain = load_dataset(tmp_path / FREQ_DOMAIN_DIR)
    combined = load_dataset(tmp_path)
    assert plain.files == tuple(rel.split("/", 1)[1] for rel in combined.files)
    np.testing.assert_array_equal(plain.x, combined.x)


def test_layout_helpers(tmp_path: Path) -> None:
    written = build_dataset(tmp_path, samples=2)
    assert domain_root(tmp_path) == tmp_path / FREQ_DOMAIN_DIR
    assert domain_root(tmp_path, "time") == tmp_path / TIME_DOMAIN_DIR
    assert domain_root(tmp_path / FREQ_DOMAIN_DIR) == tmp_path / FREQ_DOMAIN_DIR
    folders = position_folders(tmp_path)
    assert [position for _, position in folders] == sorted(
        POSITIONS, key=lambda p: position_folder_name(p.class_name, p.distance_mm, p.angle_deg)
    )
    files = frequency_csvs(folders[0][0])
    assert [f.relative_to(tmp_path).as_posix() for f in files] == sorted(written)[:2]
    (domain_root(tmp_path) / "not-a-position").mkdir()
    with pytest.raises(RFMatIDFormatError):
        position_folders(tmp_path)


def test_time_domain_decimation_and_zscore(tmp_path: Path) -> None:
    written = build_dataset(tmp_path, samples=1)
    freq_data = load_dataset(tmp_path, "frequency")
    data = load_dataset(tmp_path, "time")
    assert TIME_LENGTH == 3414
    assert data.x.shape == (3, TIME_LENGTH) and data.x.dtype == np.float32
    np.testing.assert_array_equal(data.axis, TIME[::3])
    assert data.class_names == freq_data.class_names
    for row, rel in enumerate(freq_data.files):
        kept = written[rel][1][::3].astype(np.float64)
        expected = (kept - kept.mean()) / kept.std(ddof=1)
        np.testing.assert_allclose(data.x[row], expected, rtol=1e-5, atol=1e-6)
        assert data.files[row] == rel.replace(FREQ_DOMAIN_DIR, TIME_DOMAIN_DIR, 1)


def test_missing_time_file_is_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    build_dataset(tmp_path, samples=2)
    missing = tmp_path / TIME_DOMAIN_DIR / position_folder_name("wood02", 450, 10) / "0001.csv"
    missing.unlink()
    with pytest.raises(RFMatIDFormatError, match="missing time-domain file") as info:
        load_dataset(tmp_path, "time")
    assert info.value.path == str(missing)
    with caplog.at_level(logging.WARNING, logger="rf_matid"):
        data = load_dataset(tmp_path, "time", skip_bad=True)
    assert len(data) == 5 and len(data.skipped) == 1
    assert "missing time-domain file" in caplog.text
    assert load_dataset(tmp_path, "frequency").x.shape[0] == 6


def test_orphan_time_file_is_an_error(tmp_path: Path) -> None:
    build_dataset(tmp_path, samples=1)
    orphan = tmp_path / TIME_DOMAIN_DIR / position_folder_name("brick01", 200, 0) / "0009.csv"
    write_time_csv(orphan, TIME, np.ones(10240) + np.arange(10240))
    with pytest.raises(RFMatIDFormatError, match="no frequency-domain twin"):
        load_dataset(tmp_path, "time")
    assert len(load_dataset(tmp_path, "time", skip_bad=True).skipped) == 1


def test_bad_file_raises_or_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    written = build_dataset(tmp_path, samples=2, with_time=False)
    bad_rel = sorted(written)[3]
    rewrite_line(tmp_path / bad_rel, 42, "4.8e9,oops,0")
    with pytest.raises(RFMatIDFormatError) as info:
        load_dataset(tmp_path)
    assert info.value.path == str(tmp_path / bad_rel) and info.value.line == 42
    assert _entries(tmp_path) == []  # temporary parse target removed
    with caplog.at_level(logging.WARNING, logger="rf_matid"):
        data = load_dataset(tmp_path, skip_bad=True)
    assert len(data) == 5 and [rel for rel, _ in data.skipped] == [bad_rel]
    assert bad_rel not in data.files and "line 42" in data.skipped[0][1]
    assert bad_rel in caplog.text
    assert isinstance(data.x, np.memmap) and data.x.shape == (5, 2048)
    assert not [p for p in _entries(tmp_path) if p.name.endswith(".tmp")]
    np.testing.assert_array_equal(load_dataset(tmp_path, skip_bad=True).x, data.x)
    # a cache entry that recorded skips must not hide the error from a strict load
    with pytest.raises(RFMatIDFormatError):
        load_dataset(tmp_path)


def test_malformed_folder_raises_or_skips_every_file(tmp_path: Path) -> None:
    build_dataset(tmp_path, samples=1, with_time=False)
    bad = tmp_path / FREQ_DOMAIN_DIR / "ms46131a-4To43.5GHz-2048-brick01-200mm-zdeg"
    for index in range(3):
        write_frequency_csv(bad / f"{index}.csv", FREQ, random_s11(np.random.default_rng(index)))
    with pytest.raises(RFMatIDFormatError) as info:
        load_dataset(tmp_path)
    assert info.value.field == "angle_deg" and bad.name in str(info.value)
    data = load_dataset(tmp_path, skip_bad=True)
    assert len(data) == 3 and len(data.skipped) == 3
    assert all(rel.startswith(f"{FREQ_DOMAIN_DIR}/{bad.name}/") for rel, _ in data.skipped)


def test_axis_mismatch_names_file_and_line(tmp_path: Path) -> None:
    written = build_dataset(tmp_path, samples=1, with_time=False)
    last = sorted(written)[-1]
    shifted = FREQ.copy()
    shifted[10:] += 1e6
    write_frequency_csv(tmp_path / last, shifted, written[last][0])
    with pytest.raises(RFMatIDFormatError, match="differs") as info:
        load_dataset(tmp_path)
    assert info.value.path == str(tmp_path / last)
    assert (info.value.line, info.value.field) == (12, "freq_hz")


def test_empty_roots(tmp_path: Path) -> None:
    with pytest.raises(RFMatIDFormatError, match="no samples"):
        load_dataset(tmp_path)
    (tmp_path / position_folder_name("brick01", 200, 0)).mkdir()
    with pytest.raises(RFMatIDFormatError, match="no samples"):
        load_dataset(tmp_path)
    with pytest.raises(RFMatIDFormatError, match="not a directory"):
        load_dataset(tmp_path / "nope")
    with pytest.raises(ValueError, match="domain"):
        load_dataset(tmp_path, "wavelet")  # type: ignore[arg-type]


def test_csv_outside_position_folder(tmp_path: Path) -> None:
    build_dataset(tmp_path, samples=1, with_time=False)
    stray = tmp_path / FREQ_DOMAIN_DIR / "stray.csv"
    write_frequency_csv(stray, FREQ, random_s11(np.random.default_rng(0)))
    with pytest.raises(RFMatIDFormatError, match="outside a position folder"):
        load_dataset(tmp_path)
    assert len(load_dataset(tmp_path, skip_bad=True).skipped) == 1


# ----------------------------------------------------------------------------- cache


def _entries(root: Path, domain: str = "frequency") -> list[Path]:
    """The files of ``root``'s cache entries (and their temporaries) in the default cache."""
    from rf_matid.cache import CacheEntry, default_cache_dir

    return sorted(default_cache_dir().glob(f"{CacheEntry.prefix_for(root, domain)}-*"))


def test_default_cache_is_the_workspace_cache_not_the_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rf-matid cached into ``<root>/.rfmatid_cache`` (inside the user's data) while every other
    package uses ``iclr26_common.cachedir.cache_root()``: one policy now."""
    monkeypatch.setenv("ICLR26_CACHE", str(tmp_path / "cache-root"))
    root = tmp_path / "data"
    build_dataset(root, samples=1, with_time=False)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    data = load_dataset(root)
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before  # data untouched
    entries = sorted((tmp_path / "cache-root" / "rf-matid").iterdir())
    assert [p.name.split(".", 1)[1] for p in entries] == ["axis.npy", "meta.json", "x.npy"]
    assert isinstance(data.x, np.memmap) and Path(data.x.filename) in entries


def test_cache_hit_is_memmap_and_skips_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_dataset(tmp_path, samples=1)
    first = load_dataset(tmp_path)
    assert isinstance(first.x, np.memmap)
    entries = _entries(tmp_path)
    assert [p.name.endswith(".x.npy") for p in entries].count(True) == 1
    assert not [p for p in entries if p.name.endswith(".tmp")]

    def fail(*args, **kwargs):
        raise AssertionError("cache hit must not parse CSVs")

    monkeypatch.setattr(loader, "read_csvs", fail)
    second = load_dataset(tmp_path)
    assert isinstance(second.x, np.memmap) and not second.x.flags.writeable
    np.testing.assert_array_equal(second.x, first.x)
    assert second.files == first.files and second.class_names == first.class_names
    np.testing.assert_array_equal(second.distance_mm, first.distance_mm)


def test_cache_invalidated_on_change_add_and_remove(tmp_path: Path) -> None:
    written = build_dataset(tmp_path, samples=1, with_time=False)
    load_dataset(tmp_path)
    target = sorted(written)[0]
    new_s11 = random_s11(np.random.default_rng(99))
    write_frequency_csv(tmp_path / target, FREQ, new_s11)
    # The key holds size and timestamps, not contents: move mtime on, in case this rewrite fell
    # within the file system's timestamp tick of the original write.
    bump_mtime(tmp_path / target)
    data = load_dataset(tmp_path)
    np.testing.assert_array_equal(data.x[0], new_s11)
    assert len(_entries(tmp_path)) == 3  # stale entry removed

    write_sample(tmp_path, Position("glass01", 300, 3), 0, FREQ, new_s11)
    assert "glass01" in load_dataset(tmp_path).class_names
    (tmp_path / target).unlink()
    assert target not in load_dataset(tmp_path).files


def test_custom_and_unwritable_cache_dir(tmp_path: Path) -> None:
    root = tmp_path / "data"
    build_dataset(root, samples=1, with_time=False)
    cache = tmp_path / "elsewhere"
    data = load_dataset(root, cache_dir=cache)
    assert isinstance(data.x, np.memmap) and any(cache.iterdir())
    assert _entries(root) == []  # nothing in the default cache either
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    fallback = load_dataset(root, cache_dir=blocker / "cache")
    assert not isinstance(fallback.x, np.memmap)
    np.testing.assert_array_equal(fallback.x, data.x)
    uncached = load_dataset(root, cache_dir=tmp_path / "never", use_cache=False)
    assert not (tmp_path / "never").exists()
    np.testing.assert_array_equal(uncached.x, data.x)


def test_shared_cache_dir_keeps_one_entry_per_root(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    build_dataset(tmp_path / "a", samples=1, with_time=False, seed=1)
    build_dataset(tmp_path / "b", samples=1, with_time=False, seed=2)
    first_a = load_dataset(tmp_path / "a", cache_dir=cache)
    load_dataset(tmp_path / "b", cache_dir=cache)
    assert len(list(cache.glob("*.x.npy"))) == 2
    again_a = load_dataset(tmp_path / "a", cache_dir=cache)
    np.testing.assert_array_equal(again_a.x, first_a.x)
    assert len(list(cache.glob("*.x.npy"))) == 2


def test_cache_detects_same_size_rewrite_with_restored_mtime(tmp_path: Path) -> None:
    """The key has ctime_ns too: a same-size edit whose mtime was put back is still seen."""
    written = build_dataset(tmp_path, samples=1, with_time=False)
    target = tmp_path / sorted(written)[0]
    before = target.stat()
    load_dataset(tmp_path)
    lines = target.read_text().splitlines()
    freq_text, real_text, imag_text = lines[1].split(",")
    first = next(i for i, char in enumerate(real_text) if char in "123456789")
    digit = "5" if real_text[first] != "5" else "6"
    new_real = real_text[:first] + digit + real_text[first + 1 :]  # same length, other value
    lines[1] = ",".join([freq_text, new_real, imag_text])
    time.sleep(0.05)  # let the status-change time land on a later file-system tick
    target.write_text("\n".join(lines) + "\n")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns
    data = load_dataset(tmp_path)
    assert data.x[0, 0].real == np.float32(float(new_real)) != np.float32(float(real_text))
    np.testing.assert_array_equal(data.x[0, 1:], written[sorted(written)[0]][0][1:])


def test_cache_hit_reports_recorded_skips(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    written = build_dataset(tmp_path, samples=1, with_time=False)
    bad_rel = sorted(written)[1]
    rewrite_line(tmp_path / bad_rel, 3, "4.1e9,x,0")
    load_dataset(tmp_path, skip_bad=True)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rf_matid"):
        again = load_dataset(tmp_path, skip_bad=True)
    assert isinstance(again.x, np.memmap)  # a cache hit
    assert [rel for rel, _ in again.skipped] == [bad_rel]
    assert bad_rel in caplog.text and "line 3" in caplog.text


# ----------------------------------------------------------------------------- folder prefix


def test_class_name_with_dash_is_rejected_not_relabelled(tmp_path: Path) -> None:
    build_dataset(tmp_path, samples=1, with_time=False)
    bad = tmp_path / FREQ_DOMAIN_DIR / "ms46131a-4To43.5GHz-2048-brick-01-200mm-0deg"
    write_frequency_csv(bad / "0000.csv", FREQ, random_s11(np.random.default_rng(5)))
    with pytest.raises(RFMatIDFormatError) as info:
        position_folders(tmp_path)
    assert info.value.field == "class_name" and info.value.path == str(bad)
    assert "'brick-01'" in str(info.value)
    with pytest.raises(RFMatIDFormatError, match="contains '-'"):
        load_dataset(tmp_path)
    data = load_dataset(tmp_path, skip_bad=True)
    assert "01" not in data.class_names and len(set(data.class_names)) == 2
    assert [rel for rel, _ in data.skipped] == [f"{FREQ_DOMAIN_DIR}/{bad.name}/0000.csv"]


def test_wrong_instrument_prefix_is_rejected(tmp_path: Path) -> None:
    build_dataset(tmp_path, samples=1, with_time=False)
    bad = tmp_path / FREQ_DOMAIN_DIR / "ms46131a-4To40GHz-1024-brick01-200mm-0deg"
    write_frequency_csv(bad / "0000.csv", FREQ, random_s11(np.random.default_rng(5)))
    with pytest.raises(RFMatIDFormatError, match="instrument prefix") as info:
        load_dataset(tmp_path)
    assert info.value.field == "prefix" and bad.name in str(info.value)


def test_position_folders_skip_bad_logs_and_returns_the_skips(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    build_dataset(tmp_path, samples=1, with_time=False)
    bad = tmp_path / FREQ_DOMAIN_DIR / "ms46131a-4To43.5GHz-2048-brick01-200mm-zdeg"
    bad.mkdir()
    with caplog.at_level(logging.WARNING, logger="rf_matid"):
        folders, skipped = scan_position_folders(tmp_path, skip_bad=True)
    assert [position for _, position in folders] == sorted(
        POSITIONS, key=lambda p: position_folder_name(p.class_name, p.distance_mm, p.angle_deg)
    )
    assert len(skipped) == 1 and skipped[0][0] == str(bad) and "angle_deg" in skipped[0][1]
    assert bad.name in caplog.text
    assert len(position_folders(tmp_path, skip_bad=True)) == len(POSITIONS)


# ----------------------------------------------------------------------------- headers and units


def write_table(path: Path, header: str, columns: list[np.ndarray]) -> None:
    rows = [",".join(repr(float(v)) for v in row) for row in zip(*columns, strict=True)]
    path.write_text("\n".join([header, *rows]) + "\n")


@pytest.mark.parametrize(
    "header",
    ["freq_hz,imag,real", "imag,real,freq_hz", "Frequency (Hz), Re(S11), Im(S11)", "freq,re,im"],
)
def test_frequency_columns_are_placed_by_header_name(tmp_path: Path, header: str) -> None:
    s11 = random_s11(np.random.default_rng(6))
    by_name = {"freq": FREQ, "real": s11.real, "imag": s11.imag}
    names = [n.strip().lower() for n in header.split(",")]
    order = [
        "freq" if n.startswith("freq") else ("imag" if n.startswith("im") else "real")
        for n in names
    ]
    path = tmp_path / "f.csv"
    write_table(path, header, [by_name[key] for key in order])
    freq, loaded = read_frequency_csv(path)
    np.testing.assert_array_equal(freq, FREQ)
    np.testing.assert_array_equal(loaded, s11)  # imag,real swapped would fail here


def test_time_columns_are_placed_by_header_name(tmp_path: Path) -> None:
    amplitude = np.random.default_rng(7).normal(size=10240).astype(np.float32)
    path = tmp_path / "t.csv"
    write_table(path, "amplitude,time_ps", [amplitude, TIME])
    time_ps, loaded = read_time_csv(path)
    np.testing.assert_array_equal(time_ps, TIME)
    np.testing.assert_array_equal(loaded, amplitude)


@pytest.mark.parametrize(
    ("reader", "header", "field", "message"),
    [
        ("frequency", "freq_hz,real,phase", "phase", "unknown column name"),
        ("frequency", "freq_hz,real,real", "real", "repeats"),
        ("frequency", "freq_khz,real,imag", "freq_khz", "unknown column name"),
        ("frequency", "freq_hz,real,imag,mag", None, "has 4 fields"),
        ("time", "time_ns,amplitude", "time_ns", "unknown column name"),
        ("time", "time_ps,amplitude,extra", None, "has 3 fields"),
    ],
)
def test_unknown_headers_name_file_line_and_field(
    tmp_path: Path, reader: str, header: str, field, message: str
) -> None:
    path = tmp_path / "x.csv"
    body = FREQ_HEADER if reader == "frequency" else TIME_HEADER
    if reader == "frequency":
        write_frequency_csv(path, FREQ, random_s11(np.random.default_rng(8)))
    else:
        write_time_csv(path, TIME, np.ones(10240))
    assert path.read_text().splitlines()[0] == body  # the exact upstream headers are written
    rewrite_line(path, 1, header)
    read = read_frequency_csv if reader == "frequency" else read_time_csv
    with pytest.raises(RFMatIDFormatError, match=message) as info:
        read(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 1, field)


@pytest.mark.parametrize(
    ("header", "scale", "line", "message"),
    [
        ("freq_hz,real,imag", 1e9, 2, "outside the plausible range"),  # 4e18: no unit fits
        ("freq_ghz,real,imag", 1e9, 2, "outside the plausible range"),  # 4e18 "GHz"
        ("freq_hz,real,imag", 1e-3, 2, "outside the plausible range"),  # kHz-like: no unit fits
    ],
)
def test_implausible_frequencies_are_rejected(
    tmp_path: Path, header: str, scale: float, line: int, message: str
) -> None:
    path = tmp_path / "f.csv"
    s11 = random_s11(np.random.default_rng(10))
    write_table(path, header, [FREQ * scale, s11.real, s11.imag])
    with pytest.raises(RFMatIDFormatError, match=message) as info:
        read_frequency_csv(path)
    assert info.value.line == line and info.value.field == header.split(",")[0]


def test_one_implausible_row_is_located(tmp_path: Path, freq_file: Path) -> None:
    lines = freq_file.read_text().splitlines()
    lines[-1] = "2e11," + lines[-1].split(",", 1)[1]  # 200 GHz: increasing, but out of band
    freq_file.write_text("\n".join(lines) + "\n")
    with pytest.raises(RFMatIDFormatError, match="plausible") as info:
        read_frequency_csv(freq_file)
    assert (info.value.line, info.value.field) == (2049, "freq_hz")


def test_stray_csv_in_the_time_tree_is_reported(tmp_path: Path) -> None:
    build_dataset(tmp_path, samples=1)
    stray = tmp_path / TIME_DOMAIN_DIR / "stray.csv"
    write_time_csv(stray, TIME, np.arange(10240.0))
    with pytest.raises(RFMatIDFormatError, match="outside a position folder"):
        load_dataset(tmp_path, "time")
    data = load_dataset(tmp_path, "time", skip_bad=True)
    assert [rel for rel, _ in data.skipped] == [f"{TIME_DOMAIN_DIR}/stray.csv"]
