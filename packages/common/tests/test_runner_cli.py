"""The ``iclr26`` command's small contracts: one-line errors, full names at 80 columns, the -j
thread split and the user's OMP_NUM_THREADS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iclr26_common import cli, registry, runner
from iclr26_common.testing import assert_one_line_error


def _only_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    """Describe only the fake distribution in ``iclr26 list`` (the real ones import torch)."""
    real = registry.entry_point_info
    monkeypatch.setattr(
        registry,
        "entry_point_info",
        lambda: {k: v for k, v in real().items() if v.distribution == "fake-exp"},
    )


def test_out_that_is_a_file_is_one_line(fake_dist: Path, tmp_path: Path, capsys) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("the user's file")
    line = assert_one_line_error(cli.main, ["reproduce", "good", "--out", str(target)], capsys)
    assert line == f"iclr26 reproduce: error: --out {target}: {target} is not a folder"
    assert target.read_text() == "the user's file"

    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "full").write_text("")  # the mode folder is a file
    line = assert_one_line_error(
        cli.main, ["reproduce", "good", "--out", str(tmp_path / "reports")], capsys
    )
    assert line.endswith("full is not a folder")


@pytest.mark.parametrize("value", ["abc", "-1", "0", "nan"])
def test_bad_timeout_is_one_line(value: str, capsys) -> None:
    line = assert_one_line_error(cli.main, ["reproduce", "--timeout", value], capsys)
    assert line.startswith("iclr26 reproduce: error: argument --timeout: expected a number")
    assert "seconds > 0" in line and repr(value) in line


def test_list_names_prints_names_only(
    fake_dist: Path, capsys: pytest.CaptureFixture[str], long_name: str
) -> None:
    assert cli.main(["list", "--names"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == list(registry.entry_point_info())
    assert long_name in out.splitlines() and "good" in out.splitlines()


def test_list_prints_full_names_at_80_columns(
    fake_dist: Path, monkeypatch: pytest.MonkeyPatch, capsys, long_name: str
) -> None:
    _only_fake(monkeypatch)  # COLUMNS=80 and not a terminal (fake_dist, pytest capture)
    assert cli.main(["list"]) == 1  # fake-exp registers broken entry points too
    lines = capsys.readouterr().out.splitlines()
    assert long_name in lines  # whole, on its own line
    assert not any("…" in line for line in lines)
    assert "    claim: A long name." in lines


def test_summary_prints_full_names(fake_dist: Path, tmp_path: Path, capsys, long_name) -> None:
    assert cli.main(["reproduce", long_name, "--out", str(tmp_path), "--quick"]) == 0
    lines = capsys.readouterr().out.splitlines()
    summary = [line for line in lines if line.startswith("  held")]
    assert len(summary) == 1 and f" {long_name} " in summary[0]
    assert str(tmp_path / "quick" / long_name / "report.md") in summary[0]
    assert not any("…" in line for line in lines)


def test_jobs_split_counts_the_experiments_that_run(
    fake_dist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "available_cores", lambda: 4)
    # -j 4 but one experiment: it gets all 4 cores, not 4 // 4 = 1.
    assert cli.main(["reproduce", "claims", "--out", str(tmp_path), "-j", "4"]) == 0
    data = json.loads((tmp_path / "full" / "claims" / "result.json").read_text())
    assert data["metrics"]["omp"] == "4"


@pytest.mark.parametrize("value", ["3", "2,1"])
def test_users_omp_num_threads_is_passed_through(
    value: str, fake_dist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    monkeypatch.setattr(runner, "available_cores", lambda: 8)
    assert cli.main(["reproduce", "claims", "--out", str(tmp_path), "-j", "2"]) == 0
    data = json.loads((tmp_path / "full" / "claims" / "result.json").read_text())
    assert data["metrics"]["omp"] == value
    assert f"OMP_NUM_THREADS={value} from your environment" in capsys.readouterr().out
