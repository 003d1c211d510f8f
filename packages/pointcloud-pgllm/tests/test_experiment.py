from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from pointcloud_pgllm.experiment import (
    ABLATIONS,
    EXPERIMENT,
    claims,
    neighbour_purity,
    run,
    settings,
    verdict_checks,
)

INFORMATIVE = {"purity": 0.6, "chance": 0.2}  # a K = 3 graph that passes its precondition


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
    cs = claims(_mean(acc, auroc), INFORMATIVE)
    assert len(cs) == 3 and all(c.verdict == "held" for c in cs)
    assert cs[0].measured["gain_points"] == pytest.approx(5.0)


def test_scorer_at_chance_makes_every_claim_inconclusive() -> None:
    """Issue 22: no claim is held or not held while the scorer is uninformative."""
    acc = {"none": 0.10, "guidance": 0.16, "propagation": 0.10, "both": 0.16}
    auroc = {"none": 0.51, "guidance": 0.53, "propagation": 0.60, "both": 0.61}
    assert all(verdict_checks(_mean(acc, auroc)).values())  # the criteria alone would hold
    assert [c.verdict for c in claims(_mean(acc, auroc), INFORMATIVE)] == ["inconclusive"] * 3
    acc_ok = {**acc, "none": 2 / 13 + 1e-6}
    assert [c.verdict for c in claims(_mean(acc_ok, auroc), INFORMATIVE)] == [
        "held",
        "not held",
        "held",
    ]


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
    graph = result.metrics["ood_graph_neighbour_purity"]
    assert len(graph["per_seed"]["purity"]) == 3 and 0 < graph["chance"] < graph["purity"] <= 1
    auroc_ok = mean["none"]["auroc"] > 0.5 and graph["purity"] >= 2 * graph["chance"]
    needs = {"propagation_auroc": auroc_ok, "guidance_accuracy": True, "both_best": auroc_ok}
    assert [c.verdict for c in result.claims] == [
        ("held" if ok else "not held") if informative and needs[k] else "inconclusive"
        for k, ok in verdict_checks(mean).items()
    ]
    gain = result.claims[0].measured
    assert gain["auroc_none_pct"] == pytest.approx(100 * mean["none"]["auroc"], abs=0.01)
    assert gain["gain_points"] == pytest.approx(
        gain["auroc_propagation_pct"] - gain["auroc_none_pct"], abs=0.011
    )
    assert all(math.isfinite(v) for c in result.claims for v in c.measured.values())


def test_auroc_claims_need_separating_scores_and_an_informative_graph() -> None:
    """Review of issue 22, #12: (a) and (c) are inconclusive when AUROC(none) <= 0.5 or the K = 3
    graph joins same-label nodes at under twice the chance rate; (b) is not affected."""
    acc = {"none": 0.80, "guidance": 0.85, "propagation": 0.80, "both": 0.86}
    auroc = {"none": 0.70, "guidance": 0.72, "propagation": 0.75, "both": 0.76}
    assert [c.verdict for c in claims(_mean(acc, auroc), INFORMATIVE)] == ["held"] * 3
    flat = {"purity": 0.39, "chance": 0.2}  # under 2 x chance
    assert [c.verdict for c in claims(_mean(acc, auroc), flat)] == [
        "inconclusive",
        "held",
        "inconclusive",
    ]
    at_chance = {**auroc, "none": 0.50}
    assert [c.verdict for c in claims(_mean(acc, at_chance), INFORMATIVE)] == [
        "inconclusive",
        "held",
        "inconclusive",
    ]
    a = claims(_mean(acc, auroc), flat)[0]
    assert [p.passed for p in a.preconditions] == [True, True, False]


def test_neighbour_purity_of_planted_clusters_and_of_noise() -> None:
    """Clustered features give purity far above chance and pass; label-free noise stays near
    chance and fails the 2 x chance precondition."""
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1, 2, -1, -1], 20)  # 3 ID classes + OOD (one group) of 40
    centres = rng.normal(size=(5, 16)) * 5.0
    clustered = centres[np.repeat(np.arange(5), 20)] + rng.normal(size=(100, 16))
    chance = (3 * 20 * 19 / 99 + 40 * 39 / 99) / 100  # mean of (n_label - 1) / (N - 1)
    good = neighbour_purity(clustered, labels, 3)
    assert good["chance"] == pytest.approx(chance)
    assert good["purity"] > 0.95 >= 2 * good["chance"]
    noise = neighbour_purity(rng.normal(size=(100, 16)), labels, 3)
    assert noise["purity"] < 2 * noise["chance"]
