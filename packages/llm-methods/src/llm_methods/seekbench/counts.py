"""Per-trace counts behind SeekBench's process metrics (:mod:`llm_methods.seekbench.metrics`):
each trace's evidence states, answer events, reasoning steps and low-quality-evidence episodes,
summed per (group, dataset, question) cluster by :func:`cluster_counts`. The definitions (the
official ``analysis/calibration.py``, ``grounded_reason.py`` and ``recovery.py`` at afddcb3, and
where ours differ) are in the docstring of :mod:`llm_methods.seekbench.metrics`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from llm_methods.seekbench.data import ANSWER_LABELS, ANSWER_STEP_TYPES, REASONING_TYPES

__all__ = [
    "CATEGORY_RULES",
    "COUNT_COLUMNS",
    "GROUPINGS",
    "LEVELS",
    "cluster_counts",
    "evidence_level",
    "model_category",
    "recovery_episodes",
]

LEVELS = (0, 1, 2)
#: What traces are grouped by (a trace's model name, or its agent category).
GROUPINGS = ("model", "category")
# the paper's agent categories, by model-name fragment, first match wins (a trace's own
# ``category`` field overrides); anything else is "Other"
CATEGORY_RULES = (
    (
        "DeepResearch",
        ("gpt-5", "gpt-4o", "tongyi-deepresearch", "claude-sonnet-4-5", "Qwen3-30B-A3B"),
    ),
    ("Few-shot", ("fewshot-Qwen2.5-7B-Instruct",)),
    ("CoT (Qwen)", ("cot-Qwen2.5-7B-Instruct",)),
    ("ReAct (Qwen)", ("react-Qwen2.5-7B-Instruct",)),
    ("Base", ("Qwen2.5-7B-Instruct",)),
    ("RL Agents", ("SearchR1", "DeepResearcher", "ReSearch", "ASearcher")),
)
COUNT_COLUMNS = (
    [f"n{k}" for k in LEVELS]
    + [f"a{k}" for k in LEVELS]
    + [f"c{k}" for k in LEVELS]
    + [
        "traj",
        "correct",
        "premature",
        "overcautious",
        "reason_total",
        "reason_grounded",
        "anchor_total",
        "anchor_grounded",
        "episodes",
        "recovered",
    ]
)


def evidence_level(step: dict[str, Any]) -> int | None:
    """E of a step annotated as a result (annotation type ``search_result``, any tool); else None."""
    annotation = step.get("annotation") or {}
    if not isinstance(annotation, dict) or annotation.get("type") != "search_result":
        return None
    attributes = annotation.get("attributes") or {}
    if attributes.get("information_quality") != "Sufficient":
        return 0
    return 2 if attributes.get("information_clarity") == "Clear" else 1


def model_category(trace: dict[str, Any]) -> str:
    """The paper's agent category of a trace (Base / Few-shot / RL Agents / ...)."""
    if isinstance(trace.get("category"), str) and trace["category"]:
        return trace["category"]
    name = str(trace.get("model", ""))
    for category, fragments in CATEGORY_RULES:
        if any(f in name for f in fragments):
            return category
    return "Other"


def _answer_label(step: dict[str, Any]) -> str | None:
    """``CorrectAnswer`` / ``IncorrectAnswer`` of an answer step: its annotation's label, else its
    step type (the released answer steps carry the label there only), else None."""
    label = (step.get("annotation") or {}).get("type")
    if label in ANSWER_LABELS:
        return str(label)
    return str(step["type"]) if step["type"] in ANSWER_LABELS else None


def _answer(trace: dict[str, Any]) -> tuple[int | None, int]:
    """(position of the answer event in ``trace['trace']`` or len(trace) for a final-answer-only
    trace, None when unanswered; correctness 0/1)."""
    steps = trace["trace"]
    for i, step in enumerate(steps):
        label = _answer_label(step)
        if label is not None:
            return i, int(label == "CorrectAnswer")
        if step["type"] in ANSWER_STEP_TYPES:  # an ``answer`` step without a label
            return i, int(bool(trace["is_correct"]))
    if (trace.get("final_answer") or "").strip():
        return len(steps), int(bool(trace["is_correct"]))
    return None, 0


