"""The ``iclr26`` command: list registered experiments and reproduce them in subprocesses.

Neither subcommand imports an experiment's package in this process: ``list`` asks a worker
subprocess (``--describe``) and ``reproduce`` runs each experiment in its own worker. Bad input
(unknown name, ``--out`` a file, a folder another run holds) is one stderr line, exit status 2.
Names are printed in full, whatever the terminal width.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import math
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from iclr26_common import __version__, registry
from iclr26_common.cli_support import ArgumentParser
from iclr26_common.index import write_index
from iclr26_common.outlock import OutputLock, OutputLocked
from iclr26_common.registry import BUDGET_S
from iclr26_common.report import mode_dir, read_result
from iclr26_common.runner import Outcome, Runner, available_cores, default_jobs, new_run_id

__all__ = ["main"]

_STYLES = {"held": "green", "not held": "yellow", "inconclusive": "magenta", "error": "bold red"}
DESCRIBE_TIMEOUT_S = 300.0  # for one `list` subprocess importing the packages


def _user_error(prog: str, message: str) -> NoReturn:
    """One line on stderr, exit status 2 (the workspace's contract for bad input)."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="iclr26", description="Reproduce ICLR 2026 claims at miniature scale."
    )
    parser.add_argument("--version", action="version", version=f"iclr26-common {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    lst = sub.add_parser(
        "list", help="list registered experiments", description="List experiments."
    )
    lst.add_argument(
        "--names", action="store_true", help="only the names, one per line (for scripts)"
    )
    rep = sub.add_parser(
        "reproduce",
        help="run experiments, each in its own subprocess, and write reports",
        description="Run experiments (default: all), each isolated in a worker subprocess; write "
        "OUT/MODE/NAME/report.md + result.json + log.txt and OUT/MODE/index.md, MODE being full "
        "or quick. One run at a time per OUT/MODE (a lock). Budget per experiment on 2 CPU "
        f"cores, imports included: full {BUDGET_S['full']:g} s, --quick {BUDGET_S['quick']:g} s.",
    )
    rep.add_argument("names", nargs="*", metavar="NAME", help="experiments to run (default: all)")
    rep.add_argument("--quick", action="store_true", help="smaller, faster runs")
    rep.add_argument(
        "--out",
        type=Path,
        default=Path("reports"),
        help="reports folder; results go to OUT/full or OUT/quick (default: reports)",
    )
    rep.add_argument(
        "-j",
        "--jobs",
        type=_positive_int,
        default=None,
        metavar="N",
        help="experiments run at once (default: 1 for full runs, which use both cores; 2 for "
        "--quick, 1 on a one-core machine); each worker gets cores // min(N, experiments to run) "
        "torch threads, or your OMP_NUM_THREADS when set",
    )
    rep.add_argument(
        "--resume",
        action="store_true",
        help="skip experiments whose held / not held / inconclusive result of this mode has the "
        "same source digest (the experiment package's imported files and configs, and the "
        "versions of iclr26-common, its distribution and torch); rerun the others",
    )
    rep.add_argument(
        "--wait",
        action="store_true",
        help="if another run is writing into OUT/MODE, wait for it instead of stopping",
    )
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
        return _list(console, names_only=args.names)
    return _reproduce(console, args)


# ---------------------------------------------------------------------------- list


def describe_isolated(names: list[str], timeout: float = DESCRIBE_TIMEOUT_S) -> dict[str, dict]:
    """name -> {"paper", "claim"} or {"error"}, loaded in worker subprocesses.

    One subprocess describes the names in turn; if it dies (a package that aborts at import),
    the name it was on gets an error and a fresh subprocess continues with the rest.
    """
    found: dict[str, dict] = {}
    remaining = list(names)
    while remaining:
        cmd = [sys.executable, "-m", "iclr26_common.worker", "--describe", *remaining]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
            )
            stdout, code = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout or ""
            stdout = out.decode(errors="replace") if isinstance(out, bytes) else out
            code = f"timeout after {timeout:g} s"
        for line in stdout.splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                record = json.loads(line)
                found[record["name"]] = record
        remaining = [n for n in remaining if n not in found]
        if remaining:  # the process died while loading remaining[0]
            why = code if isinstance(code, str) else f"exit status {code}"
            if isinstance(code, int) and code < 0:
                why = f"killed by {signal.Signals(-code).name}"
            found[remaining[0]] = {"name": remaining[0], "error": f"import crashed ({why})"}
            remaining = remaining[1:]
    return found


