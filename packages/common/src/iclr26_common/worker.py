"""Run ONE registered experiment in this process and write its result.

Usage: ``python -m iclr26_common.worker NAME --out DIR [--quick]``. The experiment's files go to
``DIR/NAME/`` (emptied first). Exit status 0 when a held / not held result was written, 1 when
an error result was written. ``iclr26 reproduce`` runs each experiment through this module in its
own subprocess.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

from iclr26_common.registry import Experiment, LoadError, Result, discover, is_valid_name
from iclr26_common.report import write_result

__all__ = ["fresh_dir", "main", "placeholder", "run_experiment"]


def fresh_dir(path: Path) -> Path:
    """Remove ``path`` (file, link or directory tree) if present and create it empty."""
    path = Path(path)
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def placeholder(name: str) -> Experiment:
    """A stand-in Experiment for writing an error result when the real one could not load."""

    def _unavailable(quick: bool, out_dir: Path) -> Result:
        raise RuntimeError(f"experiment {name!r} could not be loaded")

    return Experiment(
        name=name,
        paper="unknown (experiment failed to load)",
        claim="unknown (experiment failed to load)",
        run=_unavailable,
    )


def run_experiment(experiment: Experiment | LoadError, out_dir: Path, quick: bool) -> int:
    """Run ``experiment`` with ``out_dir`` as its (fresh) directory; write the result; 0/1."""
    out_dir = fresh_dir(out_dir)
    if isinstance(experiment, LoadError):
        error = experiment.message + (f"\n\n{experiment.details}" if experiment.details else "")
        write_result(
            out_dir,
            placeholder(experiment.name),
            None,
            status="error",
            error=error,
            duration_s=0.0,
            quick=quick,
        )
        return 1

    start = time.perf_counter()
    result: object = None
    error: str | None = None
    try:
        result = experiment.run(quick, out_dir)
    except BaseException:  # any failure, even SystemExit, becomes an error result
        error = traceback.format_exc()
    else:
        if not isinstance(result, Result):
            error = f"run() returned {type(result).__name__}, expected iclr26_common.Result"
    duration = time.perf_counter() - start

    if error is None:
        assert isinstance(result, Result)
        try:
            write_result(
                out_dir,
                experiment,
                result,
                status=result.verdict,
                duration_s=duration,
                quick=quick,
            )
            return 0
        except Exception:
            error = (
                f"run() succeeded but its result could not be written:\n{traceback.format_exc()}"
            )
    write_result(
        out_dir, experiment, None, status="error", error=error, duration_s=duration, quick=quick
    )
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m iclr26_common.worker", description="Run one iclr26 experiment."
    )
    parser.add_argument("name", help="registered experiment name")
    parser.add_argument("--out", required=True, type=Path, help="reports directory")
    parser.add_argument("--quick", action="store_true", help="smaller, faster run")
    args = parser.parse_args(argv)
    if not is_valid_name(args.name):
        parser.error(f"invalid experiment name {args.name!r}")
    # Headless plotting unless the user chose a backend.
    os.environ.setdefault("MPLBACKEND", "Agg")
    experiment = discover([args.name])[args.name]
    out_dir = Path(args.out) / args.name
    code = run_experiment(experiment, out_dir, args.quick)
    print(f"[iclr26 worker] {args.name}: {'ok' if code == 0 else 'error'} -> {out_dir}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
