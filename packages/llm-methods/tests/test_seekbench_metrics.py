"""SeekBench defects of issue 28, each a test that failed before its fix.

- the official AUC (E at the answer predicting a correct answer) and slope under their names,
  ours (E predicting answering at a turn) as ``answer_timing_auc``;
- ``horizon`` only changes the trajectory-level rates;
- grouping by the paper's categories;
- the official ontology's tool steps are read and their results give evidence;
- an answer step's correctness follows its annotation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from llm_methods.seekbench.data import TraceError, validate_trace
from llm_methods.seekbench.metrics import analyze, cluster_counts, model_category


def _step(i: int, kind: str, label: dict[str, Any] | None = None, **body: Any) -> dict:
    step = {
        "type": kind,
        **body,
        "step_index": i,
        "trace_dependency": {"dependent_on": i - 1 if i else None},
    }
    if label is not None:
        step["annotation"] = label
    return step


def _evidence(i: int, level: int, kind: str = "search_result") -> dict:
    quality = "Sufficient" if level else "Insufficient"
    clarity = "Clear" if level == 2 else "Unclear"
    label = {
        "type": "search_result",
        "attributes": {"information_quality": quality, "information_clarity": clarity},
    }
    body = (
        {"documents": [{"title": "t", "content": "c"}]}
        if kind in ("search_result", "scholar_result")
        else {"content": "page text"}
    )
    return _step(i, kind, label, **body)


def _trace(
    levels: list[int],
    correct: bool,
    model: str = "m",
    qid: int = 0,
    pad: int = 0,
    answer: str | None = None,
) -> dict:
    """Search/result pairs reaching ``levels``, ``pad`` reasoning steps, then an answer step."""
    steps: list[dict] = []
    for level in levels:
        steps.append(_step(len(steps), "search", {"type": "InitialQuery"}, query="q"))
        steps.append(_evidence(len(steps), level))
    for _ in range(pad):
        steps.append(_step(len(steps), "reasoning", None, content="hmm"))
    kind = answer or ("CorrectAnswer" if correct else "IncorrectAnswer")
    steps.append(_step(len(steps), kind, None, content="x"))
    return {
        "question": f"Q{qid}",
        "ground_truth": ["x"],
        "reward": int(correct),
        "is_correct": correct,
        "trace": steps,
        "final_answer": "x",
        "queries": [],
        "model": model,
        "dataset": "d",
        "id": qid,
    }


def _agent(correct_at: dict[int, list[bool]], model: str = "m") -> list[dict]:
    """Traces answering at evidence level k (reached through 0 -> 1 -> k) with given outcomes."""
    out = []
    for k, outcomes in correct_at.items():
        for ok in outcomes:
            out.append(_trace([0, 1, k][: k + 1] if k else [0], ok, model, qid=len(out)))
    return out


def test_official_auc_is_evidence_at_answer_predicting_correctness() -> None:
    """Planted: correct answers only at E=2, wrong ones only at E=0 -> AUC 1; reversed -> 0."""
    good = _agent({2: [True] * 6, 0: [False] * 6}, "good")
    bad = _agent({2: [False] * 6, 0: [True] * 6}, "bad")
    rows = analyze(good + bad, n_boot=0)["agents"]
    assert rows["good"]["auc"] == 1.0 and rows["bad"]["auc"] == 0.0
    assert rows["good"]["slope"] == pytest.approx(0.5) and rows["bad"]["slope"] == -0.5
    # both answer at the same evidence levels: the answering-timing AUC cannot tell them apart
    assert rows["good"]["answer_timing_auc"] == pytest.approx(rows["bad"]["answer_timing_auc"])


def test_official_auc_and_slope_by_hand() -> None:
    # E at answer / correct: E=0: 1 of 4; E=1: 2 of 4; E=2: 3 of 4
    traces = _agent(
        {
            0: [True, False, False, False],
            1: [True, True, False, False],
            2: [True, True, True, False],
        }
    )
    row = analyze(traces, n_boot=0)["agents"]["m"]
    pos, neg = np.array([1, 2, 3]), np.array([3, 2, 1])
    better = pos[1] * neg[0] + pos[2] * (neg[0] + neg[1])
    ties = (pos * neg).sum()
    assert row["auc"] == pytest.approx((better + ties / 2) / (pos.sum() * neg.sum()))
    assert row["slope"] == pytest.approx(0.25)  # accuracies 0.25, 0.5, 0.75
    assert row["odds_ratio_e2_e0"] == pytest.approx((3.5 / 1.5) / (1.5 / 3.5))


def test_horizon_changes_only_trajectory_rates() -> None:
    """Answers after step 3 of long traces: the horizon moves the premature / over-cautious
    rates, not the turn-level CE / CCE / AUCs / odds ratio (official: horizon-free)."""
    traces = [
        _trace([0, 2], True, qid=0, pad=6),
        _trace([0, 1], False, qid=1, pad=6),
        _trace([0], False, qid=2),
        _trace([2], True, qid=3, pad=3),
    ]
    full = analyze(traces, n_boot=0)["agents"]["m"]
    short = analyze(traces, n_boot=0, horizon=3)["agents"]["m"]
    for key in ("ce", "cce", "auc", "slope", "odds_ratio_e2_e0", "answer_timing_auc"):
        assert short[key] == pytest.approx(full[key], nan_ok=True), key
    assert (short["premature_rate"], short["overcautious_rate"]) != (
        full["premature_rate"],
        full["overcautious_rate"],
    )
    # within 3 steps: trace 2 answers at E=0 (premature); trace 3 reaches E=2 and answers later
    assert (short["premature_rate"], short["overcautious_rate"]) == (0.25, 0.25)
    assert (full["premature_rate"], full["overcautious_rate"]) == (0.5, 0.0)


def test_group_by_category() -> None:
    names = {
        "Qwen2.5-7B-Instruct": "Base",
        "fewshot-Qwen2.5-7B-Instruct": "Few-shot",
        "SearchR1-nq-ppo": "RL Agents",
        "DeepResearcher-7b": "RL Agents",
        "ReSearch-Qwen-7B-Instruct": "RL Agents",
        "my-agent": "Other",
    }
    traces = [_trace([0, 2], i % 2 == 0, model, qid=i) for i, model in enumerate(names)]
    assert [model_category(t) for t in traces] == list(names.values())
    assert model_category({**traces[0], "category": "Mine"}) == "Mine"
    result = analyze(traces, n_boot=0, group_by="category")
    assert result["group_by"] == "category"
    assert {k: v["n_traces"] for k, v in result["agents"].items()} == {
        "Base": 1,
        "Few-shot": 1,
        "RL Agents": 3,
        "Other": 1,
    }
    with pytest.raises(ValueError, match="group_by"):
        analyze(traces, group_by="dataset")


@pytest.mark.parametrize(
    ("call", "result"),
    [
        ("visit", "visit_result"),
        ("google_scholar", "scholar_result"),
        ("parse_file", "file_result"),
        ("python", "python_result"),
    ],
)
def test_official_ontology_tool_steps_are_read_and_give_evidence(call: str, result: str) -> None:
    body = {
        "visit": {"url": ["https://a", "https://b"], "goal": "g"},
        "google_scholar": {"query": ["a", "b"]},
        "parse_file": {"files": ["f.pdf"]},
        "python": {"code": "print(1)"},
    }[call]
    trace = _trace([0], True)
    answer = trace["trace"].pop()
    trace["trace"] += [_step(2, call, {"type": "FollowUpQuery"}, **body), _evidence(3, 2, result)]
    answer["step_index"], answer["trace_dependency"] = 4, {"dependent_on": 3}
    trace["trace"].append(answer)
    validate_trace(trace)
    counts = cluster_counts([trace]).iloc[0]
    assert counts["a2"] == 1 and counts["c2"] == 1  # answered at E=2 reached by the tool


def test_tool_step_body_is_type_checked() -> None:
    trace = _trace([0], True)
    trace["trace"][0] = _step(0, "visit", None, url=3)
    with pytest.raises(TraceError, match="'url' must be a string or a list of strings"):
        validate_trace(trace, "f.jsonl:1")


def test_answer_correctness_follows_its_annotation() -> None:
    """An ``answer`` step labelled IncorrectAnswer counts wrong even where is_correct is True."""
    trace = _trace([0, 2], True, answer="answer")
    trace["trace"][-1]["annotation"] = {"type": "IncorrectAnswer"}
    validate_trace(trace)
    counts = cluster_counts([trace]).iloc[0]
    assert counts["a2"] == 1 and counts["c2"] == 0
    trace["trace"][-1]["annotation"] = {"type": "CorrectAnswer"}
    assert cluster_counts([trace]).iloc[0]["c2"] == 1
    del trace["trace"][-1]["annotation"]  # no label: the trace's is_correct
    assert cluster_counts([trace]).iloc[0]["c2"] == 1
