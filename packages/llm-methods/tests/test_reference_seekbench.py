"""SeekBench metrics against numbers produced by running the official analysis once.

``tests/data/reference/seekbench_official_*.json``: point estimates of the official
``analysis/calibration.py`` (SHAO-Jiaqi757/SeekBench @ afddcb3, its answer-step bug fixed; see
``seekbench_official.sidecar.json`` for the command) on

- ``seekbench_synthetic.jsonl.gz`` (shipped: our synthetic traces in the official schema, with
  visit/visit_result steps, annotated answer steps and "Unspecified" labels), and
- the official ``data/seekbench_data.jsonl`` (190 traces; not shipped, no licence): set
  ``SEEKBENCH_DATA=/path/to/seekbench_data.jsonl`` to run that case;

and ``seekbench_official_grounding.json``: RQI and recovery episodes of the official
``analysis/grounded_reason.py`` and ``analysis/recovery.py`` on
``seekbench_synthetic_grounding.jsonl.gz`` (below).
"""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from iclr26_common.testing import assert_mutation_detected
from llm_methods.seekbench import counts as trace_counts
from llm_methods.seekbench.data import read_traces
from llm_methods.seekbench.metrics import (
    analyze,
    cluster_counts,
    model_category,
    recovery_episodes,
)

DATA = Path(__file__).parent / "data" / "reference"
CASES = [
    pytest.param(DATA / "seekbench_synthetic.jsonl.gz", "synthetic", id="synthetic"),
    pytest.param(os.environ.get("SEEKBENCH_DATA", ""), "released", id="released"),
]
TRAJECTORY = ("ce", "cce", "premature_rate", "overcautious_rate")
ANSWER_EVENTS = ("auc", "slope", "odds_ratio_e2_e0")
#: Relative tolerance of every metric (each against its own official value; 1e-12 absolute where
#: that is 0). Pure Python / NumPy float64, no ATen: measured 0 difference on AMD EPYC (2026-12-06)
#: under ATEN_CPU_CAPABILITY=default (MKL_CBWR=COMPATIBLE; also with ONEDNN_MAX_CPU_ISA=SSE41,
#: oneDNN's oldest kernels), avx2, avx512 and unset; 1e-9 is a float64 floor for other NumPy builds'
#: summation order. The other threshold (the mutation of the test) moves the metrics by >= 10x this.
REL_TOL = 1e-9


def _close(ours: float, official: float | None) -> bool:
    if official is None:
        return math.isnan(ours)
    return math.isclose(ours, official, rel_tol=REL_TOL, abs_tol=1e-12)


def _values(rows: dict, over: dict, official: dict, key: str, names: dict) -> list[tuple]:
    """(ours, official) of every metric the official analysis gives a number for."""
    pairs = []
    for group, row in rows.items():
        want = official[names.get(group, group)]
        for metric in TRAJECTORY:
            value = over[group][metric] if metric == "overcautious_rate" else row[metric]
            pairs.append((value, want[key][metric]))
        pairs += [(row[metric], want[metric]) for metric in ANSWER_EVENTS]
    return [(a, b) for a, b in pairs if b is not None]


def _load(path: Path | str, name: str) -> tuple[list[dict], dict]:
    if not path or not Path(path).is_file():
        pytest.skip("set SEEKBENCH_DATA to the official data/seekbench_data.jsonl to run this")
    return _traces(path), json.loads((DATA / f"seekbench_official_{name}.json").read_text())


@functools.cache
def _traces(path: Path | str) -> list[dict]:
    return read_traces(path)


@functools.cache
def _analyze(path: Path | str, threshold: int, horizon: int | None, group_by: str) -> dict:
    traces = _traces(path)
    return analyze(
        traces, threshold=threshold, horizon=horizon, n_boot=0, group_by=group_by, km=False
    )


