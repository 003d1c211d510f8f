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
from iclr26_common.runner import recover, threads_per_worker
from iclr26_common.testing import assert_cli_help, assert_one_line_error, shipped_configs

#: Bounds a hang only: every wait below ends on an event the code produces (a line in a log, a
#: process exit), and this is how long a broken run may take to show that it is broken.
HANG_S = 120

#: ``iclr26`` with Ctrl-C's usual disposition. A process started in the background by a
#: non-interactive shell (``pytest ... &``, a CI script's background step) inherits SIGINT as
#: *ignored*, Python then installs no KeyboardInterrupt handler, and every child inherits the
#: ignored SIGINT too: the reproduce process of the interrupt test would ignore the test's
#: SIGINT and its worker sleep on (the test failed in such full-suite runs, and passed alone in
#: a terminal). A Ctrl-C reaches a foreground process, whose SIGINT is not ignored: restore that.
CTRL_C_ABLE = (
    "import signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "from iclr26_common.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _wait_for_line(log: Path, text: str, proc: subprocess.Popen) -> str:
    """Wait until ``log`` contains ``text`` (polling the file the worker writes); fail at once
    if ``proc`` exits first. Returns the log's text."""
    deadline = time.monotonic() + HANG_S
    while True:
        content = log.read_text() if log.is_file() else ""
        if text in content:
            return content
        assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before {text!r}"
        assert time.monotonic() < deadline, f"no {text!r} in {log} after {HANG_S} s (a hang)"
        time.sleep(0.05)


def _status(out: Path, name: str) -> dict:
    return json.loads((out / name / "result.json").read_text())


def _n_registered() -> int:
    return len(registry.entry_point_info())


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert f"iclr26-common {__version__}" in capsys.readouterr().out
    assert "reproduce" in assert_cli_help(cli.main)
    reproduce_help = assert_cli_help(cli.main, ["reproduce", "--help"])
    for flag in ("--timeout", "--jobs", "--resume", "--quick", "--wait"):
        assert flag in reproduce_help


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


def _only(monkeypatch: pytest.MonkeyPatch, dists: tuple[str, ...]) -> None:
    """Restrict the registry seen in this process to the fake distributions."""
    real = registry.entry_point_info
    monkeypatch.setattr(
        registry,
        "entry_point_info",
        lambda: {k: v for k, v in real().items() if v.distribution in dists},
    )


def test_list(fake_dist: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    _only(monkeypatch, ("fake-exp",))
    assert cli.main(["list"]) == 1  # fake-exp registers broken entry points
    out = capsys.readouterr().out
    for text in ["good", "Fake Paper (arXiv:0000.00000)", "Good things happen", "load error"]:
        assert text in out
    assert "    runs: 1 thread(s)" in out.splitlines()
    assert "MISSING" in out and "3 experiment(s) failed to load" in out
    assert "fakepkg" not in sys.modules  # described by a subprocess, never imported here


def test_list_survives_a_package_that_aborts_at_import(abort_dist: Path) -> None:
    found = cli.describe_isolated(["good", "aborts", "claims"])
    assert found["good"]["paper"] == "Fake Paper (arXiv:0000.00000)"
    assert found["claims"]["claim"] == "Two claims."
    assert found["aborts"]["error"] == "import crashed (killed by SIGABRT)"
    hung = cli.describe_isolated(["hangs", "good"], timeout=5)
    assert "timeout after 5 s" in hung["hangs"]["error"] and "paper" in hung["good"]


def test_unknown_name_is_one_line(fake_dist: Path, tmp_path: Path, capsys) -> None:
    line = assert_one_line_error(
        cli.main, ["reproduce", "good", "goood", "--out", str(tmp_path)], capsys
    )
    assert line.startswith("iclr26 reproduce: error: unknown experiment(s): goood")
    assert "did you mean good?" in line and "iclr26 list --names" in line
    assert list(tmp_path.iterdir()) == []


def test_worker_in_process(fake_dist: Path, tmp_path: Path, capsys) -> None:
    """`worker NAME --out DIR` writes into DIR's mode folder under the same lock as reproduce."""
    from iclr26_common.outlock import OutputLock

    quick = tmp_path / "quick"
    (quick / "good").mkdir(parents=True)
    (quick / "good" / "stale.png").write_text("old")
    assert worker.main(["good", "--out", str(tmp_path), "--quick"]) == 0
    assert sorted(p.name for p in (quick / "good").iterdir()) == [
        "curve.png",
        "report.md",
        "result.json",
    ]
    assert worker.main(["crash", "--out", str(tmp_path)]) == 1
    assert "boom from crash" in _status(tmp_path / "full", "crash")["error"]
    held = OutputLock(quick, "another-run")
    held.acquire()
    try:  # a reproduce run holds the folder: the worker refuses instead of deleting its results
        with pytest.raises(SystemExit) as stop:
            worker.main(["good", "--out", str(tmp_path), "--quick"])
        assert stop.value.code == 2 and "another-run" in capsys.readouterr().err
        assert (quick / "good" / "result.json").is_file()
    finally:
        held.release()


def test_reproduce_end_to_end(fake_dist: Path, tmp_path: Path, capsys) -> None:
    reports = tmp_path / "reports"
    out = reports / "quick"
    old = registry.Experiment("old", "Old Paper", "An earlier run.", lambda q, d: None)
    write_result(out / "old", old, None, status="error", error="earlier", duration_s=1, quick=True)
    (out / "good").mkdir()
    (out / "good" / "stale.txt").write_text("from a previous run")

    names = ["good", "notheld", "crash", "exit", "noresult", "bad"]
    assert cli.main(["reproduce", *names, "--out", str(reports), "--quick"]) == 1

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
    n = _n_registered()
    headline = f"6 of {n} registered experiments (quick mode): 1 held, 1 not held, "
    assert (
        headline
        + f"0 inconclusive (control failed), 0 inconclusive (underpowered), 4 error; {n - 6} not run."
        in index
    )
    for name in [*names, "old"]:
        assert f"[report.md]({name}/report.md)" in index
    assert "| old | **error** |" in index.split("## Not counted")[1]  # listed, not counted
    printed = capsys.readouterr().out
    assert "1 held, 1 not held, 0 inconclusive, 4 error" in printed
    assert "[1/6] good: held" in printed
    assert "RuntimeError: boom from crash" in printed  # the summary's note column
    assert "fakepkg" not in sys.modules  # the parent never imports an experiment
    left = [p.name for p in out.iterdir() if p.name.startswith(".")]
    assert left == [".iclr26.lock"]  # no partial folders left
    assert good["wall_s"] >= good["duration_s"] and good["device"] == "cpu"
    assert good["devices"] == ["cpu"] and good["schema"] == 4
    assert good["distribution_version"] == "0.1" and good["run_id"]
    runs = {_status(out, n)["run_id"] for n in names}
    assert len(runs) == 1 and "earlier run (" in index.split("| old |")[1].split("\n")[0]


def test_reproduce_timeout(fake_dist: Path, tmp_path: Path) -> None:
    # sleepy sleeps 120 s and then returns a non-Result: only the timeout's kill explains the
    # message below (no wall-clock margin: the kill is the event).
    assert cli.main(["reproduce", "sleepy", "good", "--out", str(tmp_path), "--timeout", "3"]) == 1
    tmp_path = tmp_path / "full"
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
    cmd = [sys.executable, "-m", "iclr26_common", "reproduce", "sleepy", "good", "-j", "1"]
    parent = subprocess.Popen([*cmd, "--out", str(tmp_path)], stdout=subprocess.DEVNULL)
    tmp_path = tmp_path / "full"
    text = _wait_for_line(tmp_path / "sleepy.log", "sleeping", parent)
    worker_pid = int(re.search(r"pid=(\d+)", text).group(1))
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=HANG_S) == 130
    with pytest.raises(ProcessLookupError):
        os.kill(worker_pid, 0)  # no orphan left behind
    sleepy = _status(tmp_path, "sleepy")
    assert sleepy["status"] == "error" and "interrupted" in sleepy["error"]
    assert not (tmp_path / "good").exists()  # later experiments are skipped
    index = (tmp_path / "index.md").read_text()
    assert (
        f"1 of {_n_registered()} registered experiments (full mode): 0 held, 0 not held, " in index
    )
    assert "0 inconclusive (underpowered), 1 error;" in index


def test_abort_or_hang_at_import_is_an_error_row(abort_dist: Path, tmp_path: Path) -> None:
    code = cli.main(
        ["reproduce", "aborts", "hangs", "good", "--out", str(tmp_path), "--timeout", "8"]
    )
    assert code == 1
    tmp_path = tmp_path / "full"
    aborts, hangs = _status(tmp_path, "aborts"), _status(tmp_path, "hangs")
    assert aborts["status"] == "error" and "killed by signal SIGABRT" in aborts["error"]
    assert aborts["paper"].startswith("unknown") and aborts["distribution"] == "fake-abort"
    assert hangs["status"] == "error" and "timed out after 8 s" in hangs["error"]
    assert _status(tmp_path, "good")["status"] == "held"
    assert "fakeabort" not in sys.modules and "fakehang" not in sys.modules


def test_jobs_run_in_parallel_with_split_threads(
    fake_dist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    meet = tmp_path / "meet"
    meet.mkdir()
    monkeypatch.setenv("FAKE_RENDEZVOUS", str(meet))
    out = tmp_path / "reports"
    # Each waits for the other to start: only possible with two workers at once.
    assert cli.main(["reproduce", "meet-a", "meet-b", "--out", str(out), "-j", "2"]) == 0
    a, b = _status(out / "full", "meet-a"), _status(out / "full", "meet-b")
    assert a["status"] == b["status"] == "not held"  # 1 of 2 claims held
    expected = str(threads_per_worker(2, running=2))
    assert a["metrics"]["omp"] == b["metrics"]["omp"] == expected
    assert a["threads"] is None  # no torch work: no thread count to report


@pytest.mark.parametrize("quick", [True, False])
def test_reproduce_without_j_runs_two_at_once_on_two_cores(
    quick: bool, fake_dist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``-j``, two single-thread experiments run side by side on 2 cores, in quick and
    full runs alike: they meet (at ``-j 1`` they never do: test_jobs_one_runs_in_sequence)."""
    import iclr26_common.runner as runner_module

    monkeypatch.setattr(runner_module, "available_cores", lambda: 2)
    meet = tmp_path / "meet"
    meet.mkdir()
    monkeypatch.setenv("FAKE_RENDEZVOUS", str(meet))
    out = tmp_path / "reports"
    quick = ["--quick"] if quick else []
    assert cli.main(["reproduce", "meet-a", "meet-b", *quick, "--out", str(out)]) == 0


def test_jobs_one_runs_in_sequence(fake_dist: Path, tmp_path: Path, capsys) -> None:
    """``-j 1``: each experiment starts after the previous one finished (the runner prints its
    start and finish lines in the order the events happen), whatever the packing would do."""
    out = tmp_path / "reports"
    names = ["good", "notheld", "claims"]
    assert cli.main(["reproduce", *names, "--out", str(out), "-j", "1"]) == 0
    events = [
        line.split("] ", 1)[1]
        for line in capsys.readouterr().out.splitlines()
        if re.match(r"\[\d/3\] ", line)
    ]
    verdicts = {"good": "held", "notheld": "not held", "claims": "not held"}
    expected = [x for n in names for x in (f"{n}: running", f"{n}: {verdicts[n]}")]
    assert [e.split(" (")[0] for e in events] == expected


@pytest.mark.parametrize(
    ("jobs", "cores", "threads"), [(1, 2, 2), (2, 2, 1), (3, 2, 1), (2, 16, 8)]
)
def test_threads_per_worker(jobs: int, cores: int, threads: int) -> None:
    assert threads_per_worker(jobs, cores) == threads


@pytest.mark.parametrize(
    ("jobs", "running", "cores", "threads"),
    [(4, 1, 2, 2), (4, 2, 8, 4), (2, 5, 8, 4), (3, 3, 2, 1), (4, 0, 2, 2)],
)
def test_threads_per_worker_counts_experiments_that_run(
    jobs: int, running: int, cores: int, threads: int
) -> None:
    assert threads_per_worker(jobs, cores, running=running) == threads


def test_resume_skips_same_digest_and_mode_only(fake_dist: Path, tmp_path: Path) -> None:
    out = tmp_path / "quick"
    names = ["good", "claims", "crash", "inconclusive"]
    assert cli.main(["reproduce", *names, "--out", str(tmp_path), "--quick"]) == 1
    first = {n: _status(out, n) for n in names}
    assert first["good"]["source"]["files"] == ["fakepkg.py"]
    assert cli.main(["reproduce", *names, "--out", str(tmp_path), "--quick", "--resume"]) == 1
    again = {n: _status(out, n) for n in names}
    assert again["good"]["run_id"] == first["good"]["run_id"]  # held: kept
    assert again["claims"]["run_id"] == first["claims"]["run_id"]  # not held: kept
    assert again["inconclusive"]["run_id"] == first["inconclusive"]["run_id"]  # kept
    assert again["crash"]["run_id"] != first["crash"]["run_id"]  # error: rerun
    index = (out / "index.md").read_text()
    assert index.count("earlier run (") == 3

    # the other mode has its own folder: nothing to resume there
    assert cli.main(["reproduce", "good", "--out", str(tmp_path), "--resume"]) == 0
    full = _status(tmp_path / "full", "good")
    assert full["quick"] is False and _status(out, "good") == again["good"]
    # a result whose digest differs (other code or versions) is rerun
    data = json.loads((out / "good" / "result.json").read_text())
    data["source"]["digest"] = "0" * 64
    (out / "good" / "result.json").write_text(json.dumps(data))
    assert cli.main(["reproduce", "good", "--out", str(tmp_path), "--quick", "--resume"]) == 0
    assert _status(out, "good")["run_id"] != first["good"]["run_id"]


def test_a_crashed_rerun_keeps_the_earlier_result(
    fake_dist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli.main(["reproduce", "flaky", "--out", str(tmp_path)]) == 0
    reports, tmp_path = tmp_path, tmp_path / "full"
    first = _status(tmp_path, "flaky")
    monkeypatch.setenv("FAKE_FLAKY", "crash")
    assert cli.main(["reproduce", "flaky", "--out", str(reports)]) == 1
    kept = _status(tmp_path, "flaky")
    assert kept == first and (tmp_path / "flaky" / "curve.png").is_file()
    index = (tmp_path / "index.md").read_text()
    assert (
        "earlier run (" in index
        and "this run's attempt failed (worker was killed by signal SIGABRT" in index
    )
    assert (tmp_path / "_attempts" / "flaky.log").is_file()
    assert not [
        p for p in tmp_path.iterdir() if p.name.startswith(".") and p.name != ".iclr26.lock"
    ]

    # an error result written by the worker (run() raised) does replace the earlier result
    monkeypatch.setenv("FAKE_FLAKY", "raise")
    assert cli.main(["reproduce", "flaky", "--out", str(reports)]) == 1
    raised = _status(tmp_path, "flaky")
    assert raised["status"] == "error" and "flaky raised" in raised["error"]
    assert not (tmp_path / "_attempts" / "flaky.json").exists()
    assert "attempt failed" not in (tmp_path / "index.md").read_text()


def test_interrupted_rerun_keeps_the_earlier_result(
    fake_dist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli.main(["reproduce", "flaky", "--out", str(tmp_path)]) == 0
    first = _status(tmp_path / "full", "flaky")
    env = {**os.environ, "FAKE_FLAKY": "sleep"}
    cmd = [sys.executable, "-m", "iclr26_common", "reproduce", "flaky", "--out", str(tmp_path)]
    parent = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_ABLE, *cmd[3:]], stdout=subprocess.DEVNULL, env=env
    )
    tmp_path = tmp_path / "full"
    _wait_for_line(tmp_path / "flaky.log", "sleeping", parent)
    parent.send_signal(signal.SIGINT)  # the worker sleeps 120 s: only the runner ends it
    assert parent.wait(timeout=HANG_S) == 130
    assert _status(tmp_path, "flaky") == first
    assert not [
        p for p in tmp_path.iterdir() if p.name.startswith(".") and p.name != ".iclr26.lock"
    ]


def test_recover_restores_a_swap_cut_between_renames(tmp_path: Path) -> None:
    (tmp_path / ".exp.old-r1").mkdir()
    (tmp_path / ".exp.old-r1" / "result.json").write_text("{}")
    (tmp_path / ".exp.partial-r2").mkdir()
    recover(tmp_path, "exp")
    assert (tmp_path / "exp" / "result.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]
