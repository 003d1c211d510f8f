"""Small helpers for the test suites of the experiment packages."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator, Sequence
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

__all__ = [
    "assert_cli_help",
    "assert_one_line_error",
    "lightning_logs_to_current_stderr",
    "shipped_configs",
]


def assert_cli_help(main: Callable[[list[str]], Any], args: Sequence[str] = ("--help",)) -> str:
    """Run ``main(list(args))`` in-process; assert it exits with status 0 after printing usage.

    Returns the captured stdout for further assertions.
    """
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code
        else:
            raise AssertionError(f"main({list(args)!r}) returned instead of raising SystemExit")
    out = buf.getvalue()
    assert code in (0, None), f"main({list(args)!r}) exited with {code!r}; output:\n{out}"
    assert "usage" in out.lower(), f"no usage text on stdout for {list(args)!r}:\n{out!r}"
    return out


def assert_one_line_error(
    main: Callable[[list[str]], Any],
    args: Sequence[str],
    capsys: Any,
    *,
    prog: str | None = None,
    skip: Callable[[str], bool] | None = None,
    drop_earlier: bool = False,
) -> str:
    """Run ``main(list(args))`` in-process and assert the CLI contract for bad input: exit status
    2, exactly one non-blank stderr line and no traceback. Returns that line.

    ``capsys`` is pytest's fixture (anything with ``readouterr()``). ``prog``: the line must start
    with it. ``skip(line)``: lines to leave out of the count (a library's start-up chatter).
    ``drop_earlier``: discard what the test printed before this call. Lightning's log handlers
    are pointed at the current stderr first (:func:`lightning_logs_to_current_stderr`).
    """
    lightning_logs_to_current_stderr()
    if drop_earlier:
        capsys.readouterr()
    try:
        main(list(args))
    except SystemExit as exc:
        code = exc.code
    else:
        raise AssertionError(f"main({list(args)!r}) returned instead of exiting with status 2")
    err = capsys.readouterr().err
    assert code == 2, f"main({list(args)!r}) exited with {code!r}; stderr:\n{err}"
    lines = [line for line in err.splitlines() if line.strip() and not (skip and skip(line))]
    assert len(lines) == 1 and "Traceback" not in err, err
    if prog is not None:
        assert lines[0].startswith(prog), lines[0]
    return lines[0]


def lightning_logs_to_current_stderr() -> None:
    """Point Lightning's log handlers at the current ``sys.stderr``.

    Lightning adds a ``StreamHandler`` bound to ``sys.stderr`` when it is first imported. Under
    pytest that is the capture of whichever test imported it first, closed once that test ends,
    so a later test that logs through Lightning ("Seed set to 0") gets "I/O operation on closed
    file" noise on its stderr. Call this at the start of a test that inspects stderr.
    """
    import logging
    import sys

    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "lightning_fabric"):
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.stream = sys.stderr  # setStream() would flush the closed stream


def _walk(node: Traversable) -> Iterator[Traversable]:
    for child in node.iterdir():
        if child.is_dir():
            yield from _walk(child)
        else:
            yield child


def shipped_configs(package: str) -> list[Path]:
    """The ``*.yaml`` files under the importable ``package``'s ``configs/`` folder, recursively.

    Raises ``FileNotFoundError`` when the folder is missing or holds no YAML file.
    """
    root = files(package) / "configs"
    if not root.is_dir():
        raise FileNotFoundError(f"package {package!r} has no configs/ folder")
    found = sorted(
        Path(str(node)) for node in _walk(root) if node.is_file() and node.name.endswith(".yaml")
    )
    if not found:
        raise FileNotFoundError(f"package {package!r} ships no configs/**/*.yaml")
    return found
