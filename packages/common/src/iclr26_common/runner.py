"""Schedule experiments into worker subprocesses and swap their results into the reports folder.

The parent process never imports an experiment's package: names and versions come from entry-point
metadata, and only worker subprocesses (``python -m iclr26_common.worker``) import; the parent
learns what each experiment declares (``Experiment.threads`` / ``.timing``) from one
``--describe`` subprocess (:func:`describe_isolated`). ``OUT`` here is one mode's folder
(``reports/full`` or ``reports/quick``, see :func:`report.mode_dir`). One run at a time writes
into it: :class:`outlock.OutputLock` holds ``OUT/.iclr26.lock`` (``flock``; the workers inherit
it, so orphaned workers of a killed run still hold it). Each run writes into a temporary sibling
folder ``OUT/.NAME.partial-RUN`` that replaces ``OUT/NAME`` only once the worker has written a
result (held, not held, inconclusive, or the error of a failing ``run()``). A worker that dies
without a result (crash, signal, timeout, interruption) leaves the earlier result in place and is
recorded under ``OUT/_attempts/`` (:func:`index.write_attempt`); with no earlier result, an error
result is written.

Which experiments run side by side, with how many threads, on which cores: :mod:`schedule`
(packing by declared threads by default, ``-j N`` slots on request). Signals never raise inside
the runner: SIGINT / SIGTERM / SIGHUP only set a :class:`StopFlag`, which the scheduling loop
reads (a signal that lands before a worker starts, or while one is being started, stops the run
just the same); a signal the process inherited as ignored (a background job's SIGINT, ``nohup``'s
SIGHUP) stays ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

from iclr26_common.index import clear_attempt, write_attempt
from iclr26_common.outlock import OutputLock, held_lock, lock_is_free
from iclr26_common.registry import VERDICTS, EntryPointInfo, entry_point_info, source_digest
from iclr26_common.report import STATUSES, read_result, write_result
from iclr26_common.schedule import (
    Declared,
    Job,
    Plan,
    expected_walls,
    make_plan,
    makespan,
    next_job,
    simulate,
)
from iclr26_common.schedule import threads_per_worker as _threads_per_worker
from iclr26_common.worker import META_FILE, THREAD_ENV_VARS, fresh_dir, placeholder

__all__ = [
    "DESCRIBE_TIMEOUT_S",
    "Outcome",
    "Runner",
    "Snapshot",
    "StopFlag",
    "available_cores",
    "available_cpus",
    "describe_isolated",
    "is_resumable",
    "new_run_id",
    "recover",
    "threads_per_worker",
    "user_threads",
]

TAIL_LINES = 40  # lines of a crashed worker's output kept in its error result
KILL_GRACE_S = 5.0  # SIGTERM -> SIGKILL delay for a timed-out worker
POLL_S = 0.1
#: While experiments run, ``on_progress`` is called at least this often (a log that is not a
#: terminal gets a progress line even while one long experiment runs).
PROGRESS_EVERY_S = 60.0
#: Seconds one experiment's import may take in a ``--describe`` subprocess (the clock restarts
#: at each name it describes; a package that hangs at import costs this much, once).
DESCRIBE_TIMEOUT_S = 300.0


@dataclass
class Outcome:
    """What happened to one experiment in this invocation."""

    name: str
    status: str  # "held" / "not held" / "inconclusive" / "error"
    seconds: float
    note: str = ""
    resumed: bool = False  # an earlier result was reused (--resume)
    kept_earlier: bool = False  # the run died without a result; the earlier one was kept


@dataclass(frozen=True)
class Snapshot:
    """Where a run stands, for a progress display (``Runner(on_progress=...)``).

    ``done`` of ``total`` (resumed ones count as done), the names running (in start order),
    seconds since the run began, and the expected seconds left: the rest of the plan replayed
    on expected walls (:func:`schedule.simulate`), the running ones at their expected wall
    minus the time they have run (0 once over).
    """

    done: int
    total: int
    running: tuple[str, ...]
    elapsed_s: float
    eta_s: float


def available_cpus() -> list[int]:
    """The CPU ids this process may run on (sorted; ``[]`` where the OS does not say)."""
    with contextlib.suppress(AttributeError, OSError):
        return sorted(os.sched_getaffinity(0))
    return []


def available_cores() -> int:
    """CPU cores this process may use."""
    return len(available_cpus()) or max(1, os.cpu_count() or 1)


def threads_per_worker(jobs: int, cores: int | None = None, running: int | None = None) -> int:
    """``max(1, cores // min(jobs, running))``: the torch threads of each ``-j`` worker, where
    ``running`` is how many experiments will run (``cores``: :func:`available_cores`)."""
    return _threads_per_worker(jobs, available_cores() if cores is None else cores, running)


def user_threads(environ: dict[str, str] | None = None) -> int | None:
    """The user's ``OMP_NUM_THREADS`` as a thread count, or ``None`` when unset or not a plain
    positive integer (then it is still passed through unchanged)."""
    value = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def new_run_id() -> str:
    """An id for one ``iclr26 reproduce`` invocation (sortable by time)."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


class StopFlag:
    """Set by SIGINT / SIGTERM / SIGHUP while :meth:`catching` is active.

    The handler only records the signal (``signum``): nothing is raised into whatever the main
    thread was doing (starting a worker, inside a lock), and the code that owns the flag decides
    when to stop. A signal this process inherited as ignored stays ignored.
    """

    SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")

    def __init__(self) -> None:
        self.signum: int | None = None

    def __bool__(self) -> bool:
        return self.signum is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum

    @contextlib.contextmanager
    def catching(self) -> Iterator[StopFlag]:
        """Install the handlers (main thread only; elsewhere a no-op) and restore the previous
        ones afterwards."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {}
        for name in self.SIGNALS:
            number = getattr(signal, name, None)
            if number is None or signal.getsignal(number) == signal.SIG_IGN:
                continue
            previous[number] = signal.signal(number, self._handle)
        try:
            yield self
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)


# ---------------------------------------------------------------------------- describe


def _describe_once(
    names: list[str], timeout: float, stop: Callable[[], bool]
) -> tuple[dict[str, dict], str | None]:
    """One ``--describe`` subprocess over ``names``: the records it printed, and why it ended
    early (``None``: it described them all)."""
    cmd = [sys.executable, "-m", "iclr26_common.worker", "--describe", *names]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # a terminal's Ctrl-C reaches the parent, which ends this one
    )
    lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    found: dict[str, dict] = {}
    deadline = time.monotonic() + timeout
    why: str | None = None
    while True:
        try:
            line = lines.get(timeout=POLL_S)
        except queue.Empty:
            if stop():
                why = "interrupted"
            elif time.monotonic() > deadline:
                why = f"timeout after {timeout:g} s"
            else:
                continue
            _kill(proc)
            break
        if line is None:  # the process closed its output: it ended
            code = proc.wait()
            if code < 0:
                why = f"killed by {_signal_name(-code)}"
            elif len(found) < len(names):
                why = f"exit status {code}"
            break
        with contextlib.suppress(ValueError, KeyError, TypeError):
            record = json.loads(line)
            found[record["name"]] = record
            deadline = time.monotonic() + timeout  # the next name gets its own time
    reader.join(timeout=KILL_GRACE_S)
    if not reader.is_alive() and proc.stdout is not None:
        proc.stdout.close()
    return found, why


def describe_isolated(
    names: Sequence[str],
    timeout: float = DESCRIBE_TIMEOUT_S,
    stop: Callable[[], bool] = lambda: False,
) -> dict[str, dict]:
    """name -> {"paper", "claim", "threads", "timing"} or {"error"}, loaded in subprocesses.

    One subprocess describes the names in turn (``python -m iclr26_common.worker --describe``);
    if it dies or one name takes longer than ``timeout`` seconds (a package that aborts or hangs
    at import), that name gets an error and a fresh subprocess continues with the rest. ``stop()``
    true ends it early (the names not described are absent).
    """
    found: dict[str, dict] = {}
    remaining = list(dict.fromkeys(names))
    while remaining and not stop():
        records, why = _describe_once(remaining, timeout, stop)
        found.update(records)
        remaining = [n for n in remaining if n not in found]
        if remaining and why != "interrupted":  # the process died while loading remaining[0]
            found[remaining[0]] = {"name": remaining[0], "error": f"import crashed ({why})"}
            remaining = remaining[1:]
    return found


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
    """Runs experiments in worker subprocesses into the reports folder ``out`` (one mode's
    folder), holding its :class:`OutputLock` while it runs.

    ``jobs=None`` packs the experiments by their declared threads (:mod:`schedule`); ``jobs=N``
    runs N at a time. Callbacks, all from the thread that called :meth:`run`:
    ``on_plan(plan, resumed)`` once the plan is made (``self.plan``, ``self.expected_s``);
    ``on_start(name)``; ``on_done(outcome)`` (resumed ones first); ``on_progress(snapshot)``
    after each start and each finish, and every :data:`PROGRESS_EVERY_S` seconds between them.
    ``stop``: a :class:`StopFlag` the caller installs around
    more than the run (the CLI: until the index is written); by default the run installs its own.
    ``describe``: names -> ``--describe`` records (default :func:`describe_isolated`).
    """

    def __init__(
        self,
        out: Path,
        *,
        quick: bool,
        jobs: int | None = None,
        timeout: float | None = None,
        run_id: str | None = None,
        on_start: Callable[[str], None] | None = None,
        on_done: Callable[[Outcome], None] | None = None,
        on_plan: Callable[[Plan, int], None] | None = None,
        on_progress: Callable[[Snapshot], None] | None = None,
        stop: StopFlag | None = None,
        describe: Callable[[list[str]], dict[str, dict]] | None = None,
    ) -> None:
        self.out = Path(out)
        self.quick = quick
        self.jobs = None if jobs is None else max(1, jobs)
        self.timeout = timeout
        self.run_id = run_id or new_run_id()
        # The user's OMP_NUM_THREADS wins (passed through unchanged).
        self.user_threads = user_threads()
        self.user_env = "OMP_NUM_THREADS" in os.environ
        self.on_start = on_start or (lambda name: None)
        self.on_done = on_done or (lambda outcome: None)
        self.on_plan = on_plan or (lambda plan, resumed: None)
        self.on_progress = on_progress or (lambda snapshot: None)
        self.stop_flag = stop
        self.describe = describe
        self.plan: Plan | None = None
        self.expected_s = 0.0  # the plan's makespan on expected walls
        self.declared: dict[str, Declared] = {}
        self._stop = threading.Event()
        self.interrupted = False
        self._t0 = time.monotonic()
        self._done = 0
        self._total = 0
        self._pending: list[Job] = []
        self._running: dict[str, tuple[Job, tuple[int, ...], float]] = {}

    # ------------------------------------------------------------------ scheduling

    def run(self, names: list[str], resume: bool = False) -> list[Outcome]:
        """Run ``names``; returns the outcomes in ``names`` order.

        Ctrl-C / SIGTERM / SIGHUP (in the main thread) stops everything: running workers are
        killed, the ones not started are skipped (absent from the outcomes) and ``interrupted``
        is set. Takes the folder's lock unless this process holds it
        (:class:`outlock.OutputLocked` if another run does).
        """
        self._t0 = time.monotonic()
        with contextlib.ExitStack() as stack:
            if self.stop_flag is None:
                self.stop_flag = stack.enter_context(StopFlag().catching())
            if held_lock(self.out) is None:
                stack.enter_context(OutputLock(self.out, self.run_id).held())
            return self._run(names, resume)

    def _stopping(self) -> bool:
        """True once a signal arrived (the flag) or the run was stopped; sets ``interrupted``."""
        if self.stop_flag and not self._stop.is_set():
            self.interrupted = True
            self._stop.set()
        return self._stop.is_set()

    def _declarations(self, todo: list[str]) -> dict[str, Declared]:
        """What each experiment declares; not asked where it cannot matter (``-j 1``, or one
        experiment with ``-j``). A name that failed to load counts as 1 thread, no timing."""
        if not todo or (self.jobs is not None and (self.jobs == 1 or len(todo) == 1)):
            return {}
        if self.describe is not None:
            records = self.describe(todo)
        else:
            per_name = DESCRIBE_TIMEOUT_S if self.timeout is None else self.timeout
            records = describe_isolated(todo, min(DESCRIBE_TIMEOUT_S, per_name), self._stopping)
        return {name: Declared.from_record(records.get(name, {})) for name in todo}

    def _run(self, names: list[str], resume: bool) -> list[Outcome]:
        names = list(dict.fromkeys(names))
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
        self.declared = self._declarations(todo)
        self.plan = make_plan(
            todo,
            self.declared,
            expected_walls(self.out, todo, self.quick),
            cores=available_cores(),
            jobs=self.jobs,
            user_threads=self.user_threads,
            user_env=self.user_env,
        )
        self.expected_s = makespan(simulate(self.plan))
        self._total, self._done = len(names), len(outcomes)
        self.on_plan(self.plan, len(outcomes))
        for outcome in outcomes.values():
            self.on_done(outcome)
        outcomes.update(self._schedule(infos))
        return [outcomes[name] for name in names if name in outcomes]

    def _cpu_ids(self) -> list[int] | None:
        """CPU id of each core index of a packed plan, or ``None``: not pinned (``-j``, a plan of
        one experiment, which has nothing to keep apart from, or the OS does not tell which CPUs
        this process may use). Pinning a lone experiment put two ``iclr26 reproduce NAME``
        commands run side by side on the same first CPU while the other idled."""
        assert self.plan is not None
        cpus = available_cpus()
        if not self.plan.packed or len(self.plan.jobs) < 2 or len(cpus) < self.plan.capacity:
            return None
        return cpus[: self.plan.capacity]

    def snapshot(self) -> Snapshot:
        """Where the run stands now (see :class:`Snapshot`)."""
        now = time.monotonic()
        eta = 0.0
        if self.plan is not None:
            running = [
                (name, job.expected_s - (now - started), units)
                for name, (job, units, started) in self._running.items()
            ]
            eta = makespan(simulate(self.plan, self._pending, running))
        return Snapshot(self._done, self._total, tuple(self._running), now - self._t0, eta)

    def _schedule(self, infos: dict[str, EntryPointInfo]) -> dict[str, Outcome]:
        """Start jobs as :func:`schedule.next_job` allows, collect them as they finish."""
        assert self.plan is not None
        plan = self.plan
        cpu_ids = self._cpu_ids()
        self._pending = list(plan.jobs)
        free = list(range(plan.capacity))
        finished: queue.SimpleQueue[tuple[str, Outcome | BaseException]] = queue.SimpleQueue()
        threads: dict[str, threading.Thread] = {}
        outcomes: dict[str, Outcome] = {}
        failure: BaseException | None = None

        def work(job: Job, cpus: list[int] | None) -> None:
            try:
                result: Outcome | BaseException = self._run_one(
                    job.name, infos.get(job.name), job, cpus
                )
            except BaseException as exc:  # handed to the main thread, raised there
                result = exc
            finished.put((job.name, result))

        last_progress = time.monotonic()
        while self._pending or self._running:
            try:
                if self._running and time.monotonic() - last_progress >= PROGRESS_EVERY_S:
                    last_progress = time.monotonic()
                    self.on_progress(self.snapshot())
                if not self._stopping():
                    while not self._stopping() and (
                        (index := next_job(self._pending, len(free), len(threads), plan))
                        is not None
                    ):
                        job = self._pending.pop(index)
                        units = tuple(free[: job.width])
                        del free[: job.width]
                        cpus = None if cpu_ids is None else [cpu_ids[u] for u in units]
                        self._running[job.name] = (job, units, time.monotonic())
                        threads[job.name] = threading.Thread(
                            target=work, args=(job, cpus), name=f"iclr26-{job.name}"
                        )
                        threads[job.name].start()
                        self.on_start(job.name)
                        self.on_progress(self.snapshot())
                elif not self._running:
                    break  # stopped: the ones not started are skipped
                try:
                    name, result = finished.get(timeout=POLL_S)
                except queue.Empty:
                    continue
                threads.pop(name).join()
                _, units, _ = self._running.pop(name)
                free = sorted([*free, *units])
                if isinstance(result, BaseException):
                    failure = failure or result
                    self._stop.set()
                    continue
                outcomes[name] = result
                self._done += 1
                self.on_done(result)
                self.on_progress(self.snapshot())
            except KeyboardInterrupt:  # a handler other than the StopFlag's raised it
                self.interrupted = True
                self._stop.set()
        if failure is not None:
            raise failure
        return outcomes

    # ------------------------------------------------------------------ one experiment

    def log_path(self, name: str) -> Path:
        return self.out / f"{name}.log"

    def _run_one(
        self, name: str, info: EntryPointInfo | None, job: Job, cpus: list[int] | None
    ) -> Outcome:
        """Run one worker: ``job.threads`` threads, pinned to ``cpus`` (``None``: not pinned)."""
        tmp = fresh_dir(self.out / f".{name}.partial-{self.run_id}")
        target = self.out / name
        log_path = self.log_path(name)
        cmd = [sys.executable, "-m", "iclr26_common.worker", name, "--dir", str(tmp)]
        cmd += ["--run-id", self.run_id]
        cmd += ["--quick"] if self.quick else []
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if job.set_threads:
            cmd += ["--threads", str(job.threads)]
        if cpus:
            cmd += ["--cpus", ",".join(map(str, cpus))]
        for var in THREAD_ENV_VARS:  # never replace what the user set
            env.setdefault(var, str(job.threads))
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
