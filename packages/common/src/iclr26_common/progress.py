"""Progress for any command that can run longer than about 10 s: one helper for the workspace.

:func:`progress` wraps an iterable: on a terminal (stderr) a rich progress bar with done/total,
elapsed time and an estimate of the time left; otherwise plain lines: ``DESCRIPTION: 0/10`` when
it starts (a user sees at once what runs), then ``DESCRIPTION: 3/10, 12 s elapsed, about 28 s
left`` at most every ``every_s`` seconds, and one at the end; nothing with
``quiet`` (the commands' ``--quiet``). Output goes to stderr so stdout stays the command's result.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any, TypeVar

__all__ = [
    "PLAIN_EVERY_S",
    "QUIET_HELP",
    "add_quiet_option",
    "format_duration",
    "format_eta",
    "progress",
]

T = TypeVar("T")

#: Seconds between two plain progress lines (not a terminal).
PLAIN_EVERY_S = 5.0
#: The one help text of every command's ``--quiet``.
QUIET_HELP = "no progress lines on stderr"


def add_quiet_option(parser: Any, *, also: str = "") -> None:
    """Add ``--quiet`` (:data:`QUIET_HELP`; ``also``: what else it silences, e.g. ``"no HU
    window line"``) to an argparse or jsonargparse ``parser``: the commands pass it on as
    :func:`progress`'s ``quiet``."""
    help_text = QUIET_HELP + (f" {also}" if also.startswith("(") else f"; {also}" if also else "")
    parser.add_argument("--quiet", action="store_true", help=help_text)


def format_duration(seconds: float | None, *, decimals: int = 0) -> str:
    """A duration as people read it: ``"42 s"`` (``"42.3 s"`` with ``decimals=1``),
    ``"3 min 05 s"``, ``"1 h 02 min"``; ``"?"`` when ``seconds`` is not a finite number.

    The one duration format of the workspace: progress lines and ETAs (whole seconds), reports
    and the index (``decimals=1``, :mod:`iclr26_common.report`). A negative value counts as 0;
    minutes and hours are whole (seconds beyond them are dropped)."""
    if not isinstance(seconds, int | float) or not math.isfinite(seconds):
        return "?"
    value = max(0.0, float(seconds))
    shown = round(value, decimals)
    if shown < 60:
        return f"{shown:.{decimals}f} s"
    whole = round(value) if not decimals else max(60, int(value))
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


#: The name progress code has used: :func:`format_duration` in whole seconds.
format_eta = format_duration


def _plain(
    items: Iterable[T],
    total: int | None,
    description: str,
    stream: IO[str],
    every_s: float,
    after_s: float | None = None,
) -> Iterator[T]:
    start = last = time.monotonic()
    done = 0
    if after_s is None:
        start_line = f"{description}: 0" + (f"/{total}" if total is not None else "")
        print(start_line, file=stream, flush=True)

    def line() -> str:
        elapsed = time.monotonic() - start
        text = f"{description}: {done}" + (f"/{total}" if total is not None else "")
        text += f", {format_eta(elapsed)} elapsed"
        if total and 0 < done < total:
            text += f", about {format_eta(elapsed / done * (total - done))} left"
        return text

    for item in items:
        yield item
        done += 1
        now = time.monotonic()
        shown = after_s is None or now - start >= after_s
        if shown and now - last >= every_s and (total is None or done < total):
            print(line(), file=stream, flush=True)
            last = now
    if after_s is None or time.monotonic() - start >= after_s:
        print(
            line() + (" (done)" if total is None or done >= total else ""), file=stream, flush=True
        )


def progress(
    items: Iterable[T],
    *,
    description: str,
    total: int | None = None,
    quiet: bool = False,
    stream: IO[str] | None = None,
    every_s: float = PLAIN_EVERY_S,
    after_s: float | None = None,
) -> Iterator[T]:
    """Yield ``items`` while showing progress on ``stream`` (stderr by default): a rich bar on
    a terminal, plain lines otherwise, nothing when ``quiet``. ``total`` defaults to
    ``len(items)`` when it has one. ``after_s``: plain lines on a terminal too, and none before
    that many seconds have passed, the start and end lines included (a short inner loop under
    another progress display stays silent: rf-matid's per-cell epochs)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    if quiet:
        yield from items
        return
    stream = sys.stderr if stream is None else stream
    if after_s is not None or not stream.isatty():
        yield from _plain(items, total, description, stream, every_s, after_s)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = [
        TextColumn(description),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=Console(file=stream), transient=False) as bar:
        task = bar.add_task(description, total=total)
        for item in items:
            yield item
            bar.advance(task)
