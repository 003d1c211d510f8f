"""Small helpers for the test suites of the experiment packages."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

__all__ = [
    "DDP_CPU_ARGS",
    "MainRun",
    "assert_cli_help",
    "assert_mutation_detected",
    "assert_one_line_error",
    "assert_portable_close",
    "console_script",
    "help_commands",
    "lightning_logs_to_current_stderr",
    "only_file",
    "relative_error",
    "run_console_script",
    "run_ddp",
    "run_main",
    "shipped_configs",
]

#: Trainer options of a two-process DDP run on the CPU (gloo): what the multi-device tests add
#: to a package's tiny ``fit``.
DDP_CPU_ARGS = (
    "--trainer.strategy",
    "ddp",
    "--trainer.devices",
    "2",
    "--trainer.accelerator",
    "cpu",
)


@dataclass(frozen=True)
class MainRun:
    """What :func:`run_main` saw: the exit code (0 when ``main`` returned ``None``), stdout,
    stderr."""

    code: int | str | None
    out: str
    err: str


def run_main(
    main: Callable[[list[str]], Any],
    args: Sequence[str],
    capsys: Any,
    *,
    cwd: str | os.PathLike[str] | None = None,
) -> MainRun:
    """Run ``main(list(args))`` in-process (in ``cwd`` if given, restored afterwards) and return
    its exit code and captured output. A ``SystemExit`` becomes the code; other exceptions
    propagate. ``capsys``: pytest's fixture; what was printed before is discarded."""
    lightning_logs_to_current_stderr()
    capsys.readouterr()
    with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
        try:
            result = main(list(args))
        except SystemExit as exc:
            code = exc.code
        else:
            code = 0 if result is None else result
    captured = capsys.readouterr()
    return MainRun(code, captured.out, captured.err)


def console_script(name: str) -> Path:
    """The path of the installed console script ``name`` next to this interpreter (the venv's
    ``bin/``); ``FileNotFoundError`` when it is not installed."""
    folder = Path(sys.executable).parent
    for candidate in (folder / name, folder / f"{name}.exe"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"console script {name!r} is not installed in {folder}")


def run_console_script(
    name: str,
    args: Sequence[str],
    cwd: str | os.PathLike[str],
    *,
    timeout: float = 300,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the console script ``name`` with ``args`` in ``cwd`` as a user would (a fresh
    process, so Lightning's ``ddp`` can re-run its command line for ranks > 0). One torch thread
    per process unless ``env`` says otherwise; returns the completed process (text output)."""
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(
        [str(console_script(name)), *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_ddp(
    name: str,
    args: Sequence[str],
    cwd: str | os.PathLike[str],
    *,
    timeout: float = 300,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the console script ``name`` with ``args`` plus :data:`DDP_CPU_ARGS` (two processes,
    gloo) through :func:`run_console_script`, and assert what every package's DDP test needs:
    exit status 0, Lightning started two processes, and no "sync_dist" warning (epoch-level
    metrics logged without reduction over the ranks). Returns the completed process for the
    package's own checks (steps, files written by rank 0 alone: :func:`only_file`)."""
    proc = run_console_script(name, [*args, *DDP_CPU_ARGS], cwd, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Starting with 2 processes" in proc.stderr, proc.stderr[-3000:]
    assert "sync_dist" not in proc.stderr, proc.stderr[-3000:]
    return proc


def only_file(root: str | os.PathLike[str], pattern: str) -> Path:
    """The one file under ``root`` (recursively) whose name matches ``pattern``; fails when there
    are none or several (e.g. ``config*.yaml`` after DDP: rank 1 must not write a second one)."""
    found = sorted(p for p in Path(root).rglob(pattern) if p.is_file())
    assert len(found) == 1, f"expected one {pattern} under {root}, found {found}"
    return found[0]


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


def help_commands(help_text: str) -> list[str]:
    """The subcommand names an argparse ``--help`` lists under its ``COMMAND`` argument, in
    order (e.g. ``["fit", "validate", "synth", "configs"]``): what a help test should compare,
    rather than searching the whole text for a word such as "test"."""
    lines = help_text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "COMMAND") + 1
    except StopIteration:
        raise AssertionError(f"no COMMAND list in the help text:\n{help_text}") from None
    names = []
    for line in lines[start:]:
        if line and not line.startswith(" "):
            break  # the next section ("options:")
        if line.startswith("    ") and not line.startswith("     "):
            names.append(line.split()[0])
    return names


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


# ------------------------------------------------------------------ stored outputs, any CPU


def _as_float64(value: Any) -> Any:
    import numpy as np

    if hasattr(value, "detach"):  # a torch tensor, without importing torch here
        value = value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=np.float64)


def relative_error(actual: Any, expected: Any) -> float:
    """``max |actual - expected| / max |expected|``: the largest deviation scaled by the
    magnitude of the stored values (one scale for the whole array, so entries near zero do not
    blow up). Arrays (NumPy, torch, nested lists) of the same shape; a stored array of zeros is
    compared absolutely. Float32 kernels differ between CPUs (ATen's ISA dispatch, MKL/oneDNN
    paths, reduction order), so stored outputs are compared by this scaled error, never by a
    fixed ``atol`` on values of any size."""
    import numpy as np

    a, e = _as_float64(actual), _as_float64(expected)
    if a.shape != e.shape:
        raise AssertionError(f"shape {a.shape} differs from the stored {e.shape}")
    if a.size == 0:
        return 0.0
    if not (np.isfinite(a).all() and np.isfinite(e).all()):
        same = np.array_equal(a, e, equal_nan=True)
        return 0.0 if same else float("inf")
    scale = float(np.abs(e).max())
    return float(np.abs(a - e).max() / (scale if scale > 0 else 1.0))


def assert_portable_close(actual: Any, expected: Any, *, tol: float, what: str = "") -> float:
    """Assert ``relative_error(actual, expected) <= tol`` and return the error.

    ``tol`` is a stated margin above the largest difference measured across CPUs
    (``ATEN_CPU_CAPABILITY=default|avx2|avx512``, ``MKL_CBWR=COMPATIBLE``); say in the test which
    spread it covers and pair it with :func:`assert_mutation_detected`."""
    err = relative_error(actual, expected)
    label = f"{what}: " if what else ""
    assert err <= tol, f"{label}relative error {err:.3g} > tolerance {tol:.3g}"
    return err


def assert_mutation_detected(
    mutated: Any, expected: Any, *, tol: float, factor: float = 10.0, what: str = ""
) -> float:
    """Assert the output of a mutated computation (inputs shuffled, a weight zeroed, a formula
    changed) lies at least ``factor`` times the tolerance away from the stored one: the
    tolerance of :func:`assert_portable_close` still catches the defect it guards against.
    Returns the mutation's relative error."""
    err = relative_error(mutated, expected)
    label = f"{what}: " if what else ""
    assert err >= factor * tol, (
        f"{label}the mutation moves the output by {err:.3g}, less than {factor:g} x the "
        f"tolerance {tol:.3g}: the tolerance would hide it"
    )
    return err
