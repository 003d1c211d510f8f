"""Which experiments run side by side, on which cores, and how long the run will take.

Pure functions (no processes, no clock): :func:`make_plan` orders the experiments and says how
many threads and cores each gets; :func:`next_job` is the one rule that decides what starts
next, used both by the runner (:class:`iclr26_common.runner.Runner`) and by :func:`simulate`,
which replays a plan on expected wall times (the makespan, and the ETA of a run under way).

**Packing** (``iclr26 reproduce`` without ``-j``): an experiment declares the torch threads it
can use (``Experiment.threads``, 1 by default, ``"all"`` for every core it is given) and whether
it times something (``Experiment.timing``). An *exclusive* one (``"all"``, or at least as many
threads as there are cores) runs alone with every core; the others run side by side as long as
the threads of the running ones fit the cores, each pinned to cores of its own. A timing one is
pinned to cores of its own like the others and never shares one: its timed arms alternate
(interleaved repeats, alternating rollouts), so a neighbour on another core slows both arms
alike, and holding every core for a one-thread run left a core idle for its whole wall (about
15 of the full run's 70 minutes on 2 cores, 2026-12-07). Exclusive ones go first (nothing else
is running then, so no core waits for a whole machine to drain), longest first; then the timing
ones, then the rest, each longest expected wall first (LPT list scheduling: a job that does not
fit lets a smaller one behind it start). Expected walls: the ``wall_s`` recorded
in this mode's earlier results, else :data:`FALLBACK_WALL_S` (the README's table), else
:data:`DEFAULT_WALL_S`.

**Slots** (an explicit ``-j N``): N experiments at once, each with ``cores // min(N, to run)``
threads (:func:`threads_per_worker`), in the order given, not pinned; a timing experiment still
runs alone (first). A user's ``OMP_NUM_THREADS`` wins in both modes: every experiment gets that
many threads (the variable itself is passed through unchanged).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "DEFAULT_WALL_S",
    "FALLBACK_WALL_S",
    "MAX_PACKED_WORKERS",
    "Declared",
    "Job",
    "Plan",
    "Span",
    "expected_walls",
    "make_plan",
    "makespan",
    "next_job",
    "simulate",
    "threads_per_worker",
]

#: Wall seconds (full, quick) of each experiment: full runs from the root README's table (the
#: walls of the 2026-12-07 13:35 full run, commit 43a8cc5, packed on 2 idle CPU cores; pgllm ran
#: loaded there (1618 s at load 6-9): its entry is its CPU time alone, 531 s, measured after), quick runs
#: 2026-12-05 (``-j 1``); LTPO and GF-Screen: the CPU time of their 2026-12-07 runs (the shared control
#: first). Only used where this mode's folder holds no
#: result of the experiment with a recorded ``wall_s``.
FALLBACK_WALL_S: dict[str, tuple[float, float]] = {
    "atomistic-scaling.scaling": (297, 25),
    "bio-scisor.deletions": (471, 12),
    "llm-methods.adl.narrow_finetune": (137, 22),
    "llm-methods.antibody": (298, 16),
    "llm-methods.bed": (155, 15),
    "llm-methods.dispersion.correlation": (273, 15),
    "llm-methods.dispersion.pushaway": (350, 20),
    "llm-methods.linguamap.selective_ft": (488, 26),
    "llm-methods.ltpo": (150, 16),  # 2026-12-07: CPU time of its run with the shared control first
    "llm-methods.mas2": (63, 9),
    "llm-methods.mbok": (579, 28),
    "llm-methods.meta_router": (310, 14),
    "llm-methods.perk": (380, 14),
    "llm-methods.remix": (396, 13),
    "llm-methods.seekbench": (91, 14),
    "llm-methods.suit": (511, 40),
    "llm-methods.suit.world": (51, 8),
    "medimg-gfscreen.glance_focus": (90, 18),  # 2026-12-08: its 1280-step control (83 s CPU)
    "pointcloud-pgllm.pgllm": (530, 12),
    "rf-matid.benchmark": (524, 18),
    "robotics-remac.async": (464, 16),
}
#: An experiment with neither a recorded wall nor a table entry (about the table's median).
DEFAULT_WALL_S = {"full": 240.0, "quick": 20.0}
#: Packed workers at once, at most, whatever the cores: each worker holds its own torch and
#: data in memory, and 8 is the most measured at once (``-j 8``, the GPU run in the README).
MAX_PACKED_WORKERS = 8


@dataclass(frozen=True)
class Declared:
    """What an experiment declares to the runner (``Experiment.threads`` / ``.timing``)."""

    threads: int | Literal["all"] = 1
    timing: bool = False

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Declared:
        """From a ``--describe`` line; anything missing or malformed (a package that failed to
        load, an older worker) reads as the defaults: 1 thread, no timing."""
        threads = record.get("threads", 1)
        if threads != "all" and (type(threads) is not int or threads < 1):
            threads = 1
        return cls(threads, record.get("timing") is True)


@dataclass(frozen=True)
class Job:
    """One experiment in a plan.

    ``threads``: the torch threads it gets (``--threads``, and the thread variables the user
    did not set). ``set_threads`` False: the user's ``OMP_NUM_THREADS`` is not a plain number,
    so it is passed through and ``--threads`` is not given. ``width``: the capacity it occupies
    (cores when packing, 1 slot with ``-j``; all of it when ``exclusive``: nothing runs beside
    it). ``expected_s``: its expected wall, ``expected_from`` "recorded", "table" or "default".
    """

    name: str
    threads: int
    width: int
    exclusive: bool
    expected_s: float
    expected_from: str = "default"
    set_threads: bool = True


@dataclass(frozen=True)
class Plan:
    """The start order and the capacity the jobs share (:func:`make_plan`)."""

    jobs: tuple[Job, ...]
    capacity: int  # cores (packed) or slots (-j)
    cores: int
    packed: bool  # True: by declared threads, pinned; False: -j slots
    max_workers: int  # running at once, at most

    def job(self, name: str) -> Job:
        return next(job for job in self.jobs if job.name == name)


@dataclass(frozen=True)
class Span:
    """When a job runs in a simulation, and on which capacity units (core indices)."""

    name: str
    start: float
    end: float
    units: tuple[int, ...]


def threads_per_worker(jobs: int, cores: int, running: int | None = None) -> int:
    """``max(1, cores // min(jobs, running))``: the torch threads of each ``-j`` worker, where
    ``running`` is how many experiments will run (fewer than ``jobs`` leaves cores free)."""
    workers = max(1, min(jobs, running) if running is not None else jobs)
    return max(1, cores // workers)


def _recorded_wall(path: Path, quick: bool) -> float | None:
    """``wall_s`` of a held / not held / inconclusive result of this mode (an error's wall says
    nothing about a whole run: it may have crashed at import)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("quick") is not bool(quick):
        return None
    wall = data.get("wall_s")
    if data.get("status") not in ("held", "not held", "inconclusive"):
        return None
    if isinstance(wall, bool) or not isinstance(wall, int | float) or not wall > 0:
        return None
    return float(wall)


def expected_walls(
    out: Path | None, names: Iterable[str], quick: bool
) -> dict[str, tuple[float, str]]:
    """name -> (expected wall seconds, where it came from: "recorded" / "table" / "default").

    ``out`` is the mode's folder (``OUT/full`` or ``OUT/quick``): a result there with a wall
    time beats the table; the table (:data:`FALLBACK_WALL_S`) beats the default.
    """
    mode = "quick" if quick else "full"
    walls: dict[str, tuple[float, str]] = {}
    for name in names:
        recorded = None if out is None else _recorded_wall(Path(out) / name / "result.json", quick)
        if recorded is not None:
            walls[name] = (recorded, "recorded")
        elif name in FALLBACK_WALL_S:
            walls[name] = (float(FALLBACK_WALL_S[name][1 if quick else 0]), "table")
        else:
            walls[name] = (DEFAULT_WALL_S[mode], "default")
    return walls


def make_plan(
    names: Sequence[str],
    declared: Mapping[str, Declared],
    expected: Mapping[str, tuple[float, str] | float],
    *,
    cores: int,
    jobs: int | None = None,
    user_threads: int | None = None,
    user_env: bool = False,
) -> Plan:
    """The plan for ``names`` on ``cores`` cores.

    ``jobs``: the user's ``-j`` (``None``: packing). ``user_threads``: the user's
    ``OMP_NUM_THREADS`` as a number; ``user_env``: it is set at all (a value that is not a
    plain number is passed through, and the threads are not set). A name missing from
    ``declared`` counts as 1 thread, no timing.
    """
    cores = max(1, int(cores))

    def wall(name: str) -> tuple[float, str]:
        value = expected.get(name, (0.0, "default"))
        return (float(value), "recorded") if isinstance(value, int | float) else value

    def timing(name: str) -> bool:
        return declared.get(name, Declared()).timing

    set_threads = user_threads is not None or not user_env
    built: list[Job] = []
    if jobs is None:
        for name in names:
            wanted = declared.get(name, Declared()).threads
            threads = cores if wanted == "all" else min(int(wanted), cores)
            if user_threads is not None:
                threads = user_threads
            exclusive = threads >= cores
            width = cores if exclusive else threads
            built.append(Job(name, threads, width, exclusive, *wall(name), set_threads))
        # Exclusive first, then the timing ones, then the rest; each longest first (a stable
        # sort: ties keep the order given).
        built.sort(key=lambda job: (not job.exclusive, not timing(job.name), -job.expected_s))
        capacity, max_workers = cores, MAX_PACKED_WORKERS
    else:
        jobs = max(1, int(jobs))
        threads = user_threads or threads_per_worker(jobs, cores, running=len(names))
        built = [
            Job(name, threads, jobs if timing(name) else 1, timing(name), *wall(name), set_threads)
            for name in names
        ]
        built.sort(key=lambda job: not job.exclusive)  # timing ones first, alone
        capacity, max_workers = jobs, jobs
    return Plan(tuple(built), capacity, cores, jobs is None, max_workers)


def next_job(pending: Sequence[Job], free: int, running: int, plan: Plan) -> int | None:
    """Index in ``pending`` of the job to start now, or ``None`` (wait for one to finish).

    ``free``: unused capacity; ``running``: jobs running. An exclusive job starts only when
    nothing runs, and nothing behind it starts before it; any other job starts when its width
    fits, skipping ahead of a wider one that does not (LPT list scheduling).
    """
    if running >= plan.max_workers:
        return None
    for index, job in enumerate(pending):
        if job.exclusive:
            return index if running == 0 else None
        if job.width <= free:
            return index
    return None


def simulate(
    plan: Plan,
    pending: Sequence[Job] | None = None,
    running: Iterable[tuple[str, float, Sequence[int]]] = (),
) -> list[Span]:
    """Replay :func:`next_job` on expected walls: when each job starts and ends, from now (0).

    ``pending`` defaults to all of the plan's jobs; ``running``: (name, expected seconds left,
    capacity units held) of jobs already running. Units are the indices ``0 .. capacity-1``
    (core indices when packing); a job takes the lowest free ones.
    """
    queue = list(plan.jobs if pending is None else pending)
    free = set(range(plan.capacity))
    ends: list[tuple[float, int, str, tuple[int, ...]]] = []
    spans: list[Span] = []
    for seq, (name, left, units) in enumerate(running):
        held = tuple(units)
        free -= set(held)
        heapq.heappush(ends, (max(0.0, left), seq, name, held))
        spans.append(Span(name, 0.0, max(0.0, left), held))
    now, seq = 0.0, len(spans)
    while queue or ends:
        while (index := next_job(queue, len(free), len(ends), plan)) is not None:
            job = queue.pop(index)
            units = tuple(sorted(free)[: job.width])
            free -= set(units)
            heapq.heappush(ends, (now + job.expected_s, seq, job.name, units))
            spans.append(Span(job.name, now, now + job.expected_s, units))
            seq += 1
        if not ends:  # nothing fits an empty machine: cannot happen for a plan's own jobs
            raise ValueError(f"{queue[0].name} never fits {plan.capacity} units")
        now, _, _, units = heapq.heappop(ends)
        free |= set(units)
    return spans


def makespan(spans: Iterable[Span]) -> float:
    """When the last job of a simulation ends (0 for none)."""
    return max((span.end for span in spans), default=0.0)
