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

from iclr26_common import Claim, Experiment, Result

PAPER = "Fake Paper (arXiv:0000.00000)"


def _good(quick, out_dir):
    (out_dir / "curve.png").write_bytes(b"not really a png")
    return Result(
        verdict="held",
        summary="Our accuracy 0.9 beats the 0.5 baseline.",
        metrics={"acc": 0.9, "nested": {"f1": 0.8}},
        seeds=[0, 1],
        scale="2 classes, 1 epoch" + (" (quick)" if quick else ""),
        table_markdown="| model | acc |\\n|---|---|\\n| ours | 0.9 |",
        plots=["curve.png"],
    )


def _not_held(quick, out_dir):
    return Result(verdict="not held", summary="0.4 < 0.5.", metrics={"acc": 0.4}, seeds=[7], scale="tiny")


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
        deadline = time.time() + 20
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
"""

ABORT_ENTRY_POINTS = """
[iclr26.experiments]
aborts = fakeabort:EXP
hangs = fakehang:EXP
"""


@pytest.fixture(scope="session")
def fake_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    (site / "fakepkg.py").write_text(FAKEPKG)
    info = site / "fake_exp-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-exp\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(ENTRY_POINTS).lstrip())
    return site


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
    monkeypatch.setenv("COLUMNS", "200")  # wide, stable rich output
    monkeypatch.delitem(sys.modules, "fakepkg", raising=False)
    return fake_site
