from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from atomistic_scaling.experiment import EXPERIMENT, claims, run, settings, verdict_checks
from iclr26_common import Experiment


def _fits(beta: dict[str, tuple[float, float, float]], a: float = 0.5) -> dict:
    return {
        arch: {"beta": b, "ci": {"beta": (lo, hi)}, "a": a} for arch, (b, lo, hi) in beta.items()
    }


def test_registered_under_the_entry_point_group() -> None:
    (entry,) = [
        ep
        for ep in importlib.metadata.entry_points(group="iclr26.experiments")
        if ep.name == "atomistic-scaling.scaling"
    ]
    assert entry.load() is EXPERIMENT
    assert isinstance(EXPERIMENT, Experiment) and "2510.09768" in EXPERIMENT.paper


@pytest.mark.parametrize(
    ("beta", "a", "expected"),
    [
        (
            {"mpnn": (0.2, 0.15, 0.25), "l1": (0.4, 0.3, 0.5), "l2": (0.5, 0.4, 0.6)},
            0.5,
            (True, True, True),
        ),
        # overlapping CIs: l1's lower end below the MPNN's upper end
        (
            {"mpnn": (0.2, 0.15, 0.35), "l1": (0.4, 0.3, 0.5), "l2": (0.5, 0.4, 0.6)},
            0.5,
            (False, True, True),
        ),
        (
            {"mpnn": (0.2, 0.15, 0.25), "l1": (0.5, 0.3, 0.7), "l2": (0.4, 0.3, 0.5)},
            0.7,
            (True, False, False),
        ),
    ],
)
def test_verdict_checks(beta: dict, a: float, expected: tuple[bool, ...]) -> None:
    checks = verdict_checks(_fits(beta, a))
    assert tuple(checks.values()) == expected
    assert [c.verdict for c in claims(_fits(beta, a))] == [
        "held" if v else "not held" for v in expected
    ]


def test_scales() -> None:
    quick, full = settings(True), settings(False)
    assert {"mpnn", "l1", "l2"} <= set(quick["archs"]) and set(quick["archs"]) <= set(full["archs"])
    assert max(quick["d_checkpoints"]) < max(full["d_checkpoints"])


@pytest.mark.slow
def test_quick_run_end_to_end(tmp_path: Path) -> None:
    result = run(quick=True, out_dir=tmp_path)
    assert len(result.claims) == 3
    assert (tmp_path / "loss_vs_compute.png").is_file()
    assert set(result.metrics["fits"]) == set(settings(True)["archs"])
