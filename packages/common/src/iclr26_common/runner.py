"""Schedule experiments into worker subprocesses and swap their results into the reports folder.

The parent process never imports an experiment's package: names and versions come from entry-point
metadata, and only the worker (``python -m iclr26_common.worker``) imports. ``OUT`` here is one
mode's folder (``reports/full`` or ``reports/quick``, see :func:`report.mode_dir`). One run at a
time writes into it: :class:`outlock.OutputLock` holds ``OUT/.iclr26.lock`` (``flock``; the
workers inherit it, so orphaned workers of a killed run still hold it). Each run writes into a
temporary sibling folder ``OUT/.NAME.partial-RUN`` that replaces ``OUT/NAME`` only once the worker
has written a result (held, not held, inconclusive, or the error of a failing ``run()``). A worker
that dies without a result (crash, signal, timeout, interruption) leaves the earlier result in
place and is recorded under ``OUT/_attempts/`` (:func:`index.write_attempt`); with no earlier
result, an error result is written.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from iclr26_common.index import clear_attempt, write_attempt
from iclr26_common.outlock import OutputLock, held_lock, lock_is_free
from iclr26_common.registry import VERDICTS, EntryPointInfo, entry_point_info, source_digest
from iclr26_common.report import STATUSES, read_result, write_result
from iclr26_common.worker import META_FILE, THREAD_ENV_VARS, fresh_dir, placeholder

__all__ = [
    "Outcome",
    "Runner",
    "available_cores",
    "is_resumable",
    "new_run_id",
    "recover",
    "threads_per_worker",
    "user_threads",
]

TAIL_LINES = 40  # lines of a crashed worker's output kept in its error result
KILL_GRACE_S = 5.0  # SIGTERM -> SIGKILL delay for a timed-out worker
POLL_S = 0.1


@dataclass
class Outcome:
    """What happened to one experiment in this invocation."""

    name: str
    status: str  # "held" / "not held" / "inconclusive" / "error"
    seconds: float
    note: str = ""
    resumed: bool = False  # an earlier result was reused (--resume)
    kept_earlier: bool = False  # the run died without a result; the earlier one was kept


def available_cores() -> int:
    """CPU cores this process may use."""
    with contextlib.suppress(AttributeError, OSError):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


#: Quick runs at once by default, at most (``--quick``; full runs default to 1). On 2 CPU cores
#: six full runs took 277 s at ``-j 2`` and 415 s at ``-j 1`` (2026-12-05; README "How long"),
#: but rf-matid and atomistic-scaling train one process per torch thread: with one thread each
#: (``-j 2``) their full runs would take about twice their 8 and 4 minutes, rf-matid's over the
#: 10-minute budget. Quick runs (under 40 s each) stay within theirs. More workers than two are
#: not measured (memory grows with each worker).
DEFAULT_QUICK_JOBS_CAP = 2


def default_jobs(quick: bool, cores: int | None = None) -> int:
    """``iclr26 reproduce``'s default ``-j``: 1 for full runs; for ``--quick``,
    ``min(DEFAULT_QUICK_JOBS_CAP, cores)`` (1 on one core)."""
    if not quick:
        return 1
    return max(1, min(DEFAULT_QUICK_JOBS_CAP, available_cores() if cores is None else cores))


def threads_per_worker(jobs: int, cores: int | None = None, running: int | None = None) -> int:
    """``max(1, cores // min(jobs, running))``: the torch threads of each parallel worker, where
    ``running`` is how many experiments will run (fewer than ``jobs`` leaves cores free)."""
    workers = max(1, min(jobs, running) if running is not None else jobs)
    return max(1, (available_cores() if cores is None else cores) // workers)


def user_threads(environ: dict[str, str] | None = None) -> int | None:
    """The user's ``OMP_NUM_THREADS`` as a thread count, or ``None`` when unset or not a plain
    positive integer (then it is still passed through unchanged)."""
    value = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def new_run_id() -> str:
    """An id for one ``iclr26 reproduce`` invocation (sortable by time)."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


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


def _written_status(exp_dir: Path) -> str | None:
    """The status of ``exp_dir/result.json`` if the worker wrote a valid one."""
    path = exp_dir / "result.json"
    if not path.is_file():
        return None
    try:
        status = json.loads(path.read_text(encoding="utf-8"))["status"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return status if status in STATUSES else None


# ---------------------------------------------------------------------------- resume / recover


def is_resumable(out: Path, info: EntryPointInfo, quick: bool) -> bool:
    """True if ``out/NAME`` holds a held / not held / inconclusive result of this mode whose
    source digest (:func:`registry.source_digest`) matches the installed code and versions."""
    path = out / info.name / "result.json"
    if not path.is_file():
        return False
    data = read_result(path)
    source = data.get("source")
    if not isinstance(source, dict) or not source.get("digest"):
        return False  # schema <= 2, or the digest could not be computed
    if data["status"] not in VERDICTS or data["quick"] is not bool(quick):
        return False
    files = source.get("files")
    if source.get("module") != info.module or not isinstance(files, list):
        return False
    return source["digest"] == source_digest(info.module, files, info.distribution)


def recover(out: Path, name: str) -> None:
    """Undo a swap interrupted between its two renames; drop stale partial folders.

    Only while this process holds ``out``'s lock, or nobody does: a live run's
    ``.NAME.partial-*`` / ``.NAME.old-*`` folders are never touched.
    """
    if held_lock(out) is None and not lock_is_free(out):
        return
    target = out / name
    olds = sorted(out.glob(f".{name}.old-*"))
    if not target.exists() and olds:
        os.rename(olds[-1], target)
        olds = olds[:-1]
    for stale in [*olds, *out.glob(f".{name}.partial-*")]:
        shutil.rmtree(stale, ignore_errors=True)


def _swap_in(tmp: Path, target: Path, run_id: str) -> None:
    """Replace ``target`` with ``tmp`` (two renames; :func:`recover` repairs a crash between)."""
    old = target.with_name(f".{target.name}.old-{run_id}")
    if target.exists() or target.is_symlink():
        os.rename(target, old)
    os.rename(tmp, target)
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old, ignore_errors=True)
    elif old.exists() or old.is_symlink():
        old.unlink()


class Runner:
    """Runs experiments in parallel worker subprocesses (``jobs`` at a time) into the reports
    folder ``out`` (one mode's folder), holding its :class:`OutputLock` while it runs.

    ``on_plan(to_run, resumed)`` is called once the threads are chosen (``self.threads``);
    ``on_start(name)`` and ``on_done(outcome)`` are called from worker threads.
    """

    def __init__(
        self,
        out: Path,
        *,
        quick: bool,
        jobs: int = 1,
        timeout: float | None = None,
        run_id: str | None = None,
        on_start: Callable[[str], None] | None = None,
        on_done: Callable[[Outcome], None] | None = None,
        on_plan: Callable[[int, int], None] | None = None,
    ) -> None:
        self.out = Path(out)
        self.quick = quick
        self.jobs = max(1, jobs)
        self.timeout = timeout
        self.run_id = run_id or new_run_id()
        # The user's OMP_NUM_THREADS wins (passed through unchanged); else cores // workers.
        self.user_threads = user_threads()
        self.user_env = "OMP_NUM_THREADS" in os.environ
        self.threads = self.user_threads or threads_per_worker(self.jobs)
        self.on_start = on_start or (lambda name: None)
        self.on_done = on_done or (lambda outcome: None)
        self.on_plan = on_plan or (lambda to_run, resumed: None)
        self._stop = threading.Event()
        self.interrupted = False

    # ------------------------------------------------------------------ scheduling

    def run(self, names: list[str], resume: bool = False) -> list[Outcome]:
        """Run ``names`` (in order, ``jobs`` at a time); returns the outcomes in ``names`` order.

        Ctrl-C / SIGTERM in the main thread stops everything: running workers are killed, the
        ones not started are skipped (absent from the outcomes) and ``interrupted`` is set.
        Takes the folder's lock unless this process holds it (:class:`outlock.OutputLocked` if
        another run does).
        """
        if held_lock(self.out) is not None:
            return self._run(names, resume)
        with OutputLock(self.out, self.run_id).held():
            return self._run(names, resume)

    def _run(self, names: list[str], resume: bool) -> list[Outcome]:
        infos = entry_point_info()
        outcomes: dict[str, Outcome] = {}
        todo: list[str] = []
        for name in names:
            recover(self.out, name)
            info = infos.get(name)
            if resume and info is not None and is_resumable(self.out, info, self.quick):
                data = read_result(self.out / name / "result.json")
                outcome = Outcome(
                    name,
                    data["status"],
                    0.0,
                    note=f"resumed: result of {data.get('timestamp') or 'an earlier run'} kept",
                    resumed=True,
                )
                outcomes[name] = outcome
            else:
                todo.append(name)
        if self.user_threads is None and not self.user_env:
            self.threads = threads_per_worker(self.jobs, running=len(todo))
        self.on_plan(len(todo), len(outcomes))
        for outcome in outcomes.values():
            self.on_done(outcome)
        with ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="iclr26") as pool:
            futures: dict[Future[Outcome], str] = {
                pool.submit(self._guarded, name, infos.get(name)): name for name in todo
            }
            pending = set(futures)
            try:
                while pending:
                    done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                    for future in done:
                        if not future.cancelled():
                            outcomes[futures[future]] = future.result()
            except KeyboardInterrupt:
                self.interrupted = True
                self._stop.set()
                for future in pending:
                    future.cancel()
                for future in pending:
                    if not future.cancelled():
                        with contextlib.suppress(Exception):
                            outcomes[futures[future]] = future.result()
        return [outcomes[name] for name in names if name in outcomes]

    def _guarded(self, name: str, info: EntryPointInfo | None) -> Outcome:
        if self._stop.is_set():
            raise RuntimeError("stopped before start")
        self.on_start(name)
        outcome = self._run_one(name, info)
        self.on_done(outcome)
        return outcome

    # ------------------------------------------------------------------ one experiment

    def log_path(self, name: str) -> Path:
        return self.out / f"{name}.log"

    def _run_one(self, name: str, info: EntryPointInfo | None) -> Outcome:
        tmp = fresh_dir(self.out / f".{name}.partial-{self.run_id}")
        target = self.out / name
        log_path = self.log_path(name)
        cmd = [sys.executable, "-m", "iclr26_common.worker", name, "--dir", str(tmp)]
        cmd += ["--run-id", self.run_id]
        cmd += ["--quick"] if self.quick else []
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if not self.user_env or self.user_threads is not None:
            cmd += ["--threads", str(self.threads)]
        for var in THREAD_ENV_VARS:  # never replace what the user set
            env.setdefault(var, str(self.threads))
        lock = held_lock(self.out)
        problem = None
        start = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [*cmd, "--started-at", repr(time.time())],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                pass_fds=() if lock is None or lock.fd is None else (lock.fd,),
            )
            deadline = None if self.timeout is None else start + self.timeout
            while True:
                try:
                    proc.wait(timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if self._stop.is_set():
                    _kill(proc)
                    problem = "interrupted (Ctrl-C or SIGTERM/SIGHUP)"
                    break
                if deadline is not None and time.monotonic() > deadline:
                    _kill(proc)
                    problem = f"timed out after {self.timeout:g} s (--timeout) and was killed"
                    break
        seconds = time.monotonic() - start
        status = _written_status(tmp)
        if status is not None:  # the worker finished and wrote its own result
            with contextlib.suppress(OSError):
                os.replace(log_path, tmp / "log.txt")
            with contextlib.suppress(FileNotFoundError):
                (tmp / META_FILE).unlink()
            _swap_in(tmp, target, self.run_id)
            clear_attempt(self.out, name)
            return Outcome(name, status, seconds)

        if problem is None and proc.returncode < 0:
            problem = f"worker was killed by signal {_signal_name(-proc.returncode)}"
        elif problem is None:
            problem = f"worker exited with code {proc.returncode} without writing a result"
        tail = _tail(log_path)
        if _written_status(target) is not None:  # keep the earlier result, note the attempt
            try:
                log_text = log_path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                log_text = tail
            write_attempt(self.out, name, run_id=self.run_id, problem=problem, log_text=log_text)
            with contextlib.suppress(OSError):
                log_path.unlink()
            shutil.rmtree(tmp, ignore_errors=True)
            return Outcome(
                name, "error", seconds, note=f"{problem}; earlier result kept", kept_earlier=True
            )

        meta = {}
        with contextlib.suppress(OSError, ValueError):
            meta = json.loads((tmp / META_FILE).read_text(encoding="utf-8"))
        fresh_dir(tmp)
        with contextlib.suppress(OSError):
            os.replace(log_path, tmp / "log.txt")
        experiment = placeholder(name, info.distribution if info else None)
        if meta.get("paper") and meta.get("claim"):
            experiment = type(experiment)(
                name, meta["paper"], meta["claim"], experiment.run, experiment.distribution
            )
        message = (
            f"{problem}; no result was written (ran {seconds:.1f} s).\n\n"
            f"Last {TAIL_LINES} lines of its output (log.txt):\n{tail}"
        )
        write_result(
            tmp,
            experiment,
            None,
            status="error",
            error=message,
            duration_s=seconds,
            wall_s=seconds,
            quick=self.quick,
            run_id=self.run_id,
        )
        _swap_in(tmp, target, self.run_id)
        clear_attempt(self.out, name)
        return Outcome(name, "error", seconds, note=problem)
