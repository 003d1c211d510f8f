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

from iclr26_common import Experiment, Result

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
    return Result("not held", "0.4 < 0.5.", {"acc": 0.4}, [7], "tiny")


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


@pytest.fixture
def fake_dist(fake_site: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make ``fake-exp`` discoverable here and in worker subprocesses (via PYTHONPATH)."""
    monkeypatch.syspath_prepend(str(fake_site))
    monkeypatch.setenv("PYTHONPATH", str(fake_site), prepend=os.pathsep)
    monkeypatch.setenv("COLUMNS", "200")  # wide, stable rich output
    monkeypatch.delitem(sys.modules, "fakepkg", raising=False)
    return fake_site
