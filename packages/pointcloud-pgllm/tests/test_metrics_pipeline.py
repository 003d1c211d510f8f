from __future__ import annotations

import numpy as np
import pytest
import torch

from pointcloud_pgllm.metrics import accuracy, auroc, fpr_at_95_tpr, msp
from pointcloud_pgllm.pipeline import ABLATIONS, PGLLMConfig, evaluate, make_queries, pgllm_scores
from pointcloud_pgllm.scorers import TfidfScorer


def test_auroc_and_fpr95_by_hand() -> None:
    is_id = np.array([1] * 20 + [0] * 10)
    perfect = np.r_[np.linspace(1, 2, 20), np.linspace(0, 0.9, 10)]
    assert auroc(perfect, is_id) == 1.0 and fpr_at_95_tpr(perfect, is_id) == 0.0
    # one OOD sample above all ID: reaching TPR >= 0.95 costs exactly that one false positive
    score = perfect.copy()
    score[-1] = 5.0
    assert fpr_at_95_tpr(score, is_id) == pytest.approx(0.1)
    assert auroc(-perfect, is_id) == 0.0


def test_msp_and_accuracy() -> None:
    s = np.array([[0.2, 0.2], [3.0, 1.0], [0.0, 0.0]])
    np.testing.assert_allclose(msp(s), [0.5, 0.75, 0.5])
    assert accuracy(s[:2], np.array([1, 0])) == 0.5


def test_make_queries_adds_neighbour_captions() -> None:
    qs = make_queries(["a", "b", "c"], np.array([[1], [2], [0]]))
    assert qs[0].caption == "a" and qs[0].neighbours == ("b",)


class CountingScorer:
    """Scores class 0 by the number of words 'zero' in the caption + neighbours."""

    def __init__(self) -> None:
        self.calls = 0

    def score(self, queries, class_names):
        self.calls += 1
        out = []
        for q in queries:
            text = " ".join([q.caption, *q.neighbours])
            z = text.count("zero")
            out.append([z + 1.0, text.count("one") + 1.0])
        s = np.asarray(out)
        return s / s.sum(1, keepdims=True)


def test_ladder_guidance_uses_neighbours_and_propagation_smooths() -> None:
    torch.manual_seed(0)
    # two tight clusters; one caption in cluster 0 is uninformative
    feats = torch.cat([torch.randn(5, 4) * 0.01 + 3, torch.randn(5, 4) * 0.01 - 3])
    captions = ["zero"] * 4 + ["blank"] + ["one"] * 5
    labels = np.array([0] * 5 + [1] * 5)
    scorer = CountingScorer()
    config = PGLLMConfig(graph_k=3, guidance_k=3)
    scores = pgllm_scores(feats, captions, scorer, ["c0", "c1"], config)
    assert list(scores) == list(ABLATIONS) and scorer.calls == 2
    assert scores["none"][4].argmax() != 0 or scores["none"][4][0] == scores["none"][4][1]
    assert scores["guidance"][4].argmax() == 0  # its neighbours' captions say 'zero'
    assert scores["propagation"][4].argmax() == 0  # the graph carries its cluster's scores
    assert evaluate(scores["both"], labels)["accuracy"] == 1.0
    assert {"graph_s", "score_plain_s", "score_guided_s", "propagate_s"} <= set(config.timings)


def test_evaluate_reports_ood_metrics_only_with_both_kinds() -> None:
    s = np.array([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8]])
    assert set(evaluate(s, np.array([0, 1, 1]))) == {"accuracy"}
    assert set(evaluate(s, np.array([0, -1, 1]))) == {"accuracy", "auroc", "fpr95"}


def test_tfidf_scorer_learns_words_and_checks_classes() -> None:
    from pointcloud_pgllm.errors import PGLLMInputError
    from pointcloud_pgllm.scorers import Query

    scorer = TfidfScorer().fit(
        ["tall thin legs", "flat wide board"] * 3, [0, 1] * 3, ["lamp", "table"]
    )
    s = scorer.score([Query("wide flat"), Query("thin", ("tall legs",))], ["table", "lamp"])
    assert s.shape == (2, 2) and s[0].argmax() == 0 and s[1].argmax() == 1
    with pytest.raises(PGLLMInputError, match="'sofa'"):
        scorer.score([Query("x")], ["sofa"])
