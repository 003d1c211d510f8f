"""Packing by declared threads: the plan as a pure function (exclusive ones alone, single-thread
ones side by side, longest first, recorded walls before the table, ``-j`` and OMP_NUM_THREADS
winning), real workers pinned to disjoint cores with the declared thread count, the progress
lines, the ``--describe`` declarations, and a signal that lands before any worker starts.

Every wait here ends on an event the code produces (a marker file a worker writes, a callback);
``HANG_S`` only bounds a hang.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr26_common import Experiment, cli, runner, worker
from iclr26_common.progress import format_duration
from iclr26_common.runner import Runner, Snapshot, available_cpus
from iclr26_common.schedule import (
    DEFAULT_WALL_S,
    FALLBACK_WALL_S,
    Declared,
    expected_walls,
    make_plan,
    makespan,
    simulate,
)

HANG_S = 120

SCHEDPKG = f"""
import json
import os
import time
from pathlib import Path

from iclr26_common import Claim, Experiment, Result

PAPER = "Scheduling Paper (arXiv:0000.00001)"


def _seen():
    return {{
        "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "omp": os.environ.get("OMP_NUM_THREADS"),
        "mkl": os.environ.get("MKL_NUM_THREADS"),
    }}


def _result(metrics):
    claim = Claim("It ran.", "ran", {{"ran": 1}}, True)
    return Result(claims=[claim], summary="s", metrics=metrics, seeds=[0], scale="t")


def _meet(mine, other):
    def run(quick, out_dir):
        folder = Path(os.environ["SCHED_MEET"])
        (folder / mine).write_text("here")
        deadline = time.time() + {HANG_S}  # bounds a hang only: the event is the other's file
        while not (folder / other).exists():
            if time.time() > deadline:
                raise TimeoutError(f"{{other}} never ran alongside {{mine}}")
            time.sleep(0.02)
        return _result(_seen())

    return run


def _plain(quick, out_dir):
    return _result(_seen())


def _waiter(quick, out_dir):
    release = Path(os.environ["SCHED_MEET"]) / "release"
    deadline = time.time() + {HANG_S}  # bounds a hang only: the event is the release file
    while not release.exists():
        if time.time() > deadline:
            raise TimeoutError("no progress call released the waiter")
        time.sleep(0.02)
    return _result(_seen())


