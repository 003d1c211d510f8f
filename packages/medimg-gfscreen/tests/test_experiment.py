from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from medimg_gfscreen import experiment


def _per_seed(
    gf_recall: float = 0.8,
    sw_recall: float = 0.8,
    gf_flops: float = 1.0,
    sw_flops: float = 4.0,
    gf_fp: float = 1.0,
    sw_fp: float = 5.0,
) -> list[dict[str, Any]]:
    """One seed's ``main`` summaries with the numbers the claims read."""
    glance_focus = {
        "lesion_recall": gf_recall,
        "focus_gflops_per_volume": gf_flops,
        "glance_gflops_per_volume": 0.5,
        "fp_voxels_healthy": gf_fp,
        "selection_rate": 0.2,
    }
    sliding_window = {
        "lesion_recall": sw_recall,
        "focus_gflops_per_volume": sw_flops,
        "fp_voxels_healthy": sw_fp,
    }
    return [{"main": {"glance_focus": glance_focus, "sliding_window": sliding_window}}]


def _verdicts(**numbers: float) -> list[str]:
    claims, _ = experiment.build_claims(_per_seed(**numbers))
    return [claim.verdict for claim in claims]


def test_recall_claim_allows_a_five_point_drop_and_needs_a_learned_focus() -> None:
    assert _verdicts(gf_recall=0.76, sw_recall=0.80)[0] == "held"
    assert _verdicts(gf_recall=0.74, sw_recall=0.80)[0] == "not held"
    # 0.3 >= 0.3 - 0.05, but a sliding window that finds under half the lesions tests nothing
    assert _verdicts(gf_recall=0.3, sw_recall=0.3)[0] == "not held"


def test_flop_claim_needs_three_fold_and_a_selected_tile() -> None:
    assert _verdicts(gf_flops=1.0, sw_flops=3.0)[1] == "held"
    assert _verdicts(gf_flops=1.0, sw_flops=2.9)[1] == "not held"
    claims, values = experiment.build_claims(_per_seed(gf_flops=0.0))
    assert claims[1].verdict == "not held" and values["reduction"] is None  # gate selected nothing


def test_false_positive_claim_is_strict() -> None:
    assert _verdicts(gf_fp=1.0, sw_fp=2.0)[2] == "held"
    assert _verdicts(gf_fp=0.0, sw_fp=0.0)[2] == "not held"


def test_settings_quick_is_smaller_than_full() -> None:
    quick, full = experiment.settings(True), experiment.settings(False)
    assert quick["n_train"] < full["n_train"] and quick["epochs"] < full["epochs"]
    assert full["ablations"] and not quick["ablations"]


def test_registered_entry_point() -> None:
    """The installed distribution registers the experiment under its documented name."""
    (ep,) = [
        ep
        for ep in entry_points(group="iclr26.experiments")
        if ep.name == "medimg-gfscreen.glance_focus"
    ]
    assert ep.load() is experiment.EXPERIMENT
    assert experiment.EXPERIMENT.name == "medimg-gfscreen.glance_focus"


@pytest.mark.slow
def test_quick_run_returns_three_claims(tmp_path: Path) -> None:
    result = experiment.run(quick=True, out_dir=tmp_path)
    assert len(result.claims) == 3
    assert (tmp_path / "recall_dsc_selection.png").is_file()
    assert result.metrics["total_flop_reduction"] > 0
    assert all(claim.verdict in ("held", "not held") for claim in result.claims)
