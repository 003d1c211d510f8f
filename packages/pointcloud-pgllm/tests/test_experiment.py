from __future__ import annotations

import math
import statistics
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


def test_scorer_at_chance_makes_every_claim_inconclusive() -> None:
    """Issue 22: no claim is held or not held while the scorer is uninformative."""
    acc = {"none": 0.10, "guidance": 0.16, "propagation": 0.10, "both": 0.16}
    auroc = {"none": 0.50, "guidance": 0.52, "propagation": 0.60, "both": 0.61}
    assert all(verdict_checks(_mean(acc, auroc)).values())  # the criteria alone would hold
    assert [c.verdict for c in claims(_mean(acc, auroc))] == ["inconclusive"] * 3
    acc_ok = {**acc, "none": 2 / 13 + 1e-6}
    assert [c.verdict for c in claims(_mean(acc_ok, auroc))] == ["held", "not held", "held"]


@pytest.mark.slow
def test_quick_run_end_to_end(tmp_path: Path) -> None:
    result = run(quick=True, out_dir=tmp_path)
    assert (tmp_path / "ablation_ladder.png").stat().st_size > 0
    assert result.seeds == [0, 1, 2]
    per_seed = result.metrics["per_seed"]
    for a in ABLATIONS:
        for m in ("accuracy", "auroc", "fpr95"):
            values = per_seed[a][m]
            assert len(values) == 3 and all(0.0 <= v <= 1.0 for v in values), (a, m, values)
            # the reported number is the seed mean of the per-seed values
            assert result.metrics[f"{a}_{m}"] == pytest.approx(statistics.fmean(values), abs=1e-4)
    assert set(result.metrics["secondary_paper_graph_not_judged"]) == set(ABLATIONS)
    symmetric = result.metrics["secondary_symmetric_graph_not_judged"]
    assert set(symmetric) == {"propagation", "both"}
    assert set(symmetric["both"]) == {"accuracy", "auroc", "fpr95"}
    # the claims carry the numbers (finite, in points) and the verdicts their rules give
    mean = {a: {m: statistics.fmean(v) for m, v in per_seed[a].items()} for a in ABLATIONS}
    informative = mean["none"]["accuracy"] >= 2 / 13
    assert [c.verdict for c in result.claims] == [
        ("held" if ok else "not held") if informative else "inconclusive"
        for ok in verdict_checks(mean).values()
    ]
    gain = result.claims[0].measured
    assert gain["auroc_none_pct"] == pytest.approx(100 * mean["none"]["auroc"], abs=0.01)
    assert gain["gain_points"] == pytest.approx(
        gain["auroc_propagation_pct"] - gain["auroc_none_pct"], abs=0.011
    )
    assert all(math.isfinite(v) for c in result.claims for v in c.measured.values())