SOLO_A = Experiment("solo-a", PAPER, "Meets solo-b.", _meet("a", "b"))
SOLO_B = Experiment("solo-b", PAPER, "Meets solo-a.", _meet("b", "a"))
WIDE = Experiment("wide", PAPER, "Uses every core.", _plain, threads="all")
TIMED = Experiment("timed", PAPER, "Times something.", _plain, timing=True)
PLAIN = Experiment("plain", PAPER, "One thread.", _plain)
WAITER = Experiment("waiter", PAPER, "Waits for a progress call.", _waiter)
"""

ENTRY_POINTS = """
[iclr26.experiments]
solo-a = schedpkg:SOLO_A
solo-b = schedpkg:SOLO_B
wide = schedpkg:WIDE
timed = schedpkg:TIMED
plain = schedpkg:PLAIN
waiter = schedpkg:WAITER
"""


@pytest.fixture
def sched_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_dist: Path, site_maker
) -> Path:
    site = site_maker(tmp_path / "schedsite", {"schedpkg.py": SCHEDPKG}, ENTRY_POINTS, "sched")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(site), prepend=os.pathsep)
    meet = tmp_path / "meet"
    meet.mkdir()
    monkeypatch.setenv("SCHED_MEET", str(meet))
    return site


def _metrics(folder: Path, name: str) -> dict:
    data = json.loads((folder / name / "result.json").read_text())
    assert data["status"] == "held", data.get("error")
    return data["metrics"]


# ---------------------------------------------------------------------------- the plan


README_DECLARED = {
    "rf-matid.benchmark": Declared("all"),
    "atomistic-scaling.scaling": Declared("all"),
    "bio-scisor.deletions": Declared(1, timing=True),
    "robotics-remac.async": Declared(1, timing=True),
}


def _overlap(a, b) -> bool:
    return a.start < b.end and b.start < a.end


def test_exclusive_ones_run_alone_and_single_ones_side_by_side() -> None:
    """Every core ("all", or more threads than cores) runs alone and first; a timing experiment
    is pinned to a core of its own, starts before the other one-core ones and shares its core
    with nothing (d875146: it held both cores, one of them idle, for its whole wall)."""
    declared = {"all": Declared("all"), "timed": Declared(1, True), "big": Declared(8)}
    walls = {"all": 50.0, "timed": 10.0, "big": 5.0, "s1": 30.0, "s2": 20.0, "s3": 40.0}
    plan = make_plan(list(walls), declared, walls, cores=2)
    jobs = {job.name: job for job in plan.jobs}
    assert [job.name for job in plan.jobs] == ["all", "big", "timed", "s3", "s1", "s2"]
    assert jobs["all"].threads == 2 and jobs["big"].threads == 2  # capped at the cores
    assert jobs["timed"].threads == 1 and jobs["timed"].width == 1  # its own 1 thread and core
    assert {j.name for j in plan.jobs if j.exclusive} == {"all", "big"}
    spans = {span.name: span for span in simulate(plan)}
    for name in ("all", "big"):
        others = [s for s in spans.values() if s.name != name]
        assert not any(_overlap(spans[name], other) for other in others)
        assert spans[name].units == (0, 1)
    # timed (10 s) and s3 (40 s) start together on cores of their own; s1 takes timed's core
    # when it ends, s2 follows on the core that frees first.
    assert spans["timed"].start == spans["s3"].start == 55.0
    assert {spans["timed"].units, spans["s3"].units} == {(0,), (1,)}
    assert spans["s1"].start == 65.0 and spans["s1"].units == spans["timed"].units
    assert spans["s2"].start == 95.0 and spans["s2"].units == spans["s3"].units
    assert makespan(spans.values()) == 115.0  # was 65 + 50 with timed alone on both cores


def test_longest_first_and_a_narrow_job_passes_a_wide_one_that_does_not_fit() -> None:
    declared = {"w": Declared(2)}
    walls = {"c": 4.0, "w": 5.0, "a": 9.0, "b": 8.0}
    plan = make_plan(list(walls), declared, walls, cores=3)
    assert [job.name for job in plan.jobs] == ["a", "b", "w", "c"]  # longest first
    assert plan.job("w").width == 2 and not plan.job("w").exclusive
    spans = {span.name: span for span in simulate(plan)}
    assert spans["a"].start == spans["b"].start == 0
    assert spans["c"].start == 0  # w needs 2 cores, 1 is free: c goes ahead
    assert spans["w"].start == 8.0 and spans["w"].units == (1, 2)  # once b frees its core


def test_recorded_walls_beat_the_table_and_the_table_beats_the_default(tmp_path: Path) -> None:
    table_name = "rf-matid.benchmark"
    names = [table_name, "llm-methods.mas2", "brand-new", "crashed"]

    def record(name: str, **data) -> None:
        (tmp_path / name).mkdir()
        base = {"status": "held", "quick": False, "wall_s": 12.5}
        (tmp_path / name / "result.json").write_text(json.dumps({**base, **data}))

    record(table_name)
    record("llm-methods.mas2", quick=True)  # the other mode's result: not this mode's wall
    record("crashed", status="error", wall_s=2.0)  # an error's wall says nothing
    walls = expected_walls(tmp_path, names, quick=False)
    assert walls[table_name] == (12.5, "recorded")
    assert walls["llm-methods.mas2"] == (FALLBACK_WALL_S["llm-methods.mas2"][0], "table")
    assert walls["brand-new"] == (DEFAULT_WALL_S["full"], "default")
    assert walls["crashed"] == (DEFAULT_WALL_S["full"], "default")
    quick = expected_walls(tmp_path, names, quick=True)
    assert quick["llm-methods.mas2"] == (12.5, "recorded")
    assert quick[table_name] == (FALLBACK_WALL_S[table_name][1], "table")
    plan = make_plan(names, {}, walls, cores=2)
    assert plan.job(table_name).expected_s == 12.5 and plan.job(table_name).expected_from == (
        "recorded"
    )


def test_an_explicit_j_keeps_the_old_slots() -> None:
    declared = {"wide": Declared("all"), "timed": Declared(1, True)}
    names = ["a", "wide", "timed", "b"]
    plan = make_plan(names, declared, dict.fromkeys(names, 1.0), cores=8, jobs=2)
    assert not plan.packed and plan.capacity == 2
    assert [job.threads for job in plan.jobs] == [4, 4, 4, 4]  # 8 // min(2, 4)
    assert [job.name for job in plan.jobs] == ["timed", "a", "wide", "b"]  # timing first
    spans = {span.name: span for span in simulate(plan)}
    assert spans["a"].start == spans["wide"].start  # "all" means nothing with -j
    assert not any(_overlap(spans["timed"], spans[n]) for n in ("a", "wide", "b"))
    one = make_plan(["x"], {}, {"x": 1.0}, cores=8, jobs=4)
    assert one.jobs[0].threads == 8  # fewer experiments than -j: the cores are shared out


def test_the_users_omp_num_threads_wins() -> None:
    declared = {"wide": Declared("all"), "one": Declared(1)}
    plan = make_plan(["wide", "one"], declared, {}, cores=4, user_threads=2, user_env=True)
    assert [(j.name, j.threads, j.width, j.exclusive) for j in plan.jobs] == [
        ("wide", 2, 2, False),
        ("one", 2, 2, False),
    ]
    odd = make_plan(["wide", "one"], declared, {}, cores=4, user_threads=None, user_env=True)
    assert not any(job.set_threads for job in odd.jobs)  # "2,1": passed through, unset
    assert (
        make_plan(["one"], declared, {}, cores=2, user_threads=4, user_env=True).jobs[0].exclusive
    )  # more than the cores: alone
    jplan = make_plan(["one"], declared, {}, cores=4, jobs=2, user_threads=3, user_env=True)
    assert jplan.jobs[0].threads == 3


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([1, 2, 3, "all"]),
            st.booleans(),
            st.floats(min_value=0.5, max_value=100, allow_nan=False),
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(min_value=1, max_value=6),
    st.one_of(st.none(), st.integers(min_value=1, max_value=4)),
)
def test_no_core_is_shared_and_a_timing_experiment_is_alone_in_slots(
    experiments, cores, jobs
) -> None:
    names = [f"e{i}" for i in range(len(experiments))]
    declared = {
        n: Declared(t, timing) for n, (t, timing, _) in zip(names, experiments, strict=True)
    }
    walls = {n: wall for n, (_, _, wall) in zip(names, experiments, strict=True)}
    plan = make_plan(names, declared, walls, cores=cores, jobs=jobs)
    spans = simulate(plan)
    assert sorted(s.name for s in spans) == sorted(names)
    for span in spans:
        job = plan.job(span.name)
        others = [s for s in spans if s is not span]
        if job.exclusive:
            assert not any(_overlap(span, other) for other in others)
        if jobs is not None and declared[span.name].timing:  # slots are not pinned: alone
            assert job.exclusive
        assert len(span.units) == job.width
        for other in others:  # no core (or slot) is ever held twice
            if _overlap(span, other):
                assert not set(span.units) & set(other.units)
    if jobs is None:
        assert sum(s.end - s.start for s in spans) <= makespan(spans) * cores + 1e-6


def test_the_readme_table_packs_into_about_five_eighths_of_the_serial_time() -> None:
    """The measurement asked for: today's 21 experiments with the README's walls, simulated.
    One at a time (the old full-run default, -j 1) is the sum of the walls; packing puts the
    two exclusive ones (rf-matid, atomistic: every core) first, then SCISOR and REMAC (timing:
    a core each), and the 19 single-thread ones two at a time."""
    names = list(FALLBACK_WALL_S)
    walls = expected_walls(None, names, quick=False)
    serial = makespan(simulate(make_plan(names, README_DECLARED, walls, cores=2, jobs=1)))
    packed = makespan(simulate(make_plan(names, README_DECLARED, walls, cores=2)))
    assert serial == sum(wall for wall, _ in walls.values()) == 6608
    assert packed == 3734  # 62 min 14 s without slowdown from sharing the machine
    assert packed / serial < 0.58


def test_eta_replays_the_rest_of_the_plan() -> None:
    walls = {"a": 10.0, "b": 10.0, "c": 10.0}
    plan = make_plan(list(walls), {}, walls, cores=2)
    # a and b have run 4 s (6 s left each); c waits for a core: 6 + 10.
    left = makespan(simulate(plan, [plan.job("c")], [("a", 6.0, (0,)), ("b", 6.0, (1,))]))
    assert left == 16.0
    over = makespan(simulate(plan, [], [("a", -3.0, (0,))]))  # over its expected wall
    assert over == 0.0
    assert format_duration(16) == "16 s" and format_duration(125) == "2 min 05 s"
    assert format_duration(3023) == "50 min 23 s" and format_duration(4840) == "1 h 20 min"


# ---------------------------------------------------------------------------- declarations


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threads": 0}, "threads must be an int >= 1 or 'all', got 0"),
        ({"threads": "some"}, "got 'some'"),
        ({"threads": True}, "got True"),
        ({"threads": 1.5}, "got 1.5"),
        ({"timing": "yes"}, "timing must be True or False, got 'yes'"),
    ],
)
def test_bad_declarations_are_one_line_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        Experiment("x", "Paper", "Claim.", lambda q, d: None, **kwargs)
    assert "\n" not in str(info.value)
    ok = Experiment("x", "Paper", "Claim.", lambda q, d: None, threads="all", timing=True)
    assert ok.threads == "all" and ok.timing is True


def test_describe_prints_threads_and_timing(sched_site: Path, capsys) -> None:
    assert worker.main(["--describe", "wide", "timed", "plain"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["name"], r["threads"], r["timing"]) for r in records] == [
        ("wide", "all", False),
        ("timed", 1, True),
        ("plain", 1, False),
    ]
    found = cli.describe_isolated(["wide", "timed", "bad"])  # fake-exp's "bad" fails to load
    assert found["wide"]["threads"] == "all" and found["timed"]["timing"] is True
    assert "error" in found["bad"] and Declared.from_record(found["bad"]) == Declared()


def test_list_shows_the_declarations(
    sched_site: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from iclr26_common import registry

    real = registry.entry_point_info
    monkeypatch.setattr(
        registry,
        "entry_point_info",
        lambda: {k: v for k, v in real().items() if v.distribution == "sched"},
    )
    assert cli.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("wide")
    assert lines[at + 3] == "    runs: every core it is given"
    assert lines[lines.index("timed") + 3] == (
        "    runs: 1 thread(s), on cores of its own (times something; alone with -j)"
    )


# ---------------------------------------------------------------------------- real workers


needs_two_cpus = pytest.mark.skipif(
    len(available_cpus()) < 2, reason="pinning two workers apart needs two CPUs"
)


@needs_two_cpus
def test_packed_workers_get_disjoint_cores_and_their_declared_threads(
    sched_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpus = available_cpus()[:2]
    monkeypatch.setattr(runner, "available_cores", lambda: 2)
    monkeypatch.setattr(runner, "available_cpus", lambda: cpus)
    events: list[str] = []
    folder = tmp_path / "full"
    run = Runner(
        folder,
        quick=False,
        on_start=lambda name: events.append(f"start {name}"),
        on_done=lambda outcome: events.append(f"done {outcome.name}"),
    )
    outcomes = run.run(["solo-a", "timed", "wide", "solo-b"])
    assert [o.status for o in outcomes] == ["held"] * 4
    a, b = _metrics(folder, "solo-a"), _metrics(folder, "solo-b")
    assert len(a["cpus"]) == len(b["cpus"]) == 1 and set(a["cpus"]) | set(b["cpus"]) == set(cpus)
    assert a["omp"] == b["omp"] == a["mkl"] == "1"  # the declared 1 thread, pinned apart
    wide = _metrics(folder, "wide")
    assert wide["cpus"] == cpus and wide["omp"] == "2"  # "all": every core, alone
    timed = _metrics(folder, "timed")
    assert len(timed["cpus"]) == 1 and timed["omp"] == "1"  # a core of its own, its 1 thread
    # The events come in the order they happen (main thread): the exclusive one first, alone;
    # then the timing one, first of the others (d875146: it held both cores).
    at = events.index("start wide")
    assert events[: at + 2] == ["start wide", "done wide"]
    assert events[2] == "start timed"


@needs_two_cpus
def test_one_experiment_is_not_pinned(
    sched_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ``iclr26 reproduce NAME`` commands side by side each pinned their lone worker to the
    first CPU (2026-12-07, 43a8cc5: pgllm and remac shared CPU 0 while CPU 1 idled)."""
    cpus = available_cpus()[:2]
    monkeypatch.setattr(runner, "available_cores", lambda: 2)
    monkeypatch.setattr(runner, "available_cpus", lambda: cpus)
    folder = tmp_path / "full"
    assert [o.status for o in Runner(folder, quick=False).run(["plain"])] == ["held"]
    solo = _metrics(folder, "plain")
    assert sorted(solo["cpus"]) == sorted(os.sched_getaffinity(0))  # the parent's, unpinned
    assert solo["omp"] == "1"  # still its declared thread count


