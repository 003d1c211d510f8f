"""The released RF-MatID files: header ``freq.GHZ,real,imag`` over Hz values, upstream's
``RFMatID_Dataset/{frequency_domain,time_domain}`` layout, and one rule for hyphenated class
folders in every command (issue 22)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr26_common.testing import assert_one_line_error
from rf_matid import csvfast, csvio
from rf_matid.cli import main, run_lightning_cli
from rf_matid.io import (
    FREQ_DOMAIN_DIR,
    TIME_DOMAIN_DIR,
    UPSTREAM_DATASET_DIR,
    UPSTREAM_FREQ_HEADER,
    Position,
    RFMatIDFormatError,
    domain_root,
    load_dataset,
    read_frequency_csv,
    write_frequency_csv,
    write_sample,
)

FREQ = np.linspace(4e9, 43.5e9, 2048)
UPSTREAM_DIR = "ms46131a-4To43.5GHz-2048-brick01-200mm-0deg"
CLASSES = ["brick01", "glass02", "wood03"]


@pytest.fixture(autouse=True)
def fresh_notices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with no unit notice given yet in this process."""
    monkeypatch.setattr(csvio, "_UNIT_NOTICES", set())


def s11_values(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=2048) + 1j * rng.normal(size=2048)).astype(np.complex64)


