from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iclr26_common import __version__, cli, registry, worker
from iclr26_common.report import write_result
from iclr26_common.testing import assert_cli_help, shipped_configs


def _status(out: Path, name: str) -> dict:
    return json.loads((out / name / "result.json").read_text())


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert f"iclr26-common {__version__}" in capsys.readouterr().out
    assert "reproduce" in assert_cli_help(cli.main)
    assert "--timeout" in assert_cli_help(cli.main, ["reproduce", "--help"])


def test_assert_cli_help_fails_for_bad_mains() -> None:
    with pytest.raises(AssertionError, match="returned"):
        assert_cli_help(lambda argv: 0)
    with pytest.raises(AssertionError, match="exited with 2"):
        assert_cli_help(cli.main, ["bogus"])


def test_shipped_configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "cfgpkg"
    (pkg / "configs" / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "configs" / "b.yaml").write_text("x: 1\n")
    (pkg / "configs" / "sub" / "a.yaml").write_text("y: 2\n")
    (pkg / "configs" / "notes.txt").write_text("")
    (tmp_path / "nocfg").mkdir()
    (tmp_path / "nocfg" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = shipped_configs("cfgpkg")
    assert [p.relative_to(pkg / "configs").as_posix() for p in found] == ["b.yaml", "sub/a.yaml"]
    with pytest.raises(FileNotFoundError, match="nocfg"):
        shipped_configs("nocfg")


def test_list(fake_dist: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    real = registry.find_entry_points
    fake = {k: v for k, v in real().items() if all(ep.dist.name == "fake-exp" for ep in v)}
    monkeypatch.setattr(registry, "find_entry_points", lambda: fake)
    assert cli.main(["list"]) == 1  # fake-exp registers broken entry points
    out = capsys.readouterr().out
    for text in ["good", "Fake Paper (arXiv:0000.00000)", "Good things happen", "load error"]:
        assert text in out
    assert "MISSING" in out and "3 experiment(s) failed to load" in out


def test_unknown_name(fake_dist: Path, tmp_path: Path, capsys) -> None:
    assert cli.main(["reproduce", "good", "nope", "--out", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "Unknown experiment(s): nope" in out and "good" in out
    assert list(tmp_path.iterdir()) == []


def test_worker_in_process(fake_dist: Path, tmp_path: Path) -> None:
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "stale.png").write_text("old")
    assert worker.main(["good", "--out", str(tmp_path), "--quick"]) == 0
    assert sorted(p.name for p in (tmp_path / "good").iterdir()) == [
        "curve.png",
        "report.md",
        "result.json",
    ]
    assert worker.main(["crash", "--out", str(tmp_path)]) == 1
    assert "boom from crash" in _status(tmp_path, "crash")["error"]


def test_reproduce_end_to_end(fake_dist: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "reports"
    old = registry.Experiment("old", "Old Paper", "An earlier run.", lambda q, d: None)
    write_result(out / "old", old, None, status="error", error="earlier", duration_s=1, quick=False)
    (out / "good").mkdir()
    (out / "good" / "stale.txt").write_text("from a previous run")

    names = ["good", "notheld", "crash", "exit", "noresult", "bad"]
    assert cli.main(["reproduce", *names, "--out", str(out), "--quick"]) == 1

    good = _status(out, "good")
    assert good["status"] == "held" and good["quick"] is True and good["plots"] == ["curve.png"]
    assert good["scale"] == "2 classes, 1 epoch (quick)" and good["distribution"] == "fake-exp"
    assert "fake-exp" in good["versions"]
    assert not (out / "good" / "stale.txt").exists()
    assert (out / "good" / "log.txt").is_file() and not list(out.glob("*.log"))
    md = (out / "good" / "report.md").read_text()
    assert "Good things happen to good models." in md and "**Seeds:** 0, 1" in md
    assert "**Verdict: held at this scale**" in md

    assert _status(out, "notheld")["status"] == "not held"
    crash = _status(out, "crash")
    assert crash["status"] == "error" and "RuntimeError: boom from crash" in crash["error"]
    assert "**Error**" in (out / "crash" / "report.md").read_text()
    hard = _status(out, "exit")
    assert hard["status"] == "error" and "exited with code 3" in hard["error"]
    assert "about to exit hard" in hard["error"]  # tail of the worker's output
    assert hard["paper"] == "Fake Paper (arXiv:0000.00000)"
    assert "returned dict" in _status(out, "noresult")["error"]
    assert "MISSING" in _status(out, "bad")["error"]

    index = (out / "index.md").read_text()
    assert "7 experiments: 1 held, 1 not held, 5 error." in index
    for name in [*names, "old"]:
        assert f"[report.md]({name}/report.md)" in index
    printed = capsys.readouterr().out
    assert "1 held, 1 not held, 4 error" in printed and "[1/6] good: held" in printed
    assert "RuntimeError: boom from crash" in printed  # the summary's note column


def test_reproduce_timeout(fake_dist: Path, tmp_path: Path) -> None:
    start = time.monotonic()
    assert cli.main(["reproduce", "sleepy", "good", "--out", str(tmp_path), "--timeout", "3"]) == 1
    assert time.monotonic() - start < 30
    sleepy = _status(tmp_path, "sleepy")
    assert (
        sleepy["status"] == "error"
        and "timed out after 3 s (--timeout) and was killed" in sleepy["error"]
    )
    assert "sleeping" in sleepy["error"]
    assert _status(tmp_path, "good")["status"] == "held"


def test_reproduce_all_ok_exit_zero(fake_dist: Path, tmp_path: Path) -> None:
    assert cli.main(["reproduce", "good", "notheld", "--out", str(tmp_path)]) == 0


def test_sigterm_kills_worker_and_records_error(fake_dist: Path, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "iclr26_common", "reproduce", "sleepy", "good"]
    parent = subprocess.Popen([*cmd, "--out", str(tmp_path)], stdout=subprocess.DEVNULL)
    log, deadline = tmp_path / "sleepy.log", time.monotonic() + 30
    while not (log.is_file() and "sleeping" in log.read_text()):
        assert time.monotonic() < deadline and parent.poll() is None, "worker never started"
        time.sleep(0.05)
    worker_pid = int(re.search(r"pid=(\d+)", log.read_text()).group(1))
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=30) == 130
    with pytest.raises(ProcessLookupError):
        os.kill(worker_pid, 0)  # no orphan left behind
    sleepy = _status(tmp_path, "sleepy")
    assert sleepy["status"] == "error" and "interrupted" in sleepy["error"]
    assert not (tmp_path / "good").exists()  # later experiments are skipped
    assert "1 experiment: 0 held, 0 not held, 1 error." in (tmp_path / "index.md").read_text()
