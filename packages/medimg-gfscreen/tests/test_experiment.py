from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

from medimg_gfscreen import experiment


def test_thresholds_are_the_preregistered_ones() -> None:
    assert experiment.RECALL_MAX_DROP == 0.05
    assert experiment.FOCUS_FLOP_REDUCTION_MIN == 3.0
    assert experiment.GATE == 0.9
    assert experiment.EXPERIMENT.name == "medimg-gfscreen.glance_focus"


def test_settings_quick_is_smaller_than_full() -> None:
    quick, full = experiment.settings(True), experiment.settings(False)
    assert quick["n_train"] < full["n_train"] and quick["epochs"] < full["epochs"]
    assert full["ablations"] and not quick["ablations"]


def test_registered_entry_point() -> None:
    names = {ep.name for ep in entry_points(group="iclr26.experiments")}
    if "medimg-gfscreen.glance_focus" not in names:
        pytest.skip("package not re-installed since the entry point was added")
    ep = next(
        ep
        for ep in entry_points(group="iclr26.experiments")
        if ep.name == "medimg-gfscreen.glance_focus"
    )
    assert ep.load() is experiment.EXPERIMENT


@pytest.mark.slow
def test_quick_run_returns_three_claims(tmp_path: Path) -> None:
    result = experiment.run(quick=True, out_dir=tmp_path)
    assert len(result.claims) == 3
    assert (tmp_path / "recall_dsc_selection.png").is_file()
    assert result.metrics["total_flop_reduction"] > 0
    assert all(claim.verdict in ("held", "not held") for claim in result.claims)
