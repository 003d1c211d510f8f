"""The ``iclr26`` command: list registered experiments and reproduce them in subprocesses.

Neither subcommand imports an experiment's package in this process: ``list`` asks a worker
subprocess (``--describe``) and ``reproduce`` runs each experiment in its own worker, packed onto
the cores by what each declares (:mod:`iclr26_common.schedule`), with a progress bar (plain lines
when stdout is not a terminal) that shows done/total, the running names, the elapsed time and an
ETA from expected walls. Bad input
(unknown name, ``--out`` a file, a folder another run holds) is one stderr line, exit status 2.
Names are printed in full, whatever the terminal width.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import time
from pathlib import Path
from typing import NoReturn

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from iclr26_common import __version__, registry
from iclr26_common.cli_support import ArgumentParser, number_type, positive_int
from iclr26_common.index import write_index
from iclr26_common.outlock import OutputLock, OutputLocked
from iclr26_common.progress import format_duration
from iclr26_common.registry import BUDGET_S
from iclr26_common.report import mode_dir, read_result
from iclr26_common.runner import (
    DESCRIBE_TIMEOUT_S,
    Outcome,
    Runner,
    Snapshot,
    StopFlag,
    describe_isolated,
    new_run_id,
)
from iclr26_common.schedule import Plan

__all__ = ["DESCRIBE_TIMEOUT_S", "describe_isolated", "main"]

_STYLES = {"held": "green", "not held": "yellow", "inconclusive": "magenta", "error": "bold red"}


def _user_error(prog: str, message: str) -> NoReturn:
    """One line on stderr, exit status 2 (the workspace's contract for bad input)."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


#: ``--timeout``: a finite number of seconds > 0.
_seconds = number_type(float, "a number of seconds > 0", lambda v: v > 0, name="seconds")


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
        "or quick. One run at a time per OUT/MODE (a lock). Experiments are packed onto the "
        "cores by the threads each declares, and a progress line shows done/total, the running "
        "names, the elapsed time and an ETA from the walls of earlier results. Budget per "
        f"experiment on 2 CPU cores, imports included: full {BUDGET_S['full']:g} s, --quick "
        f"{BUDGET_S['quick']:g} s.",
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
        type=positive_int,
        default=None,
        metavar="N",
        help="run N experiments at once, each with cores // min(N, experiments to run) torch "
        "threads, not pinned (default: packed by what each experiment declares: one-thread "
        "ones side by side, each pinned to a core of its own; one that uses every core "
        "alone; one that times something first among the others, on cores it shares with "
        "nothing; longest expected first, from the walls of earlier results). With -j an "
        "experiment that times something runs alone; your OMP_NUM_THREADS, when set, is "
        "every worker's thread count",
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
        type=_seconds,
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


def _declared_text(record: dict) -> str:
    """``threads`` / ``timing`` of a ``--describe`` record in words."""
    threads = record.get("threads", 1)
    text = "every core it is given" if threads == "all" else f"{threads} thread(s)"
    timed = ", on cores of its own (times something; alone with -j)"
    return text + (timed if record.get("timing") else "")


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
            console.print(Text(f"    runs: {_declared_text(record)}"), soft_wrap=True)
    if errors:
        console.print(Text(f"{errors} experiment(s) failed to load.", style="bold red"))
    return 1 if errors else 0


# ---------------------------------------------------------------------------- reproduce


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


class _EtaColumn(ProgressColumn):
    """``ETA 12 min 05 s``: the runner's estimate at its last event, counted down since."""

    def render(self, task: Task) -> Text:
        eta, at = task.fields.get("eta_s"), task.fields.get("eta_at")
        if eta is None or at is None:
            return Text("ETA ?")
        return Text(f"ETA {format_duration(max(0.0, eta - (time.monotonic() - at)))}")


def _progress_line(snapshot: Snapshot) -> str:
    """The plain progress line (stdout not a terminal), after each start and finish."""
    running = ", ".join(snapshot.running) or "none"
    return (
        f"  progress: {snapshot.done}/{snapshot.total} done; running: {running}; "
        f"{format_duration(snapshot.elapsed_s)} elapsed, about "
        f"{format_duration(snapshot.eta_s)} left"
    )


def _plan_line(runner: Runner, plan: Plan, total: int, resumed: int, mode: str, out: Path) -> str:
    to_run = len(plan.jobs)
    alone = [job for job in plan.jobs if job.exclusive]
    if plan.packed:
        how = f"packed by declared threads on {plan.cores} cores"
        if to_run:
            how += f" ({len(alone)} alone, {to_run - len(alone)} side by side)"
    else:
        threads = plan.jobs[0].threads if plan.jobs else 1
        how = f"{plan.capacity} at a time, {threads} thread(s) each ({plan.cores} cores)"
        if alone:
            how += f", {len(alone)} alone (timing)"
    if runner.user_env:
        how += f", OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} from your environment"
    sources = {}
    for job in plan.jobs:
        sources[job.expected_from] = sources.get(job.expected_from, 0) + 1
    walls = ", ".join(f"{n} {where}" for where, n in sorted(sources.items()))
    expected = f"about {format_duration(runner.expected_s)} expected (walls: {walls})"
    return (
        f"{total} experiment(s) ({to_run} to run, {resumed} resumed), {how}; {mode} mode; "
        f"{expected if to_run else 'nothing to run'}; reports in {out}"
    )


def _run_locked(
    console: Console,
    args: argparse.Namespace,
    selected: list[str],
    registered: list[str],
    out: Path,
    run_id: str,
) -> int:
    mode = "quick" if args.quick else "full"
    # Until the index is written, SIGINT / SIGTERM / SIGHUP only set this flag: the runner
    # stops its workers, and the index and summary are still written (exit status 130).
    with StopFlag().catching() as stop:
        outcomes, runner = _run_with_progress(console, args, selected, out, run_id, stop)
        index = write_index(out, run_id=run_id, registered=registered, mode=mode)
        _print_summary(console, outcomes, out, index, args.quick)
    if runner.interrupted or stop:
        return 130
    return 1 if any(o.status == "error" for o in outcomes) else 0


def _run_with_progress(
    console: Console,
    args: argparse.Namespace,
    selected: list[str],
    out: Path,
    run_id: str,
    stop: StopFlag,
) -> tuple[list[Outcome], Runner]:
    """Run ``selected`` under a progress bar (or plain progress lines when not a terminal)."""
    order = {name: i for i, name in enumerate(selected, 1)}
    total = len(selected)
    live = console.is_terminal
    mode = "quick" if args.quick else "full"
    with (
        Progress(
            TextColumn("reproduce"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            _EtaColumn(),
            TextColumn("{task.fields[running]}"),
            console=console,
            disable=not live,
        ) as progress,
    ):
        task = progress.add_task("", total=total, running="", eta_s=None, eta_at=None)

        def say(text: Text | str) -> None:
            progress.console.print(Text(text) if isinstance(text, str) else text, soft_wrap=True)

        def on_start(name: str) -> None:
            say(f"[{order[name]}/{total}] {name}: running (log: {out / name}.log)")

        def on_done(outcome: Outcome) -> None:
            line = Text(f"[{order[outcome.name]}/{total}] {outcome.name}: ")
            line.append(outcome.status, style=_STYLES[outcome.status])
            line.append(f" ({outcome.seconds:.1f} s)")
            if outcome.note:
                line.append(f" — {outcome.note}")
            say(line)
            if outcome.resumed:
                progress.advance(task)

        def on_progress(snapshot: Snapshot) -> None:
            progress.update(
                task,
                completed=snapshot.done,
                running=", ".join(snapshot.running),
                eta_s=snapshot.eta_s,
                eta_at=time.monotonic(),
            )
            if not live:
                say(_progress_line(snapshot))

        def on_plan(plan: Plan, resumed: int) -> None:
            say(_plan_line(runner, plan, total, resumed, mode, out))
            progress.update(task, eta_s=runner.expected_s, eta_at=time.monotonic())

        runner = Runner(
            out,
            quick=args.quick,
            jobs=args.jobs,
            timeout=args.timeout,
            run_id=run_id,
            on_start=on_start,
            on_done=on_done,
            on_plan=on_plan,
            on_progress=on_progress,
            stop=stop,
        )
        outcomes = runner.run(selected, resume=args.resume)
        if runner.interrupted:
            say(Text("Interrupted: remaining experiments skipped.", "red"))
    return outcomes, runner


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
