from __future__ import annotations

import importlib.metadata

import pytest

from iclr26_common import Experiment
from rf_matid.experiment import EXPERIMENT, SPLITS, settings, verdict_checks


def test_registered_under_the_entry_point_group() -> None:
    (entry,) = [
        ep
        for ep in importlib.metadata.entry_points(group="iclr26.experiments")
        if ep.name == "rf-matid.benchmark"
    ]
    assert entry.load() is EXPERIMENT
    assert isinstance(EXPERIMENT, Experiment) and "2601.20377" in EXPERIMENT.paper


@pytest.mark.parametrize(
    ("accuracy", "expected"),
    [
        ({"S1": 0.95, "S2-mod2": 0.6, "S2-mod3": 0.7, "S3-mod1": 0.93}, (True, True, True)),
        ({"S1": 0.70, "S2-mod2": 0.3, "S2-mod3": 0.3, "S3-mod1": 0.70}, (False, True, True)),
        ({"S1": 0.95, "S2-mod2": 0.9, "S2-mod3": 0.9, "S3-mod1": 0.95}, (True, False, True)),
        ({"S1": 0.95, "S2-mod2": 0.5, "S2-mod3": 0.5, "S3-mod1": 0.85}, (True, True, False)),
    ],
)
def test_verdict_rule(accuracy: dict[str, float], expected: tuple[bool, bool, bool]) -> None:
    checks = verdict_checks(accuracy)
    assert tuple(checks.values()) == expected


@pytest.mark.parametrize("quick", [True, False])
def test_settings_cover_every_split(quick: bool) -> None:
    import numpy as np

    from rf_matid.splits import make_split

    config = settings(quick)
    distances, angles = np.meshgrid(config["distances_mm"], config["angles_deg"])
    for split in SPLITS:
        name, _, mod = split.partition("-mod")
        parts = make_split(distances.ravel(), angles.ravel(), name, int(mod or 0))
        assert all(len(parts[p]) > 0 for p in ("train", "val", "test")), split
