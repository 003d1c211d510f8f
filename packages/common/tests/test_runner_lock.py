"""Two real ``iclr26 reproduce`` processes into one --out: the second refuses (or waits), and
nothing of the first is lost (its partial folder, its log, its result)."""

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

from iclr26_common import cli, registry
from iclr26_common.outlock import LOCK_FILE, OutputLock
from iclr26_common.runner import recover

#: Bounds a hang only: every wait ends on an event (a line in a file, a process exit).
TIMEOUT_S = 120


def _reproduce_cmd(out: Path, *names: str, extra: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "iclr26_common", "reproduce", *names, "--out", str(out), *extra]


def _wait_for(predicate, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not predicate():
        assert proc is None or proc.poll() is None, f"process ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _text(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


@pytest.fixture
def gate(fake_dist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file whose creation lets the ``gated`` fake experiment finish."""
    path = tmp_path / "gate-open"
    monkeypatch.setenv("FAKE_GATE", str(path))
    return path


def test_second_run_refuses_and_the_first_loses_nothing(gate: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    folder = out / "quick"
    first = subprocess.Popen(
        _reproduce_cmd(out, "gated", extra=("--quick",)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: "waiting pid=" in _text(folder / "gated.log"), "the worker", first)
        partial = list(folder.glob(".gated.partial-*"))
        assert len(partial) == 1
        holder = json.loads((folder / LOCK_FILE).read_text())
        assert holder["pid"] == first.pid

        # A second real process on the same folder (same experiment): one line, exit 2.
        second = subprocess.run(
            _reproduce_cmd(out, "gated", extra=("--quick",)),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        assert second.returncode == 2, second.stderr
        lines = [line for line in second.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
        assert lines[0].startswith("iclr26 reproduce: error: ")
        assert f"pid {first.pid}" in lines[0] and holder["run_id"] in lines[0]
        assert "--wait" in lines[0] and second.stdout == ""
        # ... and it touched nothing: the first run's partial folder and log are intact.
        assert partial[0].is_dir() and "waiting pid=" in _text(folder / "gated.log")
    finally:
        gate.touch()
        assert first.wait(timeout=TIMEOUT_S) == 0, first.stderr.read()
    result = json.loads((folder / "gated" / "result.json").read_text())
    assert result["status"] == "held"
    log = (folder / "gated" / "log.txt").read_text()
    assert "waiting pid=" in log and "gate open" in log
    assert not list(folder.glob(".gated.*"))


def test_wait_runs_after_the_holder_finishes(gate: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    folder = out / "full"
    first = subprocess.Popen(_reproduce_cmd(out, "gated"), stdout=subprocess.DEVNULL)
    waiter_out = tmp_path / "waiter.txt"
    try:
        _wait_for(lambda: "waiting pid=" in _text(folder / "gated.log"), "the worker", first)
        with open(waiter_out, "w") as sink:
            waiter = subprocess.Popen(
                _reproduce_cmd(out, "good", extra=("--wait",)), stdout=sink, env=os.environ
            )
        # The message is printed once the waiter found the folder taken; the gate is still
        # closed, so the holder still holds it and the waiter has not run anything yet.
        _wait_for(lambda: "Waiting:" in _text(waiter_out), "the waiting message", waiter)
        assert waiter.poll() is None and not (folder / "good").exists()
    finally:
        gate.touch()
    assert first.wait(timeout=TIMEOUT_S) == 0
    assert waiter.wait(timeout=TIMEOUT_S) == 0, _text(waiter_out)
    gated = json.loads((folder / "gated" / "result.json").read_text())
    good = json.loads((folder / "good" / "result.json").read_text())
    assert gated["status"] == good["status"] == "held" and gated["run_id"] != good["run_id"]
    assert good["timestamp"] >= gated["timestamp"]  # it ran after the holder's result
    assert "gate open" in (folder / "gated" / "log.txt").read_text()
    index = (folder / "index.md").read_text()
    assert (
        f"2 of {len(registry.entry_point_info())} registered experiments (full mode): 2 held"
        in (index)
    )


def test_orphaned_workers_of_a_killed_run_keep_the_folder(gate: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    folder = out / "full"
    first = subprocess.Popen(_reproduce_cmd(out, "gated"), stdout=subprocess.DEVNULL)
    _wait_for(lambda: "waiting pid=" in _text(folder / "gated.log"), "the worker", first)
    worker_pid = int(re.search(r"waiting pid=(\d+)", _text(folder / "gated.log")).group(1))
    first.send_signal(signal.SIGKILL)  # no chance to clean up: its worker lives on
    first.wait(timeout=TIMEOUT_S)
    try:
        second = subprocess.run(
            _reproduce_cmd(out, "gated"), capture_output=True, text=True, timeout=TIMEOUT_S
        )
        assert second.returncode == 2
        assert "that process is gone, its workers still run" in second.stderr
        assert list(folder.glob(".gated.partial-*"))  # the orphan's folder survived
    finally:
        os.kill(worker_pid, signal.SIGKILL)

    def lock_free() -> bool:
        probe = OutputLock(folder, "probe")
        try:
            probe.acquire()
        except Exception:
            return False
        probe.release()
        return True

    _wait_for(lock_free, "the orphan to exit")
    gate.touch()
    assert cli.main(["reproduce", "gated", "--out", str(out)]) == 0
    assert not list(folder.glob(".gated.partial-*"))  # now stale, so recovered


def test_recover_leaves_partial_folders_of_a_live_holder(tmp_path: Path) -> None:
    (tmp_path / ".exp.partial-r2").mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\n"
            "time.sleep(60)\n",
            str(tmp_path / LOCK_FILE),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        recover(tmp_path, "exp")
        assert (tmp_path / ".exp.partial-r2").is_dir()  # another live run's folder
    finally:
        holder.kill()
        holder.wait()
    with OutputLock(tmp_path, "mine").held():  # ours now: stale folders go
        recover(tmp_path, "exp")
    assert not (tmp_path / ".exp.partial-r2").exists()
