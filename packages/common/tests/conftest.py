"""A fake installed distribution ``fake-exp`` that registers a zoo of test experiments."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

FAKEPKG = """
import os
import time

from pathlib import Path

from iclr26_common import Claim, Experiment, Precondition, Result
from iclr26_common.device import record_threads

PAPER = "Fake Paper (arXiv:0000.00000)"
LONG_NAME = "fake-exp.a-rather-long-experiment-name-that-does-not-fit-into-eighty-columns"


def _good(quick, out_dir):
    (out_dir / "curve.png").write_bytes(b"not really a png")
    return Result(
        claims=[Claim("Good models win.", "acc >= 0.8", {"acc": 0.9}, True)],
        summary="Our accuracy 0.9 beats the 0.5 baseline.",
        metrics={"acc": 0.9, "nested": {"f1": 0.8}},
        seeds=[0, 1],
        scale="2 classes, 1 epoch" + (" (quick)" if quick else ""),
        table_markdown="| model | acc |\\n|---|---|\\n| ours | 0.9 |",
        plots=["curve.png"],
    )


def _not_held(quick, out_dir):
    claims = [Claim("Bad baselines lose.", "acc >= 0.5", {"acc": 0.4}, False)]
    return Result(claims=claims, summary="0.4 < 0.5.", metrics={"acc": 0.4}, seeds=[7], scale="tiny")


def _inconclusive(quick, out_dir):
    learned = Precondition("baseline learned", "acc(baseline) - acc(trivial) >= 0.1",
                           {"baseline": 0.5, "trivial": 0.5}, False)
    return Result(
        summary="The baseline learned nothing.", metrics={"acc": 0.9}, seeds=[0], scale="tiny",
        claims=[
            Claim.judge(text="Ours beats chance.", criterion="acc >= 0.6", measured={"acc": 0.9},
                        holds=True, preconditions=[("data loaded", "rows >= 1", 10, True)]),
            Claim.judge(text="Ours beats the baseline.", criterion="acc - baseline >= 0.05",
                        measured={"gap": 0.4}, holds=True, preconditions=[learned]),
        ],
    )


def _nonfinite(quick, out_dir):
    return Result(
        summary="A diverged run.", metrics={"loss": float("inf"), "ok": 1.0}, seeds=[0], scale="tiny",
        claims=[
            Claim("Fine.", "x >= 0", {"x": 1.0}, True),
            Claim("Diverged.", "gap >= 0", {"per": {"s1": float("nan")}}, False),
        ],
    )


def _gated(quick, out_dir):
    gate = Path(os.environ["FAKE_GATE"])
    print(f"waiting pid={os.getpid()}", flush=True)
    deadline = time.time() + 60
    while not gate.exists():
        if time.time() > deadline:
            raise TimeoutError("gate never opened")
        time.sleep(0.05)
    print("gate open", flush=True)
    return _good(quick, out_dir)


def _one_thread(quick, out_dir):
    record_threads(1)  # what torch_threads(1) records; torch itself is not needed here
    return _claims(quick, out_dir)


def _claims(quick, out_dir):
    return Result(
        summary="Two claims, one holds.",
        metrics={"omp": os.environ.get("OMP_NUM_THREADS")},
        seeds=[0],
        scale="tiny",
        claims=[
            Claim("A beats B.", "acc(A) - acc(B) >= 0.05", {"gap": 0.1}, True),
            Claim("C is robust.", "drop <= 0.02", {"drop": 0.3}, "not held"),
        ],
    )


def _flaky(quick, out_dir):
    mode = os.environ.get("FAKE_FLAKY", "ok")
    if mode == "crash":
        os.abort()
    if mode == "raise":
        raise ValueError("flaky raised")
    if mode == "sleep":
        print(f"sleeping pid={os.getpid()}", flush=True)
        time.sleep(120)
    return _good(quick, out_dir)


def _rendezvous(mine, other):
    def run(quick, out_dir):
        folder = Path(os.environ["FAKE_RENDEZVOUS"])
        (folder / mine).write_text(str(time.time()))
        deadline = time.time() + 120  # only bounds a hang: the other worker's start is the event
        while not (folder / other).exists():
            if time.time() > deadline:
                raise TimeoutError(f"{other} never ran alongside {mine}")
            time.sleep(0.05)
        return _claims(quick, out_dir)

    return run


def _crash(quick, out_dir):
    raise RuntimeError("boom from crash")


def _exit(quick, out_dir):
    print("about to exit hard", flush=True)
    os._exit(3)


def _sleepy(quick, out_dir):
    print(f"sleeping pid={os.getpid()}", flush=True)
    time.sleep(120)