def _list(console: Console, names_only: bool = False) -> int:
    """Print name, paper and claim of every experiment (full names, no wrapping or truncation);
    1 if any failed to load. ``names_only``: one name per line and nothing else (no import)."""
    valid = list(registry.entry_point_info())  # metadata only
    if names_only:
        for name in valid:
            print(name)
        return 0
    invalid = [n for n in registry.find_entry_points() if not registry.is_valid_name(n)]
    if not valid and not invalid:
        console.print(
            f"No experiments registered (entry point group {registry.ENTRY_POINT_GROUP})."
        )
        return 0
    found = describe_isolated(valid)
    errors = 0
    for name in [*valid, *invalid]:
        record = found.get(name, {"error": f"invalid experiment name {name!r}"})
        console.print(Text(name, style="bold"), soft_wrap=True)
        if "error" in record:
            errors += 1
            line = Text("    load error: ", style="bold red").append(record["error"], style="")
            console.print(line, soft_wrap=True)
        else:
            console.print(Text(f"    paper: {record['paper']}"), soft_wrap=True)
            console.print(Text(f"    claim: {record['claim']}"), soft_wrap=True)
    if errors:
        console.print(Text(f"{errors} experiment(s) failed to load.", style="bold red"))
    return 1 if errors else 0


# ---------------------------------------------------------------------------- reproduce


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")


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


def _check_names(names: list[str], found: dict) -> list[str]:
    selected = list(dict.fromkeys(names)) or list(found)
    unknown = [n for n in selected if n not in found]
    if unknown:
        close = [m for n in unknown for m in difflib.get_close_matches(n, list(found), 1)]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        _user_error(
            "iclr26 reproduce",
            f"unknown experiment(s): {', '.join(unknown)}{hint} (`iclr26 list --names` lists "
            f"the {len(found)} registered)",
        )
    return selected