@pytest.mark.parametrize(("path", "name"), CASES)
@pytest.mark.parametrize("group_by", ["category", "model"])
@pytest.mark.parametrize("threshold", [2, 1])
@pytest.mark.parametrize("horizon", [15, None])
def test_calibration_matches_official(
    path: Path, name: str, group_by: str, threshold: int, horizon: int | None
) -> None:
    _, ref = _load(path, name)
    result = _analyze(path, threshold, horizon, group_by)
    assert result["notes"][0].startswith(f"{ref['answer_events']} answer events")
    key = f"thr{threshold}_h{horizon or 1000}"
    names = ref["model_names"] if group_by == "model" else {}
    official = ref["groups"][group_by]
    assert {names.get(g, g) for g in result["agents"]} == set(official)
    # upstream's over-cautious rate counts traces that reached E = 2 whatever the threshold; ours
    # reaching E >= threshold (README Deviations): at threshold 1 compare with ours at 2
    over = _analyze(path, 2, horizon, group_by)["agents"]
    for group, row in result["agents"].items():
        want = official[names.get(group, group)]
        for metric in TRAJECTORY:
            value = over[group][metric] if metric == "overcautious_rate" else row[metric]
            assert _close(value, want[key][metric]), (group, key, metric)
        for metric in ANSWER_EVENTS:
            assert _close(row[metric], want[metric]), (group, metric)
    # the other evidence threshold (2 <-> 1) moves the metrics >= 10x the tolerance
    other = _analyze(path, 3 - threshold, horizon, group_by)["agents"]
    mutated, expected = np.array(_values(other, other, official, key, names)).T
    assert_mutation_detected(mutated, expected, tol=REL_TOL, what="other threshold")


@pytest.mark.parametrize(("path", "name"), CASES)
def test_categories_match_official(path: Path, name: str) -> None:
    traces, ref = _load(path, name)
    assert {t["model"]: model_category(t) for t in traces} == ref["categories"]


def test_reference_file_exercises_the_ontology() -> None:
    """The shipped synthetic file holds what the fixes are about (else the check is weaker)."""
    traces = read_traces(DATA / "seekbench_synthetic.jsonl.gz")
    kinds = {s["type"] for t in traces for s in t["trace"]}
    assert {"visit", "visit_result", "answer", "CorrectAnswer", "IncorrectAnswer"} <= kinds
    assert any(len(t["trace"]) > 15 for t in traces)  # the horizon changes the trajectory rates
    ref = json.loads((DATA / "seekbench_official_synthetic.json").read_text())
    rates = [
        g["thr2_h15"]["premature_rate"] != g["thr2_h1000"]["premature_rate"]
        or g["thr2_h15"]["overcautious_rate"] != g["thr2_h1000"]["overcautious_rate"]
        for g in ref["groups"]["model"].values()
    ]
    assert any(rates)


# --- reasoning quality and recovery: upstream grounded_reason.py and recovery.py ---------------
#
# ``seekbench_official_grounding.json``: the official ``analysis/grounded_reason.py`` (RQI) and
# ``analysis/recovery.py`` (low-quality-evidence episodes; the answer-step bug fixed as above, and
# its crash on an unannotated step of a DeepResearch agent) at afddcb3 on
# ``seekbench_synthetic_grounding.jsonl.gz``: the synthetic file above with deterministic edits
# (``seekbench_official_grounding.sidecar.json``: the script, the driver, the command) that put
# the definitions' edge cases in it.
# Counts and episodes are compared exactly; RQI, its per-trace mean and the recovery rate with
# REL_TOL: measured at most 1.1e-16 absolute (2026-12-07, AMD EPYC, also under
# ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE; pure Python / NumPy float64).
GROUNDING = DATA / "seekbench_synthetic_grounding.jsonl.gz"


@functools.cache
def _grounding() -> tuple[list[dict], dict]:
    ref = json.loads((DATA / "seekbench_official_grounding.json").read_text())
    return read_traces(GROUNDING), ref


def _rqi_counts(traces: list[dict]) -> tuple[Any, dict]:
    """(per-(model, question) counts, per-model pooled RQI) of ``traces``."""
    counts = cluster_counts(traces, group_by="model")
    rows = analyze(traces, n_boot=0, km=False)["agents"]
    return counts, {model: row["rqi"] for model, row in rows.items()}


def _official_rqi(ref: dict) -> dict[str, float]:
    """Upstream's pooled RQI per raw model name (its grounding table): grounded / EVIDENCE steps."""
    models = ref["models"]
    return {
        raw: models[name]["rqi_grounded_steps"] / models[name]["rqi_evidence_steps"]
        for raw, name in ref["model_names"].items()
    }


