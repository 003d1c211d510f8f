"""Run ONE registered experiment in this process and write its result.

Usage::

    python -m iclr26_common.worker NAME --out REPORTS [--quick]   # writes REPORTS/NAME/
    python -m iclr26_common.worker NAME --dir DIR [--quick] [--run-id ID] [--started-at EPOCH]
                                        [--threads K] [--cpus 0,1]
    python -m iclr26_common.worker --describe NAME [NAME ...]     # JSON line per experiment

The experiment's files go to its directory (emptied first). Exit status 0 when a held / not held
/ inconclusive result was written, 1 when an error result was written. ``iclr26 reproduce`` runs each
experiment through this module in its own subprocess, so only the worker ever imports an
experiment's package; ``--describe`` is how ``iclr26 list`` reads paper and claim, and how
``iclr26 reproduce`` learns each experiment's declared ``threads`` and ``timing``, the same way.
``--cpus`` pins this process (and every thread and process it starts) to those CPUs before the
experiment is imported (Linux; ignored where the OS cannot).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from iclr26_common.device import describe_device, reset_usage, used_devices, used_threads
from iclr26_common.outlock import OutputLock, OutputLocked
from iclr26_common.registry import (
    Experiment,
    LoadError,
    Result,
    discover,
    entry_point_info,
    imported_sources,
    is_valid_name,
    source_digest,
)
from iclr26_common.report import mode_dir, nonfinite_claims, write_result

__all__ = [
    "META_FILE",
    "THREAD_ENV_VARS",
    "describe",
    "fresh_dir",
    "main",
    "pin",
    "placeholder",
    "run_experiment",
    "used_devices_and_threads",
]

# Written into the experiment's folder while it runs: paper and claim for an error result
# should the worker die without writing one (the parent never imports the experiment).
META_FILE = ".experiment.json"
# Thread-pool sizes read by torch (OpenMP), MKL, OpenBLAS and NumPy at import time.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def fresh_dir(path: Path) -> Path:
    """Remove ``path`` (file, link or directory tree) if present and create it empty."""
    path = Path(path)
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def placeholder(name: str, distribution: str | None = None) -> Experiment:
    """A stand-in Experiment for writing an error result when the real one could not load."""

    def _unavailable(quick: bool, out_dir: Path) -> Result:
        raise RuntimeError(f"experiment {name!r} could not be loaded")

    return Experiment(
        name=name,
        paper="unknown (experiment failed to load)",
        claim="unknown (experiment failed to load)",
        run=_unavailable,
        distribution=distribution,
    )


def _torch_cuda_initialised() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # a broken CUDA setup
        return False


def used_devices_and_threads() -> tuple[list[str], list[int] | None]:
    """What ``run()`` used, measured after it returned (provenance for ``result.json``).

    Devices: those recorded through :mod:`iclr26_common.device`; else the current CUDA device
    when the experiment initialised CUDA without recording it; else ``["cpu"]``. Threads: the
    counts recorded through ``torch_threads``; else ``torch.get_num_threads()`` now, if the
    experiment imported torch; else ``None`` (no torch work).
    """
    devices = used_devices()
    if not devices and _torch_cuda_initialised():
        with contextlib.suppress(Exception):
            devices = [describe_device("cuda")]
    threads = used_threads()
    torch = sys.modules.get("torch")
    if not threads and torch is not None:
        threads = [int(torch.get_num_threads())]
    return devices or ["cpu"], threads or None


def _apply_threads(threads: int | None) -> None:
    """Set torch's intra-op threads if the experiment's import brought torch in."""
    torch = sys.modules.get("torch")
    if torch is not None and threads is not None:
        torch.set_num_threads(threads)


def _source(module: str | None, distribution: str | None) -> dict[str, Any] | None:
    """``{"module", "files", "digest"}`` of what ran (see :func:`registry.source_digest`)."""
    if not module:
        return None
    try:
        files = imported_sources(module)
        digest = source_digest(module, files, distribution)
    except (OSError, ValueError, ImportError):
        return None
    return {"module": module, "files": files, "digest": digest}


def run_experiment(
    experiment: Experiment | LoadError,
    out_dir: Path,
    quick: bool,
    *,
    started_at: float | None = None,
    threads: int | None = None,
    run_id: str | None = None,
    distribution: str | None = None,
    module: str | None = None,
) -> int:
    """Run ``experiment`` with ``out_dir`` as its (fresh) directory; write the result; 0/1.

    ``started_at`` (epoch seconds, default now) is when the process started: the result's
    ``wall_s`` counts from it, imports included. ``module`` defines the Experiment (default:
    the module of its ``run``); its package's source digest is recorded for ``--resume``.
    A result whose claims measured a non-finite value is written as an error naming it.
    """
    started_at = time.time() if started_at is None else started_at
    out_dir = fresh_dir(out_dir)
    common = {"quick": quick, "run_id": run_id}
    if isinstance(experiment, LoadError):
        error = experiment.message + (f"\n\n{experiment.details}" if experiment.details else "")
        write_result(
            out_dir,
            placeholder(experiment.name, distribution),
            None,
            status="error",
            error=error,
            duration_s=0.0,
            wall_s=time.time() - started_at,
            **common,
        )
        return 1

    # Paper and claim for the parent, should this process die without writing a result.
    meta = {"name": experiment.name, "paper": experiment.paper, "claim": experiment.claim}
    (out_dir / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    _apply_threads(threads)
    reset_usage()
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
    devices, used_threads = used_devices_and_threads()
    module = module or getattr(experiment.run, "__module__", None)
    timing = {"duration_s": duration, "devices": devices, "threads": used_threads, **common}
    with contextlib.suppress(FileNotFoundError):
        (out_dir / META_FILE).unlink()

    kept: Result | None = None
    if error is None:
        assert isinstance(result, Result)
        bad = nonfinite_claims(result.claims)
        if bad:
            kept = result
            error = "non-finite measured value(s), a claim cannot be judged on them: " + ", ".join(
                bad
            )
    if error is None:
        assert isinstance(result, Result)
        try:
            write_result(
                out_dir,
                experiment,
                result,
                status=result.verdict,
                wall_s=time.time() - started_at,
                source=_source(module, experiment.distribution),
                **timing,
            )
            return 0
        except Exception:
            error = (
                f"run() succeeded but its result could not be written:\n{traceback.format_exc()}"
            )
    try:
        write_result(
            out_dir,
            experiment,
            kept,
            status="error",
            error=error,
            wall_s=time.time() - started_at,
            **timing,
        )
    except Exception:  # the kept result itself cannot be written: report without its numbers
        write_result(
            out_dir,
            experiment,
            None,
            status="error",
            error=f"{error}\n\n{traceback.format_exc()}",
            wall_s=time.time() - started_at,
            **timing,
        )
    return 1


def pin(cpus: list[int] | None) -> bool:
    """Run this process on ``cpus`` only (threads and processes started later inherit it);
    False where the OS does not support it or refuses (then nothing changes)."""
    if not cpus:
        return False
    try:
        os.sched_setaffinity(0, cpus)
    except (AttributeError, OSError, ValueError):
        return False
    return True


def _cpu_list(text: str) -> list[int]:
    try:
        cpus = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be CPU ids like 0,1, got {text!r}") from None
    if not cpus or min(cpus) < 0:
        raise argparse.ArgumentTypeError(f"must be CPU ids like 0,1, got {text!r}")
    return cpus


def describe(names: list[str]) -> int:
    """Print one JSON line per experiment (name, paper, claim, threads, timing; or error),
    flushing after each.

    A load that kills the process leaves the lines printed so far; the caller retries the rest.
    """
    for name in names:
        loaded = discover([name])[name]
        if isinstance(loaded, LoadError):
            record = {"name": name, "error": loaded.message}
        else:
            record = {
                "name": name,
                "paper": loaded.paper,
                "claim": loaded.claim,
                "threads": loaded.threads,
                "timing": loaded.timing,
            }
        print(json.dumps(record), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    started_at = time.time()
    parser = argparse.ArgumentParser(
        prog="python -m iclr26_common.worker", description="Run one iclr26 experiment."
    )
    parser.add_argument("names", nargs="+", metavar="NAME", help="registered experiment name")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="reports directory (writes OUT/NAME/)")
    where.add_argument("--dir", type=Path, help="the experiment's own output directory")
    parser.add_argument("--quick", action="store_true", help="smaller, faster run")
    parser.add_argument("--describe", action="store_true", help="print name/paper/claim as JSON")
    parser.add_argument("--run-id", default=None, help="id of the invoking reproduce run")
    parser.add_argument(
        "--started-at", type=float, default=None, help="process launch time (epoch seconds)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument(
        "--cpus", type=_cpu_list, default=None, help="run on these CPU ids only (e.g. 0,1)"
    )
    args = parser.parse_args(argv)
    for name in args.names:
        if not is_valid_name(name):
            parser.error(f"invalid experiment name {name!r}")
    if args.describe:
        return describe(args.names)
    if len(args.names) != 1:
        parser.error("give exactly one experiment NAME (or --describe)")
    if args.out is None and args.dir is None:
        parser.error("give --out REPORTS or --dir DIR")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be >= 1, got {args.threads}")
    (name,) = args.names
    pin(args.cpus)  # before the experiment's import starts any thread pool
    # Headless plotting unless the user chose a backend.
    os.environ.setdefault("MPLBACKEND", "Agg")
    info = entry_point_info().get(name)
    experiment = discover([name])[name]
    lock = None
    if args.dir is not None:  # the runner's own call: it holds the folder's lock already
        out_dir = args.dir
    else:  # a user's call: the same mode folder and lock as `iclr26 reproduce`
        folder = mode_dir(Path(args.out), args.quick)
        folder.mkdir(parents=True, exist_ok=True)
        lock = OutputLock(folder, args.run_id or f"worker-{os.getpid()}")
        try:
            lock.acquire()
        except OutputLocked as error:
            parser.error(str(error))
        out_dir = folder / name
    try:
        code = run_experiment(
            experiment,
            out_dir,
            args.quick,
            started_at=args.started_at if args.started_at is not None else started_at,
            threads=args.threads,
            run_id=args.run_id,
            distribution=info.distribution if info else None,
            module=info.module if info else None,
        )
    finally:
        if lock is not None:
            lock.release()
    print(f"[iclr26 worker] {name}: {'ok' if code == 0 else 'error'} -> {out_dir}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
