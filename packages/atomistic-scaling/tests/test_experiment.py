from __future__ import annotations

import importlib.metadata
import json
import math
from pathlib import Path

import pytest

from atomistic_scaling.experiment import (
    CLAIM_TEXTS,
    EXPERIMENT,
    claims,
    run,
    settings,
    verdict_checks,
)
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
    cfg = settings(True)
    for name in ("loss_vs_compute.png", "loss_vs_data.png"):
        assert (tmp_path / name).stat().st_size > 0
    # one record per (arch, width, D checkpoint), each with a finite validation loss, read once
    # the structures seen reached the checkpoint (within one batch)
    records = json.loads((tmp_path / "records.json").read_text())
    assert all(math.isfinite(r["loss"]) and r["loss"] > 0 for r in records)
    for arch in cfg["archs"]:
        for width in cfg["widths"]:
            seen = sorted(r["D"] for r in records if (r["arch"], r["width"]) == (arch, width))
            assert len(seen) == len(cfg["d_checkpoints"])
            for d, checkpoint in zip(seen, cfg["d_checkpoints"], strict=True):
                assert checkpoint <= d < checkpoint + cfg["batch_size"]
    fits = result.metrics["fits"]
    assert set(fits) == set(cfg["archs"])
    for entry in fits.values():
        assert all(math.isfinite(entry[k]) for k in ("alpha", "beta", "a", "kappa"))
        lo, hi = entry["ci"]["beta"]
        assert lo <= hi
    # the claims carry the numbers they were judged on, and the verdicts their rules give
    assert [c.text for c in result.claims] == list(CLAIM_TEXTS.values())
    assert all(c.measured for c in result.claims)
    assert [c.verdict for c in result.claims] == [
        "held" if ok else "not held" for ok in verdict_checks(fits).values()
    ]
    assert result.claims[1].measured == {
        "beta_l1": round(fits["l1"]["beta"], 4),
        "beta_l2": round(fits["l2"]["beta"], 4),
    }