def write_rows(path: Path, header: str, freq: np.ndarray, s11: np.ndarray, fmt: str) -> Path:
    """``header`` then rows ``fmt % (freq, real, imag)``."""
    rows = [fmt % (f, z.real, z.imag) for f, z in zip(freq.tolist(), s11.tolist(), strict=True)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


@pytest.mark.parametrize(
    "fmt",
    [
        "%r,%r,%r",  # shortest round trip: 4000000000.0, 4019305813.3855886, ...
        "%.9E,%.9E,%.9E",  # VNA-style scientific: 4.000000000E+09
        "%.0f,%.6f,%.6f",  # integral Hz: 4000000000
    ],
)
def test_the_released_header_over_hz_values_loads(
    tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture
) -> None:
    """Before issue 22 the header's GHz was applied: 4e9 "GHz" = 4e18 Hz, rejected."""
    s11 = s11_values()
    path = write_rows(tmp_path / UPSTREAM_DIR / "0.csv", UPSTREAM_FREQ_HEADER, FREQ, s11, fmt)
    assert path.read_text().splitlines()[0] == "freq.GHZ,real,imag"
    freq, loaded = read_frequency_csv(path)
    np.testing.assert_allclose(freq, FREQ, rtol=1e-9)
    assert 4e9 <= freq[0] < freq[-1] <= 43.5e9
    np.testing.assert_allclose(loaded, s11, atol=1e-6)
    notice = capsys.readouterr().err
    assert str(path) in notice and "'freq.GHZ' says GHz" in notice and "as Hz" in notice


def test_the_unit_notice_is_visible_once_per_header(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A notice on stderr (it was an INFO log record without a handler: invisible)."""
    for index in range(3):
        write_frequency_csv(
            tmp_path / f"{index}.csv", FREQ, s11_values(index), UPSTREAM_FREQ_HEADER
        )
        read_frequency_csv(tmp_path / f"{index}.csv")
    err = capsys.readouterr().err
    assert err.count("rf-matid: notice:") == 1 and str(tmp_path / "0.csv") in err


@pytest.mark.parametrize(
    ("header", "scale", "notice"),
    [
        ("freq_hz,real,imag", 1e-9, "'freq_hz' says Hz, but its values are GHz"),
        ("freq_ghz,real,imag", 1e-9, None),  # header and values agree: GHz
        ("freq,real,imag", 1e-9, None),  # no unit in the header: GHz from the values
        ("Frequency (MHz),real,imag", 1e-6, None),
        ("freq_hz,real,imag", 1.0, None),
    ],
)
def test_the_unit_is_decided_from_the_values(
    tmp_path: Path, header: str, scale: float, notice: str | None, capsys: pytest.CaptureFixture
) -> None:
    s11 = s11_values(1)
    path = write_rows(tmp_path / "f.csv", header, FREQ * scale, s11, "%r,%r,%r")
    freq, loaded = read_frequency_csv(path)
    np.testing.assert_allclose(freq, FREQ, rtol=1e-12)
    np.testing.assert_array_equal(loaded, s11)
    err = capsys.readouterr().err
    if notice is None:
        assert err == ""
    else:
        assert notice in err


def test_a_single_stray_row_is_an_error_not_a_unit_change(tmp_path: Path) -> None:
    """The median decides the unit; one row outside the band is located, not rescaled."""
    freq = FREQ.copy()
    freq[0] = 4.0  # GHz-looking, but the other 2047 rows are Hz
    path = write_rows(tmp_path / "f.csv", UPSTREAM_FREQ_HEADER, freq, s11_values(), "%r,%r,%r")
    with pytest.raises(RFMatIDFormatError, match="look like GHz") as info:
        read_frequency_csv(path)
    assert (info.value.line, info.value.field) == (2, "freq.GHZ")


@pytest.fixture
def upstream_tree(tmp_path: Path) -> Path:
    """``RF-MatID/RFMatID_Dataset/{frequency_domain,time_domain}`` with the released header,
    written by our generator (3 classes x 2 distances x 2 angles x 2 repeats)."""
    from rf_matid.synth_dataset import generate_dataset

    top = tmp_path / "RF-MatID"
    generate_dataset(
        top / UPSTREAM_DATASET_DIR,
        classes=CLASSES,
        distances_mm=[200, 1100],
        angles_deg=[0, 5],
        samples_per_position=2,
        seed=3,
        write_time=True,
        freq_header=UPSTREAM_FREQ_HEADER,
    )
    return top


def test_the_upstream_root_layout_is_recognised(upstream_tree: Path) -> None:
    dataset = upstream_tree / UPSTREAM_DATASET_DIR
    assert sorted(p.name for p in dataset.iterdir()) == [FREQ_DOMAIN_DIR, TIME_DOMAIN_DIR]
    assert FREQ_DOMAIN_DIR == "frequency_domain"
    first = next((dataset / FREQ_DOMAIN_DIR).iterdir())
    assert next(first.iterdir()).read_text().startswith("freq.GHZ,real,imag\n4000000000.0,")
    expected_classes = sorted(c for c in CLASSES for _ in range(2 * 2 * 2))
    # the folder above RFMatID_Dataset, RFMatID_Dataset itself, and frequency_domain (upstream's
    # data_dir) all give the same samples
    for root in (upstream_tree, dataset, dataset / FREQ_DOMAIN_DIR):
        data = load_dataset(root, use_cache=False)
        assert sorted(data.class_names) == expected_classes
        np.testing.assert_array_equal(data.axis, FREQ)
    assert domain_root(upstream_tree, "time") == dataset / TIME_DOMAIN_DIR
    time = load_dataset(upstream_tree, "time", use_cache=False)
    assert len(time) == 24 and time.files[0].startswith(f"{UPSTREAM_DATASET_DIR}/time_domain/")
    freq = load_dataset(upstream_tree, use_cache=False)
    assert [f.replace("frequency_domain", "time_domain") for f in freq.files] == list(time.files)


def test_the_earlier_freq_domain_name_still_loads_but_not_next_to_the_new_one(
    tmp_path: Path,
) -> None:
    write_sample(tmp_path, Position("brick01", 200, 0), 0, FREQ, s11_values())
    (tmp_path / FREQ_DOMAIN_DIR).rename(tmp_path / "freq_domain")
    assert load_dataset(tmp_path, use_cache=False).class_names == ("brick01",)
    write_sample(tmp_path, Position("brick01", 200, 0), 1, FREQ, s11_values(1))
    with pytest.raises(RFMatIDFormatError, match="both frequency_domain/ and freq_domain/"):
        load_dataset(tmp_path, use_cache=False)


def test_fit_and_predict_files_read_the_released_format(
    upstream_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Before issue 22 `fit`, `predict` and `predict-files` all rejected these files."""
    root = tmp_path / "run"
    run_lightning_cli(
        [
            "fit",
            "--config",
            "tiny",
            f"--data.init_args.data_dir={upstream_tree}",
            "--trainer.max_epochs=1",
            "--trainer.enable_checkpointing=true",
            f"--trainer.default_root_dir={root}",
        ]
    )
    (checkpoint,) = root.glob("**/*.ckpt")
    out = tmp_path / "preds.csv"
    assert (
        main(["predict-files", "--ckpt", str(checkpoint), "--out", str(out), str(upstream_tree)])
        == 0
    )
    with out.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 24
    assert sorted({row["label"] for row in rows}) == CLASSES


def test_predict_files_rejects_a_hyphenated_class_folder(
    upstream_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Upstream would read `brick-01` as class `01`; `fit` rejects the folder, and
    `predict-files` used to drop its label silently (an unlabelled row)."""
    from rf_matid.predict import collect_inputs

    bad = tmp_path / "scans" / "ms46131a-4To43.5GHz-2048-brick-01-200mm-0deg"
    write_frequency_csv(bad / "0.csv", FREQ, s11_values(), UPSTREAM_FREQ_HEADER)
    with pytest.raises(RFMatIDFormatError, match="contains '-'") as info:
        collect_inputs([tmp_path / "scans"])
    assert info.value.path == str(bad) and info.value.field == "class_name"
    line = assert_one_line_error(
        main,
        [
            "predict-files",
            "--ckpt",
            str(tmp_path / "none.ckpt"),
            "--out",
            str(tmp_path / "p.csv"),
            str(bad / "0.csv"),
        ],
        capsys,
        prog="rf-matid: error: ",
    )
    assert bad.name in line and "contains '-'" in line
    # a file in an ordinary folder stays an unlabelled input
    plain = tmp_path / "other" / "scan.csv"
    write_frequency_csv(plain, FREQ, s11_values())
    assert collect_inputs([plain])[0].class_name is None


# ----------------------------------------------------------------------------- vectorised parse

_VALUE_FORMATS = ("%r", "%.9g", "%.6E", "%.3f", "%d")


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(
        st.tuples(st.floats(-1e6, 1e6, allow_nan=False), st.floats(-1e3, 1e3, allow_nan=False)),
        min_size=1,
        max_size=40,
    ),
    fmt=st.sampled_from(_VALUE_FORMATS),
    crlf=st.booleans(),
)
def test_the_vectorised_parse_equals_the_line_by_line_parse(
    values: list[tuple[float, float]], fmt: str, crlf: bool
) -> None:
    """pyarrow's reader (fast path) and numpy's loadtxt (fallback) give the same float64s."""
    rows = [
        ",".join(fmt % (int(v) if fmt == "%d" else v) for v in (4e9 + i * 1e6, *pair))
        for i, pair in enumerate(values)
    ]
    newline = "\r\n" if crlf else "\n"
    raw = (newline.join(["freq_hz,real,imag", *rows]) + newline).encode()
    fast = csvfast.fast_rows(raw, 3)
    assert fast is not None
    slow, order, _, _ = csvio._slow_rows(
        Path("x.csv"), raw, csvio._FREQ_COLUMNS, csvio._FREQ_HEADER_NAMES
    )
    assert order == [0, 1, 2]
    np.testing.assert_array_equal(fast, slow)


@pytest.mark.parametrize(
    "body",
    [
        "4e9,1,2\n4.1e9,,3\n",  # empty field
        "4e9,1,2\n\n4.1e9,2,3\n",  # blank line inside
        "4e9,1,2\n4.1e9,2\n",  # short row
        "4e9,1,2\n4.1e9,abc,3\n",  # text
        '4e9,1,2\n4.1e9,"2",3\n',  # quoted
        "4e9,1,2\n4.1e9,2,3\n\n\n",  # trailing blank lines (the slow path strips them)
    ],
)
def test_the_vectorised_parse_hands_anything_unclean_to_the_checked_path(body: str) -> None:
    assert csvfast.fast_rows(("freq_hz,real,imag\n" + body).encode(), 3) is None


def test_clean_files_take_the_vectorised_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The speed-up is real: a clean released-format file never reaches the line-by-line path;
    without pyarrow the same values come from numpy."""
    path = tmp_path / "f.csv"
    write_frequency_csv(path, FREQ, s11_values(), UPSTREAM_FREQ_HEADER)
    with_arrow = read_frequency_csv(path)

    def no_slow_path(*args, **kwargs):
        raise AssertionError("the clean file went through the line-by-line parser")

    monkeypatch.setattr(csvio, "_slow_rows", no_slow_path)
    np.testing.assert_array_equal(read_frequency_csv(path)[1], with_arrow[1])
    monkeypatch.undo()
    monkeypatch.setattr(csvio, "_UNIT_NOTICES", set())
    monkeypatch.setattr(csvfast, "_pyarrow_csv", lambda: None)
    without = read_frequency_csv(path)
    np.testing.assert_array_equal(without[0], with_arrow[0])
    np.testing.assert_array_equal(without[1], with_arrow[1])


def test_threaded_first_read_equals_the_sequential_one(upstream_tree: Path) -> None:
    """Parse threads change nothing: same rows, same order, same first error and skips."""
    one = load_dataset(upstream_tree, use_cache=False, threads=1)
    three = load_dataset(upstream_tree, use_cache=False, threads=3)
    assert one.files == three.files
    np.testing.assert_array_equal(np.asarray(one.x), np.asarray(three.x))
    files = sorted((upstream_tree / UPSTREAM_DATASET_DIR / FREQ_DOMAIN_DIR).glob("*/*.csv"))
    for bad in (files[3], files[9]):
        bad.write_text(bad.read_text().replace("\n4", "\nx4", 1))
    with pytest.raises(RFMatIDFormatError) as info:
        load_dataset(upstream_tree, use_cache=False, threads=3)
    assert info.value.path == str(files[3]) and info.value.line == 2
    skipped = [
        load_dataset(upstream_tree, use_cache=False, skip_bad=True, threads=n).skipped
        for n in (1, 3)
    ]
    assert skipped[0] == skipped[1] and len(skipped[0]) == 2
