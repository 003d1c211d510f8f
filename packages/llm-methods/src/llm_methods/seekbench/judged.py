"""A judge's labelled copy of a trace file (``SEEKBENCH_JUDGED``): read it and check that it is
the same traces as the expert-labelled file (``SEEKBENCH_DATA``), fully judged.

The experiment ``llm-methods.seekbench`` decides claim (a) on the labels of such a copy (written
by ``llm-methods seekbench judge $SEEKBENCH_DATA --judge http ... --out judged.jsonl``: the
paper's LLM judge) instead of re-annotating the file with the rule judge.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["JUDGED_ENV", "JudgedFileError", "check_judged_copy", "judged_copy", "same_traces"]

JUDGED_ENV = "SEEKBENCH_JUDGED"
HOW = "write it with `llm-methods seekbench judge $SEEKBENCH_DATA --judge http ... --out FILE`"


class JudgedFileError(ValueError):
    """``SEEKBENCH_JUDGED`` names no usable judged copy; the message is one line naming it."""


def same_traces(
    gold: list[dict[str, Any]],
    judged: list[dict[str, Any]],
    where: str,
    gold_name: str = "SEEKBENCH_DATA",
    how: str = HOW,
) -> None:
    """Raises :class:`JudgedFileError` (``where``: the prefix naming the file) unless ``judged``
    holds the traces of ``gold`` (named ``gold_name`` in the message) in the same order: the
    same count, ids, and per trace the same number and types of steps (only the annotations
    may differ)."""
    if len(judged) != len(gold):
        raise JudgedFileError(
            f"{where}: {len(judged)} traces, {gold_name} has {len(gold)}: not a judged copy "
            f"of that file ({how})"
        )
    for k, (g, j) in enumerate(zip(gold, judged, strict=True)):
        if j["id"] != g["id"]:
            raise JudgedFileError(
                f"{where}: trace {k + 1} has id {j['id']!r}, {gold_name}'s has {g['id']!r}: "
                f"not a judged copy of that file ({how})"
            )
        if [s["type"] for s in j["trace"]] != [s["type"] for s in g["trace"]]:
            raise JudgedFileError(
                f"{where}: trace {k + 1} (id {j['id']!r}) has other steps than {gold_name}'s "
                f"({len(j['trace'])} vs {len(g['trace'])}): not a judged copy of that file"
            )


def check_judged_copy(
    gold: list[dict[str, Any]],
    judged: list[dict[str, Any]],
    where: str,
    gold_name: str = "SEEKBENCH_DATA",
    how: str = HOW,
) -> None:
    """:func:`same_traces`, and every result step of ``judged`` judged (a copy written with
    ``judge --max-steps`` keeps the expert labels on the steps it did not judge, which would
    count as agreement)."""
    from llm_methods.seekbench.data import result_annotation_coverage

    same_traces(gold, judged, where, gold_name, how)
    done, total = result_annotation_coverage(judged)
    if done < total:
        raise JudgedFileError(
            f"{where}: only {done} of {total} result steps carry information_quality: partly "
            "judged (the others would keep the expert labels); judge every step (no --max-steps)"
        )


def judged_copy(
    gold: list[dict[str, Any]] | None, data_env: str = "SEEKBENCH_DATA"
) -> tuple[Path, list[dict[str, Any]]] | None:
    """The judged copy named by ``SEEKBENCH_JUDGED`` (unset or empty: None), read and checked
    against ``gold`` (the traces of ``SEEKBENCH_DATA``; None: that variable is unset, which is
    an error here): same traces (:func:`same_traces`) and every result step judged (a copy
    written with ``judge --max-steps`` keeps the expert labels on the steps it did not judge)."""
    from llm_methods.seekbench.data import read_traces

    value = os.environ.get(JUDGED_ENV, "").strip()
    if not value:
        return None
    where = f"{JUDGED_ENV}={value}"
    if gold is None:
        raise JudgedFileError(f"{where}: needs {data_env} (the trace file it is a judged copy of)")
    path = Path(value).expanduser()
    if not path.is_file():
        raise JudgedFileError(f"{where}: no such file ({HOW})")
    judged = read_traces(path)
    check_judged_copy(gold, judged, where)
    return path, judged