def recovery_episodes(trace: dict[str, Any]) -> list[tuple[int, bool]]:
    """(steps to recovery, recovered) of each low-quality-evidence episode of ``trace``, as
    upstream ``recovery.detect_low_quality_episodes``: an episode starts at a result annotated
    Insufficient or not Clear (a missing label counts as not Clear) and ends at the next
    Sufficient & Clear result or correct answer (recovered); one still open at the last step is
    censored there. Times are positions along the trace. Ours: a correct answer is also read
    from the step type when the step has no annotation (the released traces' answer steps)."""
    steps = trace["trace"]
    episodes, start = [], None
    for position, step in enumerate(steps):
        annotation = step.get("annotation") or {}
        if annotation.get("type") == "search_result":
            attributes = annotation.get("attributes") or {}
            quality = attributes.get("information_quality", "")
            clarity = attributes.get("information_clarity", "")
            if start is None and (quality == "Insufficient" or clarity != "Clear"):
                start = position
            elif start is not None and quality == "Sufficient" and clarity == "Clear":
                episodes.append((position - start, True))
                start = None
        elif start is not None and _answer_label(step) == "CorrectAnswer":
            episodes.append((position - start, True))
            start = None
    if start is not None:
        episodes.append((len(steps) - 1 - start, False))
    return episodes


def _is_reasoning(step: dict[str, Any], deep_research: bool) -> bool:
    """A reasoning step of RQI (upstream ``compute_rqi``): annotated with a reasoning type, or a
    DeepResearch agent's ``search`` step."""
    annotation = step.get("annotation") or {}
    return annotation.get("type") in REASONING_TYPES or (deep_research and step["type"] == "search")


def _trace_counts(trace: dict[str, Any], threshold: int, horizon: int | None) -> dict[str, int]:
    row = dict.fromkeys(COUNT_COLUMNS, 0)
    position, correct = _answer(trace)
    steps = trace["trace"]
    # turn level, no horizon: every step up to the answer (inclusive)
    state = 0
    stop = len(steps) if position is None else min(position + 1, len(steps))
    for step in steps[:stop]:
        state = max(state, evidence_level(step) or 0)
        row[f"n{state}"] += 1
    # reasoning quality over every step of the trace (upstream compute_rqi)
    deep_research = model_category(trace) == "DeepResearch"
    for step in steps:
        if not _is_reasoning(step, deep_research):
            continue
        attributes = (step.get("annotation") or {}).get("attributes") or {}
        grounded = int(str(attributes.get("groundness", "")).lower() == "grounded")
        if "groundness" in attributes:
            row["reason_total"] += 1
            row["reason_grounded"] += grounded
        if str(attributes.get("anchor_type", "")).upper() == "EVIDENCE":
            row["anchor_total"] += 1
            row["anchor_grounded"] += grounded
    if position is not None:
        if position >= len(steps):
            row[f"n{state}"] += 1  # the final answer as its own turn
        row[f"a{state}"] += 1
        row[f"c{state}"] += correct
    # trajectory level: positions < H = min(horizon, len(trace)) (the answer turn of a
    # final-answer-only trace sits at position len(trace))
    h = len(steps) + 1 if horizon is None else min(horizon, len(steps))
    level, ever_high = 0, False
    for step in steps[:h]:
        level = max(level, evidence_level(step) or 0)
        ever_high |= level >= threshold
    if position is not None and position < h:
        row["premature"] += int(state < threshold)
    elif ever_high:
        row["overcautious"] += 1
    row["traj"] = 1
    row["correct"] = int(bool(trace["is_correct"]))
    episodes = recovery_episodes(trace)
    row["episodes"] = len(episodes)
    row["recovered"] = sum(ok for _, ok in episodes)
    return row


def cluster_counts(
    traces: Sequence[dict[str, Any]],
    threshold: int = 2,
    horizon: int | None = None,
    group_by: str = "model",
) -> pd.DataFrame:
    """One row per (group, cluster) with the summed counts every metric is a function of."""
    if group_by not in GROUPINGS:
        raise ValueError(f"group_by must be one of {GROUPINGS}, got {group_by!r}")
    if horizon is not None and horizon < 1:
        raise ValueError("horizon must be >= 1 step")
    rows = []
    for trace in traces:
        row = _trace_counts(trace, threshold, horizon)
        row["model"] = trace["model"] if group_by == "model" else model_category(trace)
        row["cluster"] = f"{trace['dataset']}\x1f{trace.get('question_id', trace['question'])}"
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame.groupby(["model", "cluster"], sort=True)[list(COUNT_COLUMNS)].sum()