def _reports_folder(out: Path, quick: bool) -> Path:
    """``OUT/full`` or ``OUT/quick``, created; a path that is not a folder is a user error."""
    folder = mode_dir(out, quick)
    for path in (out, folder):
        if path.exists() and not path.is_dir():
            _user_error("iclr26 reproduce", f"--out {out}: {path} is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _user_error("iclr26 reproduce", f"--out {out}: cannot create {folder}: {exc.strerror}")
    return folder.resolve()


def _reproduce(console: Console, args: argparse.Namespace) -> int:
    found = registry.entry_point_info()  # metadata only: nothing is imported here
    selected = _check_names(args.names, found)
    if not selected:
        console.print(
            f"No experiments registered (entry point group {registry.ENTRY_POINT_GROUP})."
        )
        return 0
    if args.jobs is None:
        args.jobs = default_jobs(args.quick)
    out = _reports_folder(args.out, args.quick)
    run_id = new_run_id()
    lock = OutputLock(out, run_id)
    try:
        lock.acquire(
            wait=args.wait,
            on_wait=lambda holder: console.print(
                Text(f"Waiting: {out} is in use by {holder}"), soft_wrap=True
            ),
        )
    except OutputLocked as exc:
        _user_error("iclr26 reproduce", str(exc))
    except KeyboardInterrupt:
        console.print(Text("Interrupted while waiting for the reports folder.", "red"))
        return 130
    try:
        return _run_locked(console, args, selected, list(found), out, run_id)
    finally:
        lock.release()


def _run_locked(
    console: Console,
    args: argparse.Namespace,
    selected: list[str],
    registered: list[str],
    out: Path,
    run_id: str,
) -> int:
    order = {name: i for i, name in enumerate(selected, 1)}
    total = len(selected)
    live = console.is_terminal
    lock = threading.Lock()
    mode = "quick" if args.quick else "full"

    with (
        _terminate_as_interrupt(),
        Progress(
            TextColumn("reproduce"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=not live,
        ) as progress,
    ):
        task = progress.add_task("", total=total)

        def say(text: Text) -> None:
            progress.console.print(text, soft_wrap=True)

        def on_start(name: str) -> None:
            with lock:
                say(Text(f"[{order[name]}/{total}] {name}: running (log: {out / name}.log)"))

        def on_done(outcome: Outcome) -> None:
            with lock:
                line = Text(f"[{order[outcome.name]}/{total}] {outcome.name}: ")
                line.append(outcome.status, style=_STYLES[outcome.status])
                line.append(f" ({outcome.seconds:.1f} s)")
                if outcome.note:
                    line.append(f" — {outcome.note}")
                say(line)
                progress.advance(task)

        def on_plan(to_run: int, resumed: int) -> None:
            threads = f"{runner.threads} thread(s) each"
            if runner.user_env:
                threads = f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} from your environment"
            say(
                Text(
                    f"{total} experiment(s) ({to_run} to run, {resumed} resumed), {args.jobs} "
                    f"at a time, {threads} ({available_cores()} cores); {mode} mode; "
                    f"reports in {out}"
                )
            )

        runner = Runner(
            out,
            quick=args.quick,
            jobs=args.jobs,
            timeout=args.timeout,
            run_id=run_id,
            on_start=on_start,
            on_done=on_done,
            on_plan=on_plan,
        )
        outcomes = runner.run(selected, resume=args.resume)
        if runner.interrupted:
            say(Text("Interrupted: remaining experiments skipped.", "red"))

    index = write_index(out, run_id=run_id, registered=registered, mode=mode)
    _print_summary(console, outcomes, out, index, args.quick)
    if runner.interrupted:
        return 130
    return 1 if any(o.status == "error" for o in outcomes) else 0


def _error_line(data: dict) -> str:
    """The most telling line of an error result: a traceback's last line, else the first."""
    lines = [line.strip() for line in (data.get("error") or "").splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1] if lines[0].startswith("Traceback") else lines[0]
    return line if len(line) <= 100 else line[:99] + "…"


def _print_summary(
    console: Console, outcomes: list[Outcome], out: Path, index: Path, quick: bool
) -> None:
    """One line per experiment with its full name (never truncated), then the counts."""
    budget = BUDGET_S["quick" if quick else "full"]
    width = max((len(o.name) for o in outcomes), default=0)
    over: list[str] = []
    console.print(Text(f"iclr26 reproduce ({'quick' if quick else 'full'} mode):"))
    for outcome in outcomes:
        data = read_result(out / outcome.name / "result.json")
        claims = data["claims"]
        held = sum(c.get("verdict") == "held" for c in claims if isinstance(c, dict))
        held_text = f"{held}/{len(claims)} held" if claims else "—"
        wall = data.get("wall_s") if not outcome.kept_earlier else None
        wall_text = f"{wall:.1f} s" if isinstance(wall, int | float) else "?"
        if isinstance(wall, int | float) and wall > budget:
            wall_text += " (over budget)"
            over.append(outcome.name)
        note = outcome.note
        if outcome.status == "error" and not outcome.kept_earlier:
            note = _error_line(data) or note
        line = Text("  ").append(f"{outcome.status:<12}", style=_STYLES[outcome.status])
        line.append(f" {outcome.name:<{width}}  {held_text:<9} {wall_text:>8}  ")
        line.append(str(out / outcome.name / "report.md"))
        if note:
            line.append(f"  — {note}")
        console.print(line, soft_wrap=True)
    counts = {s: sum(o.status == s for o in outcomes) for s in _STYLES}
    console.print(
        Text(", ".join(f"{counts[s]} {s}" for s in _STYLES) + f". Index: {index}"),
        soft_wrap=True,
    )
    if over:
        console.print(
            Text(
                f"Over the {budget:g} s {'quick' if quick else 'full'} budget: {', '.join(over)}",
                style="yellow",
            ),
            soft_wrap=True,
        )
