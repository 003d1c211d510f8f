from __future__ import annotations

import numpy as np
import pytest

from pointcloud_pgllm.scorers import HTTPChatScorer, Query, ScorerError, build_prompt, parse_scores

CLASSES = ["chair", "table", "lamp"]


def test_prompt_holds_caption_neighbours_and_classes() -> None:
    text = build_prompt(Query("a tall object.", ("n1", "n2", "n3")), CLASSES)
    assert "This is an object of a tall object." in text
    assert "1. n1" in text and "3. n3" in text and "chair, table, lamp" in text
    assert "JSON" in text


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('{"chair": 90, "table": 5, "lamp": 0}', [90, 5, 0]),
        ('Sure! ```json\n{"Chair": 10, "TABLE": 150, "lamp": -3}\n```', [10, 100, 0]),
        ('{"scores": [1, 2, 3]}', [1, 2, 3]),
    ],
)
def test_parse_scores(answer: str, expected: list[float]) -> None:
    np.testing.assert_allclose(parse_scores(answer, CLASSES), expected)


@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        ("no json here", "no JSON object"),
        ('{"chair": 1}', "'table'"),
        ('{"scores": [1]}', "expected 3"),
        ("[1, 2]", "no JSON object"),
    ],
)
def test_parse_scores_errors(answer: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_scores(answer, CLASSES)


def test_http_scorer_retries_then_parses(chat_server) -> None:
    url, replies, seen = chat_server
    replies += [
        "I think it is a chair",
        '{"chair": 80, "table": 20, "lamp": 0}',
        '{"probability": 0.7}',
    ]
    scorer = HTTPChatScorer(url, "test-model", backoff_s=0.0)
    s = scorer.score([Query("a chair-like thing")], CLASSES)
    np.testing.assert_allclose(s, [[0.8, 0.2, 0.0]])
    assert len(seen) == 2 and seen[0]["temperature"] == 0.1 and seen[0]["model"] == "test-model"
    np.testing.assert_allclose(scorer.id_probability([Query("x")], CLASSES), [0.7])


def test_http_scorer_gives_up_with_a_clear_error(chat_server) -> None:
    url, _, seen = chat_server
    with pytest.raises(ScorerError, match=r"127\.0\.0\.1.*after 3 tries.*no JSON object"):
        HTTPChatScorer(url, "m", retries=3, backoff_s=0.0).score([Query("x")], CLASSES)
    assert len(seen) == 3


def test_http_scorer_unreachable_endpoint() -> None:
    with pytest.raises(ScorerError, match="after 2 tries"):
        HTTPChatScorer("http://127.0.0.1:9/v1", "m", retries=2, backoff_s=0.0, timeout_s=2).score(
            [Query("x")], CLASSES
        )


@pytest.mark.slow
def test_smollm2_likelihood_scorer_prefers_the_described_class() -> None:
    from pointcloud_pgllm.scorers import LikelihoodScorer

    scorer = LikelihoodScorer()
    s = scorer.score(
        [Query("an airplane with two wings and a tail"), Query("a bottle for water")],
        ["airplane", "bottle", "bed"],
    )
    assert s.shape == (2, 3) and np.allclose(s.sum(1), 1.0)
    assert s[0].argmax() == 0  # the airplane description
    assert s[1, 1] > s[0, 1]  # "bottle" gains when the description is of a bottle
