"""The ``iclr26`` command: list registered experiments and reproduce them in subprocesses."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from iclr26_common import __version__, registry
from iclr26_common.registry import Experiment, LoadError
from iclr26_common.report import write_index, write_result
from iclr26_common.worker import fresh_dir, run_experiment

__all__ = ["main"]

TAIL_LINES = 40  # lines of a crashed worker's output kept in its error result
KILL_GRACE_S = 5.0  # SIGTERM -> SIGKILL delay for a timed-out worker
_STYLES = {"held": "green", "not held": "yellow", "error": "bold red"}


class _CurrentElapsed(ProgressColumn):
    """Elapsed time of the experiment that is running now."""

    def render(self, task: Task) -> Text:
        seconds = int(time.monotonic() - task.fields.get("started", time.monotonic()))
        return Text(f"this one {seconds // 60}:{seconds % 60:02d}", style="progress.elapsed")


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="iclr26", description="Reproduce ICLR 2026 claims at miniature scale."
    )
    parser.add_argument("--version", action="version", version=f"iclr26-common {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("list", help="list registered experiments", description="List experiments.")
    rep = sub.add_parser(
        "reproduce",
        help="run experiments, each in its own subprocess, and write reports",
        description="Run experiments (default: all), each isolated in a subprocess; write "
        "OUT/NAME/report.md + result.json + log.txt and OUT/index.md.",
    )
    rep.add_argument("names", nargs="*", metavar="NAME", help="experiments to run (default: all)")
    rep.add_argument("--quick", action="store_true", help="smaller, faster runs")
    rep.add_argument("--out", type=Path, default=Path("reports"), help="reports directory")
    rep.add_argument(
        "--timeout",
        type=_positive_float,
        default=None,
        metavar="SECONDS",
        help="per-experiment wall-clock limit (default: none)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``iclr26`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    console = Console()
    if args.command == "list":
        return _list(console)
    return _reproduce(console, args.names, args.out, args.quick, args.timeout)


def _list(console: Console) -> int:
    """Print name, paper and claim of every experiment; 1 if any failed to load."""
    found = registry.discover()
    if not found:
        console.print(
            f"No experiments registered (entry point group {registry.ENTRY_POINT_GROUP})."
        )
        return 0
    table = Table("Experiment", "Paper", "Claim", show_lines=True)
    for name, exp in found.items():
        if isinstance(exp, LoadError):
            table.add_row(Text(name), Text("load error", style="bold red"), Text(exp.message))
        else:
            table.add_row(Text(name, style="bold"), Text(exp.paper), Text(exp.claim))
    console.print(table)
    errors = sum(isinstance(e, LoadError) for e in found.values())
    if errors:
        console.print(Text(f"{errors} experiment(s) failed to load.", style="bold red"))
    return 1 if errors else 0


def _reproduce(
    console: Console, names: list[str], out: Path, quick: bool, timeout: float | None
) -> int:
    found = registry.find_entry_points()
    selected = list(dict.fromkeys(names)) or list(found)
    unknown = [n for n in selected if n not in found]
    if unknown:
        console.print(
            Text(f"Unknown experiment(s): {', '.join(unknown)}", style="bold red"),
            Text(f"Known: {', '.join(found) or 'none (nothing registered)'}"),
            sep="\n",
        )
        return 2
    if not selected:
        console.print(
            f"No experiments registered (entry point group {registry.ENTRY_POINT_GROUP})."
        )
        return 0
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    experiments = registry.discover(selected)  # import failures show up before any long run

    outcomes: list[tuple[str, str, float]] = []
    interrupted = False
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _CurrentElapsed(),
        TextColumn("total"),
        TimeElapsedColumn(),
    )
    # Without a terminal rich would only draw the bar once, at the end: print plain lines instead.
    live = console.is_terminal
    with (
        _terminate_as_interrupt(),
        Progress(*columns, console=console, disable=not live) as progress,
    ):
        task = progress.add_task("", total=len(selected), started=time.monotonic())
        for i, name in enumerate(selected, 1):
            tag = f"[{i}/{len(selected)}] {name}"
            progress.update(task, description=escape(name), started=time.monotonic())
            if not live:
                console.print(Text(f"{tag}: running (log: {out / name}.log)"))
            began = time.monotonic()
            try:
                status, duration = _run_one(experiments[name], name, out, quick, timeout)
            except KeyboardInterrupt:
                status, duration, interrupted = "error", time.monotonic() - began, True
            outcomes.append((name, status, duration))
            line = Text(f"{tag}: ")
            line.append(status, style=_STYLES[status]).append(f" ({duration:.1f} s)")
            progress.console.print(line)
            progress.advance(task)
            if interrupted:
                progress.console.print(Text("Interrupted: remaining experiments skipped.", "red"))
                break
        progress.update(task, description="done")

    index = write_index(out)
    _print_summary(console, outcomes, out, index)
    if interrupted:
        return 130
    return 1 if any(status == "error" for _, status, _ in outcomes) else 0


def _run_one(
    experiment: Experiment | LoadError, name: str, out: Path, quick: bool, timeout: float | None
) -> tuple[str, float]:
    """Run one experiment in a worker subprocess; make sure a result exists. (status, secs)."""
    exp_dir = out / name
    if isinstance(experiment, LoadError):
        run_experiment(experiment, exp_dir, quick)  # writes the load error, imports nothing
        return "error", 0.0

    fresh_dir(exp_dir)  # a stale result.json must never be mistaken for this run's
    log_path = out / f"{name}.log"
    cmd = [sys.executable, "-m", "iclr26_common.worker", name, "--out", str(out)]
    cmd += ["--quick"] if quick else []
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    problem = None
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            problem = f"timed out after {timeout:g} s (--timeout) and was killed"
        except KeyboardInterrupt:
            _kill(proc)
            _finish(
                exp_dir,
                log_path,
                experiment,
                "interrupted (Ctrl-C or SIGTERM/SIGHUP)",
                start,
                quick,
            )
            raise
    if problem is None and proc.returncode < 0:
        problem = f"worker was killed by signal {_signal_name(-proc.returncode)}"
    elif problem is None:
        problem = f"worker exited with code {proc.returncode}"
    status = _finish(exp_dir, log_path, experiment, problem, start, quick)
    return status, time.monotonic() - start


def _finish(
    exp_dir: Path,
    log_path: Path,
    experiment: Experiment,
    problem: str,
    start: float,
    quick: bool,
) -> str:
    """Move the log into ``exp_dir`` and return the written status, writing an error if none."""
    duration = time.monotonic() - start
    exp_dir.mkdir(parents=True, exist_ok=True)
    log_file = exp_dir / "log.txt"
    with contextlib.suppress(OSError):
        os.replace(log_path, log_file)
    try:
        status = json.loads((exp_dir / "result.json").read_text(encoding="utf-8"))["status"]
        if status in _STYLES:
            return status
    except (OSError, ValueError, KeyError, TypeError):
        pass
    message = (
        f"{problem}; no result was written (ran {duration:.1f} s).\n\n"
        f"Last {TAIL_LINES} lines of its output ({log_file}):\n{_tail(log_file)}"
    )
    write_result(
        exp_dir,
        experiment,
        None,
        status="error",
        error=message,
        duration_s=duration,
        quick=quick,
    )
    return "error"


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"received {_signal_name(signum)}")


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM/SIGHUP like Ctrl-C, so workers (own sessions) are not left orphaned."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    names = [n for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]
    old = {
        sig: signal.signal(sig, _raise_interrupt) for sig in map(signal.Signals.__getitem__, names)
    }
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the worker and everything it started (its own process group)."""
    if os.name != "posix":
        proc.kill()
        proc.wait()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 64 * 1024))
            text = f.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"(no output available: {exc})"
    return "\n".join(text.splitlines()[-lines:]) or "(no output)"


def _error_line(result_json: Path) -> str:
    """The most telling line of an error result: a traceback's last line, else the first."""
    try:
        error = json.loads(result_json.read_text(encoding="utf-8"))["error"] or ""
    except (OSError, ValueError, KeyError, TypeError):
        return "result.json unreadable"
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1] if lines[0].startswith("Traceback") else lines[0]
    return line if len(line) <= 100 else line[:99] + "…"


def _print_summary(
    console: Console, outcomes: list[tuple[str, str, float]], out: Path, index: Path
) -> None:
    table = Table("Experiment", "Status", "Duration", title="iclr26 reproduce")
    table.add_column("Report", overflow="fold")
    table.add_column("Note", overflow="fold")
    for name, status, duration in outcomes:
        table.add_row(
            Text(name),
            Text(status, style=_STYLES[status]),
            f"{duration:.1f} s",
            Text(str(out / name / "report.md")),
            Text(_error_line(out / name / "result.json") if status == "error" else ""),
        )
    console.print(table)
    counts = {s: sum(st == s for _, st, _ in outcomes) for s in _STYLES}
    console.print(
        Text(
            f"{counts['held']} held, {counts['not held']} not held, {counts['error']} error. "
            f"Index: {index}"
        )
    )