def test_j_keeps_a_timing_experiment_alone(
    sched_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "available_cores", lambda: 2)
    events: list[str] = []
    run = Runner(
        tmp_path / "full",
        quick=False,
        jobs=2,
        on_start=lambda name: events.append(f"start {name}"),
        on_done=lambda outcome: events.append(f"done {outcome.name}"),
    )
    assert [o.status for o in run.run(["solo-a", "timed", "solo-b"])] == ["held"] * 3
    assert events[:2] == ["start timed", "done timed"]  # first, alone; then the pair meets
    assert _metrics(tmp_path / "full", "solo-a")["omp"] == "1"  # 2 cores // -j 2


def test_progress_lines_when_stdout_is_not_a_terminal(
    sched_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setattr(runner, "available_cores", lambda: 2)
    args = ["reproduce", "plain", "wide", "--out", str(tmp_path)]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "2 experiment(s) (2 to run, 0 resumed), packed by declared threads on 2 cores " in out
    assert "(1 alone, 1 side by side); full mode; about 8 min 00 s expected (walls: 2 default)" in (
        out
    )
    progress = [line for line in out.splitlines() if line.startswith("  progress: ")]
    assert len(progress) == 4  # a line per start and per finish
    assert progress[0].startswith("  progress: 0/2 done; running: wide; ")
    assert " elapsed, about " in progress[0] and progress[0].endswith(" left")
    assert progress[-1].startswith("  progress: 2/2 done; running: none; ")
    assert progress[-1].endswith("about 0 s left")

    # The second run expects the walls the first one recorded.
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "(walls: 2 recorded)" in out


def test_progress_comes_between_events_while_an_experiment_runs(
    sched_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A log that is not a terminal must hear from a long experiment before it ends: the
    # waiter finishes only once a progress call came while it ran (after the one of its start).
    monkeypatch.setattr(runner, "PROGRESS_EVERY_S", 0.0)
    release = Path(os.environ["SCHED_MEET"]) / "release"
    calls: list[Snapshot] = []

    def on_progress(snapshot: Snapshot) -> None:
        calls.append(snapshot)
        if len(calls) >= 2 and snapshot.done == 0 and snapshot.running == ("waiter",):
            release.write_text("go")

    run = Runner(tmp_path / "full", quick=False, on_progress=on_progress)
    assert [o.status for o in run.run(["waiter"])] == ["held"]
    between = [c for c in calls if c.done == 0 and c.running == ("waiter",)]
    assert len(between) >= 2 and calls[-1].done == 1


def test_progress_line_text() -> None:
    snap = Snapshot(3, 21, ("a", "b"), 65.0, 2470.0)
    assert cli._progress_line(snap) == (
        "  progress: 3/21 done; running: a, b; 1 min 05 s elapsed, about 41 min 10 s left"
    )


# ---------------------------------------------------------------------------- signals


def test_a_signal_before_any_worker_starts_stops_the_run_cleanly(
    sched_site: Path, tmp_path: Path
) -> None:
    """SIGINT in the window between the plan and the first worker (the old runner raised
    KeyboardInterrupt there, out of ``run()``, or, once the pool had its jobs, let every
    experiment run to its end): nothing starts, the run reports itself interrupted, and the
    previous handler is back afterwards."""
    # Ctrl-C's usual disposition, also where pytest runs in the background (SIGINT ignored).
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    started: list[str] = []
    run = Runner(
        tmp_path / "full",
        quick=False,
        on_plan=lambda plan, resumed: os.kill(os.getpid(), signal.SIGINT),
        on_start=started.append,
    )
    try:
        outcomes = run.run(["plain", "wide"])
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped the runner")
    else:
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    finally:
        signal.signal(signal.SIGINT, before)
    assert outcomes == [] and started == [] and run.interrupted
    assert not list((tmp_path / "full").glob("*.log"))
    assert not [p for p in (tmp_path / "full").iterdir() if p.name.startswith(".plain")]


def test_one_duration_format_for_progress_and_reports() -> None:
    """``report.format_duration`` and ``progress.format_eta`` are one function: whole seconds
    for progress, one decimal for reports, ``?`` for a value that is not a finite number."""
    from iclr26_common import progress, report

    assert report.format_duration is progress.format_duration is progress.format_eta
    assert format_duration(42.3, decimals=1) == "42.3 s" and format_duration(42.3) == "42 s"
    assert format_duration(70, decimals=1) == "1 min 10 s"
    assert format_duration(59.97, decimals=1) == "1 min 00 s"  # never "60.0 s"
    assert format_duration(None) == "?" and format_duration(float("nan")) == "?"
    assert format_duration(-5) == "0 s"
