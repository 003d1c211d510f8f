"""SeekBench trace format (upstream ``data/seekbench_data.jsonl``): reader, validator, writer.

One JSON object per line with ``question``, ``ground_truth`` (list), ``reward``, ``is_correct``,
``trace`` (list of steps), ``final_answer``, ``queries``, ``model``, ``dataset``, ``id``. A step
has ``type`` (``reasoning``, a tool call ``search`` | ``visit`` | ``google_scholar`` |
``parse_file`` | ``python``, its result ``search_result`` | ``visit_result`` | ``scholar_result`` |
``file_result`` | ``python_result``, or an answer ``CorrectAnswer`` | ``IncorrectAnswer`` |
``answer``: the official ontology), a body (:data:`BODY_FIELDS`), ``step_index``,
``trace_dependency.dependent_on`` and (optionally, when labelled) ``annotation{type,
attributes}``; a result's annotation type is ``search_result``, an answer's ``CorrectAnswer`` |
``IncorrectAnswer``. Every violation raises
:class:`TraceError` naming the file, line, trace id and step index.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from iclr26_common.textio import input_file
from llm_methods.jsonl import read_jsonl

__all__ = [
    "ANCHOR_TYPES",
    "ANSWER_LABELS",
    "ANSWER_STEP_TYPES",
    "ATTRIBUTE_VALUES",
    "QUERY_TYPES",
    "REASONING_TYPES",
    "TraceError",
    "read_traces",
    "result_annotation_coverage",
    "validate_trace",
    "write_traces",
]

REASONING_TYPES = ("StateAssessment", "PlanFormation", "InformationSynthesis")
QUERY_TYPES = ("InitialQuery", "RefinedQuery", "FollowUpQuery", "RepeatQuery")
ANCHOR_TYPES = ("EVIDENCE", "QUESTION", "TRACE", "NONE")
# "Unspecified": what the official annotator writes when its judge call fails (counts as
# not Sufficient / not Clear, as in the official analysis)
ATTRIBUTE_VALUES: dict[str, tuple[str, ...]] = {
    "information_quality": ("Sufficient", "Insufficient", "Unspecified"),
    "information_clarity": ("Clear", "Unclear", "Unspecified"),
    "groundness": ("Grounded", "Not Grounded"),
    "anchor_type": ANCHOR_TYPES,
}
ANSWER_LABELS = ("CorrectAnswer", "IncorrectAnswer")
ANSWER_STEP_TYPES = (*ANSWER_LABELS, "answer")
# the official ontology (annotation/ontology.json): tool calls and their results
TOOL_TYPES = ("search", "visit", "google_scholar", "parse_file", "python")
RESULT_TYPES = ("search_result", "visit_result", "scholar_result", "file_result", "python_result")
STEP_TYPES = ("reasoning", *TOOL_TYPES, *RESULT_TYPES, *ANSWER_STEP_TYPES)
# annotation ``type`` allowed for each step type (a result's annotation type is "search_result")
ANNOTATION_TYPES: dict[str, tuple[str, ...]] = {
    "reasoning": REASONING_TYPES,
    **dict.fromkeys(TOOL_TYPES, QUERY_TYPES),
    **dict.fromkeys(RESULT_TYPES, ("search_result",)),
    **dict.fromkeys(ANSWER_LABELS, ANSWER_LABELS),
    "answer": (*ANSWER_LABELS, "answer"),
}
# the body field of each step type: (field, str or list of str / documents, required)
BODY_FIELDS: dict[str, tuple[str, str, bool]] = {
    "reasoning": ("content", "str", True),
    "search": ("query", "strs", True),
    "google_scholar": ("query", "strs", False),
    "visit": ("url", "strs", False),
    "parse_file": ("files", "strs", False),
    "python": ("code", "str", False),
    "search_result": ("documents", "docs", True),
    "scholar_result": ("documents", "docs", False),
    "visit_result": ("content", "str", False),
    "file_result": ("content", "str", False),
    "python_result": ("content", "str", False),
    **{t: ("content", "str", True) for t in ANSWER_STEP_TYPES},
}
TOP_LEVEL: dict[str, tuple[type, ...]] = {
    "question": (str,),
    "ground_truth": (list,),
    "reward": (int, float),
    "is_correct": (bool,),
    "trace": (list,),
    "final_answer": (str, type(None)),
    "queries": (list,),
    "model": (str,),
    "dataset": (str,),
    "id": (int, str),
}


class TraceError(ValueError):
    """Bad trace input; the message names the file, line, trace id and step index."""


def _fail(where: str, message: str) -> None:
    raise TraceError(f"{where}: {message}")


def _check_step(step: Any, where: str, position: int, previous: int) -> int:
    if not isinstance(step, dict):
        _fail(where, "step is not a JSON object")
    index = step.get("step_index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        _fail(where, f"step {position}: 'step_index' must be an integer >= 0, got {index!r}")
    where = f"{where} step_index {index}"
    if index <= previous:
        _fail(where, f"'step_index' must increase along the trace (previous {previous})")
    kind = step.get("type")
    if kind not in STEP_TYPES:
        _fail(where, f"unknown step 'type' {kind!r} (expected one of {', '.join(STEP_TYPES)})")
    field, shape, required = BODY_FIELDS[kind]
    value = step.get(field)
    if value is None and not required:
        pass
    elif shape == "docs":
        if not isinstance(value, list):
            _fail(where, "'documents' must be a list of {title, content}")
        for j, doc in enumerate(value):
            if not (
                isinstance(doc, dict)
                and isinstance(doc.get("title"), str)
                and isinstance(doc.get("content"), str)
            ):
                _fail(where, f"documents[{j}] must have string 'title' and 'content'")
    elif shape == "strs" and isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            _fail(where, f"'{field}' must be a string or a list of strings for a {kind} step")
    elif not isinstance(value, str):
        what = "a string" if shape == "str" else "a string or a list of strings"
        _fail(where, f"'{field}' must be {what} for a {kind} step")
    dependency = step.get("trace_dependency")
    if not isinstance(dependency, dict) or "dependent_on" not in dependency:
        _fail(where, "'trace_dependency.dependent_on' is missing")
    on = dependency["dependent_on"]
    targets = on if isinstance(on, list) else [] if on is None else [on]
    if not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < index for t in targets):
        _fail(where, f"'trace_dependency.dependent_on' must name earlier steps, got {on!r}")
    annotation = step.get("annotation")
    if annotation is None:
        return index
    if not isinstance(annotation, dict):
        _fail(where, "'annotation' must be an object {type, attributes}")
    allowed = ANNOTATION_TYPES[kind]
    label = annotation.get("type")
    if label not in allowed:
        _fail(
            where,
            f"unknown annotation type {label!r} for a {kind} step "
            f"(expected one of {', '.join(allowed)})",
        )
    attributes = annotation.get("attributes") or {}
    if not isinstance(attributes, dict):
        _fail(where, "'annotation.attributes' must be an object")
    for key, values in ATTRIBUTE_VALUES.items():
        if key in attributes and attributes[key] not in values:
            _fail(
                where,
                f"unknown {key} label {attributes[key]!r} (expected one of {', '.join(values)})",
            )
    return index


def validate_trace(record: Any, where: str = "trace") -> dict[str, Any]:
    """Checks one trace record in place; returns it. ``where`` prefixes error messages."""
    if not isinstance(record, dict):
        _fail(where, "not a JSON object")
    for key, types in TOP_LEVEL.items():
        if key not in record:
            _fail(where, f"missing field '{key}'")
        if not isinstance(record[key], types) or (
            types == (int, float) and isinstance(record[key], bool)
        ):
            names = "/".join(t.__name__ for t in types)
            _fail(where, f"field '{key}' must be {names}, got {type(record[key]).__name__}")
    where = f"{where} (id {record['id']!r})"
    if not all(isinstance(x, str) for x in record["ground_truth"]):
        _fail(where, "'ground_truth' must be a list of strings")
    if not all(isinstance(x, str) for x in record["queries"]):
        _fail(where, "'queries' must be a list of strings")
    previous = -1
    for position, step in enumerate(record["trace"]):
        previous = _check_step(step, where, position, previous)
    return record


def read_traces(path: str | Path) -> list[dict[str, Any]]:
    """All traces of a ``.jsonl`` file (blank lines skipped), validated."""
    path = Path(path)
    input_file(path, "trace file")
    rows = read_jsonl(path, error=TraceError, what="traces")
    return [validate_trace(record, where) for where, record in rows]


def result_annotation_coverage(traces: Iterable[dict[str, Any]]) -> tuple[int, int]:
    """``(judged, total)`` result steps (:data:`RESULT_TYPES`) of ``traces``: a result step is
    judged when its annotation carries ``information_quality`` (the evidence level E of every
    metric is read from it; an unjudged result counts as E = 0)."""
    judged = total = 0
    for trace in traces:
        for step in trace["trace"]:
            if step.get("type") not in RESULT_TYPES:
                continue
            total += 1
            annotation = step.get("annotation") or {}
            attributes = annotation.get("attributes") if isinstance(annotation, dict) else None
            if isinstance(attributes, dict) and "information_quality" in attributes:
                judged += 1
    return judged, total


def write_traces(traces: Iterable[dict[str, Any]], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for record in traces:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path
