from __future__ import annotations

from pathlib import Path

import pytest

from pointcloud_pgllm.experiment import ABLATIONS, EXPERIMENT, claims, run, settings, verdict_checks


def _mean(acc: dict[str, float], auroc: dict[str, float]) -> dict[str, dict[str, float]]:
    return {a: {"accuracy": acc[a], "auroc": auroc[a], "fpr95": 0.5} for a in ABLATIONS}


def test_registered_name_and_scale() -> None:
    assert EXPERIMENT.name == "pointcloud-pgllm.pgllm"
    assert len(settings(False)["seeds"]) >= 3 and len(settings(True)["seeds"]) >= 3


def test_each_claim_is_judged_on_its_own() -> None:
    acc = {"none": 0.80, "guidance": 0.85, "propagation": 0.80, "both": 0.86}
    auroc = {"none": 0.70, "guidance": 0.72, "propagation": 0.75, "both": 0.76}
    assert verdict_checks(_mean(acc, auroc)) == {
        "propagation_auroc": True,
        "guidance_accuracy": True,
        "both_best": True,
    }
    auroc_bad = {"none": 0.70, "guidance": 0.80, "propagation": 0.705, "both": 0.79}
    acc_bad = {**acc, "guidance": 0.805}
    assert verdict_checks(_mean(acc_bad, auroc_bad)) == {
        "propagation_auroc": False,
        "guidance_accuracy": False,
        "both_best": False,
    }
    cs = claims(_mean(acc, auroc))
    assert len(cs) == 3 and all(c.verdict == "held" for c in cs)
    assert cs[0].measured["gain_points"] == pytest.approx(5.0)


@pytest.mark.slow
def test_quick_run_writes_the_ladder_plot(tmp_path: Path) -> None:
    result = run(quick=True, out_dir=tmp_path)
    assert (tmp_path / "ablation_ladder.png").stat().st_size > 0
    assert len(result.claims) == 3 and result.seeds == [0, 1, 2]
    assert 0.0 <= result.metrics["both_auroc"] <= 1.0
    assert set(result.metrics["secondary_paper_graph_not_judged"]) == set(ABLATIONS)
