"""The ``iclr26`` command: list registered experiments and reproduce them in subprocesses.

Neither subcommand imports an experiment's package in this process: ``list`` asks a worker
subprocess (``--describe``) and ``reproduce`` runs each experiment in its own worker.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from iclr26_common import __version__, registry
from iclr26_common.registry import BUDGET_S
from iclr26_common.report import read_result, write_index
from iclr26_common.runner import Outcome, Runner, available_cores, new_run_id

__all__ = ["main"]

_STYLES = {"held": "green", "not held": "yellow", "error": "bold red"}
DESCRIBE_TIMEOUT_S = 300.0  # for one `list` subprocess importing the packages


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
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
    parser = argparse.ArgumentParser(
        prog="iclr26", description="Reproduce ICLR 2026 claims at miniature scale."
    )
    parser.add_argument("--version", action="version", version=f"iclr26-common {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("list", help="list registered experiments", description="List experiments.")
    rep = sub.add_parser(
        "reproduce",
        help="run experiments, each in its own subprocess, and write reports",
        description="Run experiments (default: all), each isolated in a worker subprocess; write "
        "OUT/NAME/report.md + result.json + log.txt and OUT/index.md. Budget per experiment on 2 "
        f"CPU cores, imports included: full {BUDGET_S['full']:g} s, --quick "
        f"{BUDGET_S['quick']:g} s.",
    )
    rep.add_argument("names", nargs="*", metavar="NAME", help="experiments to run (default: all)")
    rep.add_argument("--quick", action="store_true", help="smaller, faster runs")
    rep.add_argument("--out", type=Path, default=Path("reports"), help="reports directory")
    rep.add_argument(
        "-j",
        "--jobs",
        type=_positive_int,
        default=1,
        metavar="N",
        help="experiments run at once (default 1); each worker gets max(1, cores // N) threads",
    )
    rep.add_argument(
        "--resume",
        action="store_true",
        help="skip experiments whose held / not held result is from the same distribution "
        "version and mode; rerun errored, missing or other-version ones",
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
        return _list(console)
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


def _list(console: Console) -> int:
    """Print name, paper and claim of every experiment; 1 if any failed to load."""
    names = list(registry.entry_point_info())
    if not names:
        console.print(
            f"No experiments registered (entry point group {registry.ENTRY_POINT_GROUP})."
        )
        return 0
    found = describe_isolated(names)
    table = Table("Experiment", "Paper", "Claim", show_lines=True)
    errors = 0
    for name in names:
        record = found[name]
        if "error" in record:
            errors += 1
            table.add_row(Text(name), Text("load error", style="bold red"), Text(record["error"]))
        else:
            table.add_row(Text(name, style="bold"), Text(record["paper"]), Text(record["claim"]))
    console.print(table)
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


def _reproduce(console: Console, args: argparse.Namespace) -> int:
    found = registry.entry_point_info()  # metadata only: nothing is imported here
    selected = list(dict.fromkeys(args.names)) or list(found)
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
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    run_id = new_run_id()
    order = {name: i for i, name in enumerate(selected, 1)}
    total = len(selected)
    live = console.is_terminal
    lock = threading.Lock()

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

        def on_start(name: str) -> None:
            with lock:
                progress.console.print(
                    Text(f"[{order[name]}/{total}] {name}: running (log: {out / name}.log)")
                )

        def on_done(outcome: Outcome) -> None:
            with lock:
                line = Text(f"[{order[outcome.name]}/{total}] {outcome.name}: ")
                line.append(outcome.status, style=_STYLES[outcome.status])
                line.append(f" ({outcome.seconds:.1f} s)")
                if outcome.note:
                    line.append(f" — {outcome.note}")
                progress.console.print(line)
                progress.advance(task)

        runner = Runner(
            out,
            quick=args.quick,
            jobs=args.jobs,
            timeout=args.timeout,
            run_id=run_id,
            on_start=on_start,
            on_done=on_done,
        )
        console.print(
            Text(
                f"{total} experiment(s), {args.jobs} at a time, {runner.threads} thread(s) each "
                f"({available_cores()} cores); {'quick' if args.quick else 'full'} mode; "
                f"reports in {out}"
            )
        )
        outcomes = runner.run(selected, resume=args.resume)
        if runner.interrupted:
            progress.console.print(Text("Interrupted: remaining experiments skipped.", "red"))

    index = write_index(out, run_id=run_id)
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
    budget = BUDGET_S["quick" if quick else "full"]
    table = Table("Experiment", "Status", "Claims held", "Wall time", title="iclr26 reproduce")
    table.add_column("Report", overflow="fold")
    table.add_column("Note", overflow="fold")
    over: list[str] = []
    for outcome in outcomes:
        data = read_result(out / outcome.name / "result.json")
        claims = data["claims"]
        held = f"{sum(c.get('verdict') == 'held' for c in claims)}/{len(claims)}" if claims else "—"
        wall = data.get("wall_s") if not outcome.kept_earlier else None
        wall_text = f"{wall:.1f} s" if isinstance(wall, int | float) else "?"
        if isinstance(wall, int | float) and wall > budget:
            wall_text += " (over budget)"
            over.append(outcome.name)
        note = outcome.note
        if outcome.status == "error" and not outcome.kept_earlier:
            note = _error_line(data) or note
        table.add_row(
            Text(outcome.name),
            Text(outcome.status, style=_STYLES[outcome.status]),
            held,
            wall_text,
            Text(str(out / outcome.name / "report.md")),
            Text(note),
        )
    console.print(table)
    counts = {s: sum(o.status == s for o in outcomes) for s in _STYLES}
    console.print(
        Text(
            f"{counts['held']} held, {counts['not held']} not held, {counts['error']} error. "
            f"Index: {index}"
        )
    )
    if over:
        console.print(
            Text(
                f"Over the {budget:g} s {'quick' if quick else 'full'} budget: {', '.join(over)}",
                style="yellow",
            )
        )