def test_rqi_matches_official(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per agent: the EVIDENCE-anchored reasoning steps and the grounded ones (exact counts), the
    pooled RQI (upstream's grounding table) and the mean of the per-trace RQIs (upstream's
    headline RQI, ``cluster_bootstrap_ci_by_model``) over every step of every trace, a
    DeepResearch agent's ``search`` steps included."""
    traces, ref = _grounding()
    counts, rqi = _rqi_counts(traces)
    assert counts.groupby(level="model")["traj"].max().max() == 1  # one trace per question
    official = _official_rqi(ref)
    for raw, name in ref["model_names"].items():
        want = ref["models"][name]
        mine = counts.loc[raw]
        assert int(mine["anchor_total"].sum()) == want["rqi_evidence_steps"], name
        assert int(mine["anchor_grounded"].sum()) == want["rqi_grounded_steps"], name
        assert _close(rqi[raw], official[raw]), name
        total = mine["anchor_total"].to_numpy(float)
        per_trace = mine["anchor_grounded"].to_numpy(float)[total > 0] / total[total > 0]
        assert len(per_trace) == want["rqi_trajectories"], name
        assert _close(float(np.mean(per_trace)), want["rqi_trajectory_mean"]), name
    # mutations the check guards against: the steps after the answer left out (our RQI before
    # issue 42), and a DeepResearch agent's search steps not counted as reasoning
    cut = [dict(t, trace=t["trace"][: _answer_position(t) + 1]) for t in traces]
    mutated = _rqi_counts(cut)[1]
    assert_mutation_detected(
        [mutated[m] for m in official], list(official.values()), tol=REL_TOL, what="answer cut"
    )
    original = trace_counts._is_reasoning
    monkeypatch.setattr(trace_counts, "_is_reasoning", lambda step, deep: original(step, False))
    mutated = _rqi_counts(traces)[1]
    deep = [m for m, name in ref["model_names"].items() if name == "GPT-4o"]
    assert_mutation_detected(
        [mutated[m] for m in deep], [official[m] for m in deep], tol=REL_TOL, what="no search"
    )


def _answer_position(trace: dict) -> int:
    """Position of the first answer step (the last step when the trace has none)."""
    kinds = ("answer", "CorrectAnswer", "IncorrectAnswer")
    steps = trace["trace"]
    return next((i for i, s in enumerate(steps) if s["type"] in kinds), len(steps) - 1)


def _episodes(traces: list[dict], ref: dict) -> dict[str, list[list[int]]]:
    out: dict[str, list[list[int]]] = {name: [] for name in ref["models"]}
    for trace in traces:
        name = ref["model_names"][trace["model"]]
        out[name] += [[d, int(ok)] for d, ok in recovery_episodes(trace)]
    return {name: sorted(e) for name, e in out.items()}


def test_recovery_episodes_match_official(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every low-quality-evidence episode of every agent, (steps to recovery, recovered), equals
    upstream ``detect_low_quality_episodes`` (with the answer-step fix), and ``recovery_rate`` is
    their recovered share."""
    traces, ref = _grounding()
    mine = _episodes(traces, ref)
    rows = analyze(traces, n_boot=0, km=False)["agents"]
    for raw, name in ref["model_names"].items():
        want = ref["models"][name]["recovery_episodes"]
        assert mine[name] == want, name
        assert _close(rows[raw]["recovery_rate"], sum(ok for _, ok in want) / len(want)), name
    # mutation: a correct answer read from the annotation only (upstream's answer-step bug)
    monkeypatch.setattr(
        trace_counts, "_answer_label", lambda step: (step.get("annotation") or {}).get("type")
    )
    mutated = _episodes(traces, ref)
    assert any(mutated[name] != mine[name] for name in mine)
    changed = [sum(ok for _, ok in mutated[n]) / len(mutated[n]) for n in mine]
    expected = [sum(ok for _, ok in mine[n]) / len(mine[n]) for n in mine]
    assert_mutation_detected(changed, expected, tol=REL_TOL, what="annotation-only answers")


def test_grounding_file_exercises_the_definitions() -> None:
    """The shipped file holds the cases the definitions differ on (else the check is weaker)."""
    traces, ref = _grounding()
    deep = [t for t in traces if ref["model_names"][t["model"]] == "GPT-4o"]
    assert any(
        s["type"] == "search" and s["annotation"]["attributes"].get("anchor_type") == "EVIDENCE"
        for t in deep
        for s in t["trace"]
    )
    assert any(_answer_position(t) < len(t["trace"]) - 1 for t in traces)  # steps after it
    labels = {
        (a.get("information_quality"), a.get("information_clarity"))
        for t in traces
        for s in t["trace"]
        if (a := (s.get("annotation") or {}).get("attributes") or {})
        and s["type"].endswith("result")
    }
    assert {("Sufficient", "Unclear"), ("Unspecified", "Clear")} <= labels
    assert any(
        s["type"] == "CorrectAnswer" and "annotation" not in s for t in traces for s in t["trace"]
    )
    episodes = [e for name in ref["models"].values() for e in name["recovery_episodes"]]
    assert {0, 1} <= {ok for _, ok in episodes}  # recovered and censored episodes
