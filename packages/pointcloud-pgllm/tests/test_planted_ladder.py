"""Planted signals through the experiment's whole measurement chain (issue 39: a planted-signal
test per claim). ``experiment.ladder_metrics`` (the judged ladder of ``run_seed``: official
K = 10 graph for accuracy, K = 3 for AUROC / FPR95) and ``experiment.claims`` run on support
sets whose structure is known: two ID classes and one OOD group, each a tight cluster of
features; half of each ID class's captions name its class, the rest are blank, and the OOD
captions name a random ID class (40 %) or are blank. A word-counting scorer stands in for the
LLM. Guidance (neighbours' captions) and propagation (neighbours' scores) then carry the class
words to the blank ID clouds, and average the OOD group's contradicting words away, so every
claim must hold; null methods in the method's place (a = 0: propagation returns S_0; a scorer
that ignores the neighbours' captions) must not hold, and features without cluster structure
must fail the graph control."""

from __future__ import annotations

import numpy as np

from pointcloud_pgllm.experiment import claims, ladder_metrics, neighbour_purity

CLASSES = ["zero", "one"]
PER_GROUP = 24
SEEDS = range(10)


class WordScorer:
    """Class scores from the class words in the query's caption (and, with ``guided``, its
    neighbours' captions): ``(count + 1)`` per class, normalised."""

    def __init__(self, guided: bool = True) -> None:
        self.guided = guided

    def score(self, queries, class_names):
        out = []
        for q in queries:
            words = " ".join([q.caption, *(q.neighbours if self.guided else ())]).split()
            out.append([words.count(c) + 1.0 for c in class_names])
        s = np.asarray(out)
        return s / s.sum(axis=1, keepdims=True)


def _support_set(seed: int, clustered: bool = True) -> tuple[np.ndarray, list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    group = np.repeat([0, 1, 2], PER_GROUP)  # ID class 0, ID class 1, OOD
    labels = np.where(group < 2, group, -1)
    centres = rng.normal(size=(3, 8)) * 4.0
    noise = rng.normal(size=(len(group), 8))
    features = centres[group] + noise if clustered else noise
    captions = []
    for g in group:
        if g < 2:
            captions.append(CLASSES[g] if rng.random() < 0.5 else "blank")
        else:
            captions.append(CLASSES[rng.integers(2)] if rng.random() < 0.4 else "blank")
    return features, captions, labels


def _ladder(
    clustered: bool = True, guided: bool = True, alpha: float = 0.5
) -> tuple[dict[str, dict[str, list[float]]], dict[str, float]]:
    """Per-seed metrics ``per_seed[ablation][metric]`` over 10 planted seeds and the seed-mean
    K = 3 neighbour purity, as ``experiment.run`` collects them."""
    per_seed: dict[str, dict[str, list[float]]] = {}
    purity: dict[str, list[float]] = {"purity": [], "chance": []}
    for seed in SEEDS:
        features, captions, labels = _support_set(seed, clustered)
        metrics, _ = ladder_metrics(
            features, captions, WordScorer(guided), CLASSES, labels, alpha=alpha
        )
        for a, by_metric in metrics.items():
            for m, v in by_metric.items():
                per_seed.setdefault(a, {}).setdefault(m, []).append(v)
        for m, v in neighbour_purity(features, labels, 3).items():
            purity[m].append(v)
    return per_seed, {m: float(np.mean(v)) for m, v in purity.items()}


def test_planted_structure_holds_every_claim() -> None:
    per_seed, graph = _ladder()
    assert graph["purity"] > 0.95  # the clusters are what the K = 3 graph sees
    cs = claims(per_seed, graph)
    assert [c.verdict for c in cs] == ["held"] * 3, [c.effect for c in cs]
    assert all(p.passed for c in cs for p in c.preconditions)


def test_null_steps_are_not_held() -> None:
    """a = 0 makes propagation return the unrefined scores: (a)'s gain is exactly 0. A scorer
    that never reads the neighbours' captions makes guidance the unrefined scores: (b)'s gain
    is exactly 0. Both are below the 1-point thresholds."""
    a = claims(*_ladder(alpha=0.0))[0]
    assert a.verdict == "not held" and a.effect.method == "exact" and a.effect.estimate == 0.0
    b = claims(*_ladder(guided=False))[1]
    assert b.verdict == "not held" and b.effect.method == "exact" and b.effect.estimate == 0.0


def test_unstructured_features_fail_the_graph_control() -> None:
    """Without cluster structure the K = 3 graph is no purer than 2 x chance: (a) and (c) are
    inconclusive by their control, whatever their intervals say; (b) has no graph control."""
    per_seed, graph = _ladder(clustered=False)
    assert graph["purity"] < 2 * graph["chance"]
    a, _, c = claims(per_seed, graph)
    for claim in (a, c):
        assert claim.verdict == "inconclusive", claim.effect
        assert [p.passed for p in claim.preconditions][-1] is False