def _no_result(quick, out_dir):
    return {"verdict": "held"}


EXP = Experiment("good", PAPER, "Good things happen to good models.", _good)
NOT_HELD = Experiment("notheld", PAPER, "Bad baselines lose.", _not_held)
CRASH = Experiment("crash", PAPER, "Crashing is fine.", _crash)
EXIT = Experiment("exit", PAPER, "Hard exits are caught.", _exit)
SLEEPY = Experiment("sleepy", PAPER, "Sleep forever.", _sleepy)
NO_RESULT = Experiment("noresult", PAPER, "Returns a dict.", _no_result)
CLAIMS = Experiment("claims", PAPER, "Two claims.", _claims)
FLAKY = Experiment("flaky", PAPER, "Sometimes breaks.", _flaky)
INCONCLUSIVE = Experiment("inconclusive", PAPER, "A control fails.", _inconclusive)
NONFINITE = Experiment("nonfinite", PAPER, "NaN measured.", _nonfinite)
GATED = Experiment("gated", PAPER, "Waits for a gate file.", _gated)
ONE_THREAD = Experiment("onethread", PAPER, "Runs on one thread.", _one_thread)
LONG = Experiment(LONG_NAME, PAPER, "A long name.", _good)
MEET_A = Experiment("meet-a", PAPER, "Runs alongside meet-b.", _rendezvous("a", "b"))
MEET_B = Experiment("meet-b", PAPER, "Runs alongside meet-a.", _rendezvous("b", "a"))
NOT_AN_EXPERIMENT = 42
"""

ENTRY_POINTS = """
[iclr26.experiments]
good = fakepkg:EXP
bad = fakepkg:MISSING
crash = fakepkg:CRASH
notheld = fakepkg:NOT_HELD
exit = fakepkg:EXIT
sleepy = fakepkg:SLEEPY
noresult = fakepkg:NO_RESULT
alias = fakepkg:EXP
notexp = fakepkg:NOT_AN_EXPERIMENT
claims = fakepkg:CLAIMS
flaky = fakepkg:FLAKY
meet-a = fakepkg:MEET_A
meet-b = fakepkg:MEET_B
inconclusive = fakepkg:INCONCLUSIVE
nonfinite = fakepkg:NONFINITE
gated = fakepkg:GATED
onethread = fakepkg:ONE_THREAD
fake-exp.a-rather-long-experiment-name-that-does-not-fit-into-eighty-columns = fakepkg:LONG
"""


@pytest.fixture
def long_name() -> str:
    """A registered fake experiment whose name is longer than a narrow table column."""
    return "fake-exp.a-rather-long-experiment-name-that-does-not-fit-into-eighty-columns"


ABORT_ENTRY_POINTS = """
[iclr26.experiments]
aborts = fakeabort:EXP
hangs = fakehang:EXP
"""


def make_site(
    site: Path, files: dict[str, str], entry_points: str, dist: str, version: str = "0.1"
) -> Path:
    """Write ``files`` (relative path -> text) and a ``dist`` dist-info registering
    ``entry_points`` into the folder ``site`` (made importable by the caller)."""
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points).lstrip())
    return site


@pytest.fixture
def site_maker():
    """:func:`make_site`, for tests that build their own fake distribution."""
    return make_site


@pytest.fixture(scope="session")
def fake_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    return make_site(site, {"fakepkg.py": FAKEPKG}, ENTRY_POINTS, "fake-exp")


@pytest.fixture(scope="session")
def abort_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A distribution whose modules abort / hang at import: only a worker may import them."""
    site = tmp_path_factory.mktemp("abortsite")
    (site / "fakeabort.py").write_text("import os\n\nos.abort()\n")
    (site / "fakehang.py").write_text("import time\n\ntime.sleep(600)\n")
    info = site / "fake_abort-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-abort\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(ABORT_ENTRY_POINTS).lstrip())
    return site


@pytest.fixture
def abort_dist(abort_site: Path, fake_dist: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(abort_site))
    monkeypatch.setenv("PYTHONPATH", str(abort_site), prepend=os.pathsep)
    return abort_site


@pytest.fixture
def fake_dist(fake_site: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make ``fake-exp`` discoverable here and in worker subprocesses (via PYTHONPATH)."""
    monkeypatch.syspath_prepend(str(fake_site))
    monkeypatch.setenv("PYTHONPATH", str(fake_site), prepend=os.pathsep)
    monkeypatch.setenv("COLUMNS", "80")  # names must still print in full (and non-tty)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)  # tests that need one set it
    monkeypatch.delitem(sys.modules, "fakepkg", raising=False)
    return fake_site
