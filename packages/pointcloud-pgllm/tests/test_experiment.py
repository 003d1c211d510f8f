from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from pointcloud_pgllm.experiment import (
    ABLATIONS,
    CLAIM_TEXTS,
    EXPERIMENT,
    claims,
    neighbour_purity,
    run,
    settings,
)

INFORMATIVE = {"purity": 0.6, "chance": 0.2}  # a K = 3 graph that passes its precondition
SEEDS = 10


def _per_seed(
    acc: dict[str, float], auroc: dict[str, float], noise: float = 0.005, seed: int = 0
) -> dict[str, dict[str, list[float]]]:
    """Planted per-seed metrics: each ablation's value plus a per-seed shift shared by every
    ablation of that seed (the seed's data) and a small independent jitter."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(0, 0.03, SEEDS)
    out = {}
    for a in ABLATIONS:
        jitter = rng.normal(0, noise, (2, SEEDS))
        out[a] = {
            "accuracy": (acc[a] + shared + jitter[0]).tolist(),
            "auroc": (auroc[a] + shared + jitter[1]).tolist(),
            "fpr95": [0.5] * SEEDS,
        }
    return out


ACC = {"none": 0.80, "guidance": 0.85, "propagation": 0.80, "both": 0.86}
AUROC = {"none": 0.70, "guidance": 0.72, "propagation": 0.75, "both": 0.78}


def test_registered_name_and_scale() -> None:
    assert EXPERIMENT.name == "pointcloud-pgllm.pgllm"
    assert len(settings(False)["seeds"]) == 10 and len(settings(True)["seeds"]) >= 3
    full = settings(False)
    assert 13 * full["n_test"] + 10 * full["n_ood"] == 2560  # 10x the issue-22 256 nodes


def test_every_claim_can_hold() -> None:
    """Planted gains of 5 (a), 5 (b) and 3 (c) points over a shared per-seed shift: held."""
    cs = claims(_per_seed(ACC, AUROC), INFORMATIVE)
    assert [c.verdict for c in cs] == ["held"] * 3, [c.effect for c in cs]
    assert all(c.effect is not None and c.effect.method == "paired t" for c in cs)
    assert cs[0].effect.estimate == pytest.approx(5.0, abs=0.5)
    assert cs[0].effect.n == SEEDS and "seeds" in cs[0].effect.units


def test_null_methods_are_not_held() -> None:
    """The baseline in the method's place: propagation = none, guidance = none and both = the
    better single step give a zero gain, below the 1-point thresholds of (a), (b), and (c)
    fails when both is 3 points worse than the better single step."""
    per_seed = _per_seed(ACC, AUROC)
    per_seed["propagation"] = per_seed["none"]
    per_seed["guidance"] = {**per_seed["guidance"], "accuracy": per_seed["none"]["accuracy"]}
    a, b, _ = claims(per_seed, INFORMATIVE)
    assert (a.verdict, b.verdict) == ("not held", "not held")
    assert a.effect.method == "exact" and a.effect.estimate == 0.0
    worse = _per_seed(ACC, {**AUROC, "both": 0.72})
    assert claims(worse, INFORMATIVE)[2].verdict == "not held"


def test_claims_are_underpowered_near_their_thresholds() -> None:
    """A 1.2-point mean gain with a +-3-point per-seed spread straddles the 1-point threshold."""
    per_seed = _per_seed(ACC, AUROC)
    swing = 0.012 + 0.03 * np.resize([1.0, -1.0], SEEDS)
    per_seed["propagation"]["auroc"] = (np.array(per_seed["none"]["auroc"]) + swing).tolist()
    per_seed["guidance"]["accuracy"] = (np.array(per_seed["none"]["accuracy"]) + swing).tolist()
    a, b, _ = claims(per_seed, INFORMATIVE)
    for claim in (a, b):
        assert claim.verdict == "inconclusive" and claim.reason == "underpowered", claim.effect
        assert claim.effect.estimate == pytest.approx(1.2)


def test_guidance_claim_names_the_tfidf_scorer() -> None:
    assert "TF-IDF" in CLAIM_TEXTS["guidance_accuracy"]
    assert "not in-context reasoning" in CLAIM_TEXTS["guidance_accuracy"]


def test_scorer_at_chance_makes_every_claim_inconclusive() -> None:
    """Issue 22: no claim is held or not held while the scorer is uninformative."""
    acc = {"none": 0.10, "guidance": 0.16, "propagation": 0.10, "both": 0.16}
    auroc = {"none": 0.53, "guidance": 0.55, "propagation": 0.62, "both": 0.66}
    cs = claims(_per_seed(acc, auroc, noise=0.001), INFORMATIVE)
    assert [c.verdict for c in cs] == ["inconclusive"] * 3
    assert [c.criterion_met for c in cs] == [True, True, True]  # the intervals alone would hold


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
    # the claims carry the numbers (finite, in points) and effects over the three seeds
    for c in result.claims:
        assert c.effect is not None and c.effect.n == 3
    gain = 100 * (np.array(per_seed["propagation"]["auroc"]) - per_seed["none"]["auroc"])
    assert result.claims[0].effect.estimate == pytest.approx(gain.mean())
    assert all(math.isfinite(v) for c in result.claims for v in c.measured.values())
    graph = result.metrics["ood_graph_neighbour_purity"]
    assert len(graph["per_seed"]["purity"]) == 3 and 0 < graph["chance"] < graph["purity"] <= 1


def test_auroc_claims_need_separating_scores_and_an_informative_graph() -> None:
    """Review of issue 22, #12: (a) and (c) are inconclusive when AUROC(none) <= 0.5 or the K = 3
    graph joins same-label nodes at under twice the chance rate; (b) is not affected."""
    per_seed = _per_seed(ACC, AUROC)
    assert [c.verdict for c in claims(per_seed, INFORMATIVE)] == ["held"] * 3
    flat = {"purity": 0.39, "chance": 0.2}  # under 2 x chance
    assert [c.verdict for c in claims(per_seed, flat)] == ["inconclusive", "held", "inconclusive"]
    at_chance = _per_seed(ACC, {a: v - 0.25 for a, v in AUROC.items()})  # none at ~0.45
    assert [c.verdict for c in claims(at_chance, INFORMATIVE)] == [
        "inconclusive",
        "held",
        "inconclusive",
    ]
    a = claims(per_seed, flat)[0]
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
