"""SeekBench: reader/validator, metrics on hand-made and synthetic traces, judges, CLI."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from llm_methods.cli import main
from llm_methods.seekbench.data import TraceError, read_traces, validate_trace, write_traces
from llm_methods.seekbench.judge import (
    HTTPJudge,
    LMJudge,
    RuleJudge,
    agreement,
    annotate,
    evidence_agreement,
    option_logprobs,
)
from llm_methods.seekbench.metrics import analyze, paired_difference, recovery_episodes
from llm_methods.seekbench.synth import PROFILES, synth_traces


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


def _result(i: int, quality: str, clarity: str) -> dict:
    docs = [{"title": "T", "content": "c"}]
    label = {
        "type": "search_result",
        "attributes": {"information_quality": quality, "information_clarity": clarity},
    }
    return _step(i, "search_result", label, documents=docs)


def _trace(
    steps: list[dict], model: str = "m", final: str | None = "x", correct: bool = True, qid: int = 0
) -> dict:
    return {
        "question": f"Q{qid}?",
        "ground_truth": ["x"],
        "reward": int(correct),
        "is_correct": correct,
        "trace": steps,
        "final_answer": final,
        "queries": [],
        "model": model,
        "dataset": "d",
        "id": qid,
    }


def _hand_trace() -> dict:
    """E: 0 (Insufficient) -> 1 (Sufficient, Unclear) -> answer at E=1 (unannotated step)."""
    return _trace(
        [
            _step(
                0,
                "reasoning",
                {"type": "PlanFormation", "attributes": {"groundness": "Not Grounded"}},
                content="I need to search.",
            ),
            _step(1, "search", {"type": "InitialQuery"}, query="q"),
            _result(2, "Insufficient", "Unclear"),
            _step(3, "search", {"type": "RefinedQuery", "attributes": {}}, query="q more"),
            _result(4, "Sufficient", "Unclear"),
            _step(
                5,
                "reasoning",
                {"type": "StateAssessment", "attributes": {"groundness": "Grounded"}},
                content="The doc says x.",
            ),
            _step(6, "CorrectAnswer", None, content="x"),
        ]
    )


def test_synthetic_traces_validate_and_round_trip(tmp_path: Path) -> None:
    traces = synth_traces(5, seed=1)
    assert len(traces) == 5 * len(PROFILES)
    path = write_traces(traces, tmp_path / "t.jsonl")
    assert read_traces(path) == traces
    assert synth_traces(5, seed=1) == traces and synth_traces(5, seed=2) != traces


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: t.pop("model"), "missing field 'model'"),
        (lambda t: t.update(is_correct="yes"), "field 'is_correct' must be bool"),
        (
            lambda t: t["trace"][1]["annotation"].update(type="NewQuery"),
            "step_index 1: unknown annotation type 'NewQuery'",
        ),
        (
            lambda t: t["trace"][2]["annotation"]["attributes"].update(information_quality="Good"),
            "step_index 2: unknown information_quality label 'Good'",
        ),
        (
            lambda t: t["trace"][0]["annotation"]["attributes"].update(groundness="Yes"),
            "unknown groundness label",
        ),
        (lambda t: t["trace"][3].update(step_index=1), "'step_index' must increase"),
        (lambda t: t["trace"][3].update(type="think"), "unknown step 'type' 'think'"),
        (
            lambda t: t["trace"][3]["trace_dependency"].update(dependent_on=9),
            "must name earlier steps",
        ),
        (lambda t: t["trace"][2].update(documents=[{"title": 1}]), r"documents\[0\]"),
    ],
)
def test_validation_names_trace_and_step(mutate: Any, message: str) -> None:
    trace = _hand_trace()
    mutate(trace)
    with pytest.raises(TraceError, match=message) as info:
        validate_trace(trace, "f.jsonl:3")
    assert str(info.value).startswith("f.jsonl:3")


def test_reader_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(_hand_trace()) + "\n{not json\n")
    with pytest.raises(TraceError, match=r"t\.jsonl:2: not valid JSON"):
        read_traces(path)
    with pytest.raises(FileNotFoundError, match=r"missing\.jsonl"):
        read_traces(tmp_path / "missing.jsonl")


def test_metrics_by_hand() -> None:
    trace = _hand_trace()
    # the Insufficient result (position 2) opens an episode; the Sufficient but Unclear one (4)
    # does not end it (upstream recovery.py needs Sufficient & Clear); the correct answer (6,
    # labelled in its step type) does: 4 steps, recovered
    assert recovery_episodes(trace) == [(4, True)]
    result = analyze([trace], n_boot=0)
    row = result["agents"]["m"]
    # turns 0-2 at E=0 (3 rows), 3-6 at E... step 3 still E=0; steps 4-6 at E=1 (answer at 6)
    # P(answer|E=0) = 0/4, P(answer|E=1) = 1/3; threshold 2: target 0, 0, 1; no E=2 turns, so
    # CE is undefined (NaN, as the official analysis) and CCE averages the levels present
    w = np.array([4, 3, 0]) / 7
    assert result["w_ref"] == pytest.approx(w.tolist())
    assert np.isnan(row["ce"])
    assert row["cce"] == pytest.approx((0 + 1 / 3) / 2)
    assert row["premature_rate"] == 1.0 and row["overcautious_rate"] == 0.0
    assert row["groundedness"] == 0.5 and row["rqi"] == 0.5  # no anchors: groundness only
    assert result["rqi_source"] == "groundness_only"
    assert any("RQI computed from groundedness alone" in n for n in result["notes"])
    assert "1 answer events" in result["notes"][0]
    assert row["recovery_rate"] == 1.0


def test_recovery_episodes_follow_upstream_by_hand() -> None:
    """Low-quality-evidence episodes as upstream ``recovery.detect_low_quality_episodes``
    (fails on e21a374, whose episodes started only at Insufficient, ended at any Sufficient
    result and stopped at the answer): a Sufficient but Unclear result opens one, an
    Unspecified but Clear one does not, Sufficient & Clear or a correct answer ends it, and one
    still open at the last step (the trace goes on after a wrong answer) is censored there."""
    search = _step(0, "search", {"type": "InitialQuery"}, query="q")
    unclear = [search, _result(1, "Sufficient", "Unclear"), _result(2, "Sufficient", "Clear")]
    assert recovery_episodes(_trace(unclear)) == [(1, True)]
    unspecified = [search, _result(1, "Unspecified", "Clear"), _result(2, "Sufficient", "Clear")]
    assert recovery_episodes(_trace(unspecified)) == []
    after_answer = [
        search,
        _result(1, "Insufficient", "Unclear"),
        _result(2, "Sufficient", "Clear"),
        _step(3, "IncorrectAnswer", None, content="y"),
        _result(4, "Insufficient", "Clear"),
        _step(5, "reasoning", {"type": "StateAssessment", "attributes": {}}, content="hm"),
    ]
    assert recovery_episodes(_trace(after_answer, correct=False)) == [(1, True), (1, False)]
    row = analyze([_trace(after_answer, correct=False)], n_boot=0, km=False)["agents"]["m"]
    assert row["recovery_rate"] == 0.5


def test_rqi_counts_every_step_and_deep_research_searches() -> None:
    """RQI as upstream ``grounded_reason.compute_rqi`` (fails on e21a374): reasoning steps after
    the answer count, an EVIDENCE-anchored step without a groundness label counts as not
    grounded, and a DeepResearch agent's search steps are reasoning steps."""

    def reasoning(i: int, attributes: dict[str, str]) -> dict:
        label = {"type": "StateAssessment", "attributes": attributes}
        return _step(i, "reasoning", label, content="the doc says x")

    evidence = {"groundness": "Grounded", "anchor_type": "EVIDENCE"}
    steps = [
        reasoning(0, evidence),
        _step(1, "search", {"type": "InitialQuery", "attributes": evidence}, query="q"),
        reasoning(2, {"anchor_type": "EVIDENCE"}),  # no groundness label: not grounded
        _step(3, "CorrectAnswer", None, content="x"),
        reasoning(4, {"groundness": "Not Grounded", "anchor_type": "EVIDENCE"}),
    ]
    rows = analyze(
        [
            _trace([dict(s) for s in steps], model="SearchR1-x", qid=0),
            _trace([dict(s) for s in steps], model="gpt-4o-x", qid=1),
        ],
        n_boot=0,
        km=False,
    )["agents"]
    assert rows["SearchR1-x"]["rqi"] == pytest.approx(1 / 3)  # steps 0, 2, 4
    assert rows["gpt-4o-x"]["rqi"] == pytest.approx(2 / 4)  # and its search step 1
    assert rows["SearchR1-x"]["groundedness"] == pytest.approx(1 / 2)  # labelled: 0 and 4


def test_answer_event_from_final_answer_and_unanswered() -> None:
    steps = [
        _step(0, "search", {"type": "InitialQuery"}, query="q"),
        _result(1, "Sufficient", "Unclear"),
        _step(2, "search", None, query="q2"),
        _result(3, "Sufficient", "Clear"),
    ]
    answered = _trace([dict(s) for s in steps], model="a", final="x")
    silent = _trace([dict(s) for s in steps], model="b", final=None, correct=False)
    rows = analyze([answered, silent], n_boot=0)["agents"]
    assert rows["a"]["premature_rate"] == 0.0 and rows["a"]["overcautious_rate"] == 0.0
    assert rows["b"]["overcautious_rate"] == 1.0  # reached E=2, never answered
    assert rows["a"]["ce"] < rows["b"]["ce"]


def test_metrics_recover_synthetic_profiles() -> None:
    rows = analyze(synth_traces(60, seed=3), n_boot=50)["agents"]
    chain = [rows[n]["premature_rate"] for n in ("calibrated", "hasty", "premature", "reckless")]
    assert chain == sorted(chain) and chain[0] < 0.2 < 0.5 < chain[-1]
    assert rows["stubborn"]["recovery_rate"] < rows["calibrated"]["recovery_rate"] - 0.3
    assert rows["overcautious"]["overcautious_rate"] > rows["calibrated"]["overcautious_rate"]
    assert rows["calibrated"]["rqi"] > rows["reckless"]["rqi"] + 0.3
    lo, hi = rows["calibrated"]["ce_ci"]
    assert lo <= rows["calibrated"]["ce"] <= hi


def test_paired_difference_detects_process_gap() -> None:
    traces = synth_traces(80, ["calibrated", "reckless"], seed=0)
    point, lo, hi = paired_difference(
        traces, "calibrated", "reckless", "premature_rate", n_boot=200
    )
    assert lo <= point <= hi < 0


def test_rule_judge_query_types_and_kappa() -> None:
    steps = [
        _step(0, "search", None, query="Leo Bennett death"),
        _step(1, "search", None, query="Leo Bennett death place"),
        _step(2, "search", None, query="Leo Bennett death place"),
        _step(3, "search", None, query="river near Thames Ditton"),
    ]
    judged = annotate([_trace(steps)], RuleJudge())[0]["trace"]
    assert [s["annotation"]["type"] for s in judged] == [
        "InitialQuery",
        "RefinedQuery",
        "RepeatQuery",
        "FollowUpQuery",
    ]
    gold = synth_traces(20, seed=0)
    perfect = agreement(gold, [json.loads(json.dumps(t)) for t in gold])
    assert all(v["kappa"] == 1.0 for v in perfect.values())
    rule = agreement(gold, annotate(gold, RuleJudge()))
    assert set(rule) == {
        "reasoning_type",
        "groundness",
        "query_type",
        "information_quality",
        "information_clarity",
    }
    assert 0.3 < rule["query_type"]["kappa"] < 1.0


def _judge_result(question: str, kind: str = "search_result", **body: Any) -> dict:
    trace = _trace([_step(0, "search", None, query="q"), _step(1, kind, None, **body)])
    trace["question"] = question
    return RuleJudge().label(trace, 1)


def test_rule_judge_evidence_follows_the_ontology() -> None:
    """Sufficient needs the asked fact, not only the entity (the ontology's own Insufficient
    example: "Chris Martin is the lead singer of Coldplay" for his birth date). Fails on
    5b6cfbf, whose rule judge called an entity-only document Sufficient & Clear (56 % of the
    synthetic results against 26 % in gold)."""
    ask = "Where did Leo Bennett die?"

    def docs(*texts: str) -> list[dict]:
        return [{"title": "Leo Bennett", "content": t} for t in texts]

    entity_only = _judge_result(ask, documents=docs("Leo Bennett was a cricketer."))
    assert entity_only == {"information_quality": "Insufficient", "information_clarity": "Unclear"}
    stated = _judge_result(ask, documents=docs("Leo Bennett died at Thames Ditton in 1971."))
    assert stated == {"information_quality": "Sufficient", "information_clarity": "Clear"}
    hedged = docs("Leo Bennett died at Thames Ditton. However, some sources say Surrey.")
    assert _judge_result(ask, documents=hedged)["information_clarity"] == "Unclear"
    wrote = [{"title": "Velmor", "content": "Velmor was written by Anna Kest."}]
    assert (
        _judge_result("Who wrote Velmor?", documents=wrote)["information_quality"] == "Sufficient"
    )
    other = [{"title": "Anna Kest", "content": "Anna Kest died in Paris."}]
    assert _judge_result(ask, documents=other)["information_quality"] == "Insufficient"
    # every tool result is judged, a page's text sentence by sentence
    page = _judge_result(ask, "visit_result", content="Intro. Leo Bennett died at Thames Ditton.")
    assert page["information_quality"] == "Sufficient"
    visit = _trace(
        [_step(0, "visit", None, url="u"), _step(1, "visit_result", None, content="Leo Bennett.")]
    )
    judged = annotate([visit], RuleJudge())[0]["trace"]
    assert judged[1]["annotation"]["type"] == "search_result"
    assert judged[0]["annotation"]["type"] == "InitialQuery"


def test_evidence_agreement_planted() -> None:
    """kappa_E is 1 for a copy of the gold labels, 0 for a judge that calls every result
    Sufficient & Clear (its E = 2 share then 1.0), and the rule judge on synthetic traces
    recovers the designed evidence levels."""
    gold = synth_traces(20, seed=0)
    perfect = evidence_agreement(gold, [json.loads(json.dumps(t)) for t in gold])
    assert perfect["kappa"] == 1.0 and perfect["share_e2_gold"] == perfect["share_e2_judge"]
    lenient = json.loads(json.dumps(gold))
    for trace in lenient:
        for step in trace["trace"]:
            if step["type"] == "search_result":
                step["annotation"]["attributes"] = {
                    "information_quality": "Sufficient",
                    "information_clarity": "Clear",
                }
    flat = evidence_agreement(gold, lenient)
    assert flat["kappa"] == pytest.approx(0.0) and flat["share_e2_judge"] == 1.0
    assert flat["n"] == perfect["n"] > 50
    rule = evidence_agreement(gold, annotate(gold, RuleJudge()))
    assert rule["kappa"] >= 0.7 and abs(rule["share_e2_judge"] - rule["share_e2_gold"]) < 0.05


def test_agreement_counts_only_judged_steps(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """With ``--max-steps`` the unjudged steps keep the input's labels; kappa counts only the
    judged ones (it counted the kept labels as agreement before issue 42), and the judge's
    progress runs over the steps it judges."""
    from iclr26_common.testing import run_main
    from llm_methods.seekbench.judge import judged_steps

    gold = synth_traces(4, ["calibrated"], seed=0)
    done = judged_steps(gold, 5)
    assert len(done) == 5 and done == judged_steps(gold) & done
    judged = annotate(gold, RuleJudge(), max_steps=5, quiet=False)
    assert "seekbench judge steps: 5/5" in capsys.readouterr().err
    mine = agreement(gold, judged, steps=done)
    assert sum(row["n"] for row in mine.values()) <= 2 * 5  # two fields a step at most
    assert sum(row["n"] for row in agreement(gold, judged).values()) > 20  # the kept labels
    traces = tmp_path / "t.jsonl"
    write_traces(gold, traces)
    args = ["seekbench", "judge", str(traces), "--out", str(tmp_path / "j.jsonl")]
    run = run_main(main, [*args, "--max-steps", "5"], capsys)
    assert run.code == 0, run.err
    for field, row in mine.items():
        assert f"kappa {field:20s} {row['kappa']:.3f}" in run.out
        assert f"n={row['n']})" in run.out
    run = run_main(main, [*args, "--overwrite"], capsys)
    assert "kappa evidence_level" in run.out and "Sufficient & Clear: judge" in run.out


class _Handler(BaseHTTPRequestHandler):
    replies: ClassVar[list[tuple[int, str]]] = []
    seen: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.seen.append(body)
        code, content = _Handler.replies.pop(0)
        payload = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


def test_http_judge_retries_caches_and_validates(tmp_path: Path) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        _Handler.replies = [
            (500, ""),
            (200, 'Sure: {"type": "RefinedQuery"}'),
            (200, '{"type": "Bogus"}'),
        ]
        url = f"http://127.0.0.1:{server.server_port}/v1"
        judge = HTTPJudge(url, "gpt-x", cache_dir=tmp_path / "cache", backoff=0.01)
        trace = _trace([_step(0, "search", None, query="a"), _step(1, "search", None, query="b")])
        assert judge.label(trace, 0) == {"type": "RefinedQuery"}
        assert judge.calls == 1 and _Handler.seen[-1]["temperature"] == 0
        assert judge.label(trace, 0) == {"type": "RefinedQuery"} and judge.calls == 1  # cached
        assert judge.label(trace, 1) == {"type": None}  # invalid label is dropped
        _Handler.replies = [(400, "")]
        with pytest.raises(ValueError, match="judge request failed"):
            HTTPJudge(url, "other", retries=2, backoff=0.01).label(trace, 0)
    finally:
        server.shutdown()


def test_lm_judge_scores_options_like_the_core(tiny) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.lm import continuation_logprobs

    got = option_logprobs(tiny, "A list is", [(" a", " mutable"), ("", " tuple is")])
    want = continuation_logprobs(
        tiny, ["A list is a", "A list is"], [" mutable", " tuple is"], reduce="mean"
    )
    assert got == pytest.approx(want.tolist(), abs=1e-4)
    gold = synth_traces(1, ["calibrated"], seed=0)
    judge = LMJudge(tiny)
    judged = annotate(gold, judge, max_steps=3)
    labelled = [s for s in judged[0]["trace"] if s is not None and "annotation" in s][:3]
    assert judge.calls == 3 and all(s["annotation"].get("type") for s in labelled[:1])


def test_cli_synth_analyze_judge(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    traces = tmp_path / "t.jsonl"
    assert main(["seekbench", "synth", "--out", str(traces), "--questions", "10"]) == 0
    assert (
        main(["seekbench", "analyze", str(traces), "--out", str(tmp_path / "a"), "--n-boot", "20"])
        == 0
    )
    out = capsys.readouterr().out
    assert "reckless" in out and (tmp_path / "a" / "per_agent.csv").is_file()
    # each metric with its 95 % interval over the questions, beside the existing columns
    import pandas as pd

    table = pd.read_csv(tmp_path / "a" / "per_agent.csv", index_col=0)
    assert list(table.columns[:3]) == ["n_traces", "accuracy", "accuracy_ci"]
    for column in ("accuracy_low", "accuracy_high", "accuracy_ci_method", "accuracy_n"):
        assert column in table.columns
    assert (table["accuracy_n"] == 10).all() and (table["resample_seed"] == 0).all()
    saved = json.loads((tmp_path / "a" / "metrics.json").read_text())["intervals"]
    assert saved["resample_seed"] == 0 and saved["units"] == "questions"
    accuracy = saved["groups"]["calibrated"]["metrics"]["accuracy"]
    assert accuracy["n"] == 10 and accuracy["method"] in ("bootstrap", "exact")
    assert "95 % intervals over the questions" in out and "n=10 questions" in out
    assert main(["seekbench", "judge", str(traces), "--out", str(tmp_path / "j.jsonl")]) == 0
    assert "kappa query_type" in capsys.readouterr().out
    assert len(read_traces(tmp_path / "j.jsonl")) == 60


def _twin(traces: list[dict], name: str) -> list[dict]:
    """The same traces under another agent name: an agent identical to the original."""
    return [{**t, "model": name} for t in traces]


def test_intervals_over_questions_planted() -> None:
    """Identical agents: every paired difference exactly 0 with zero width (not NaN); designed
    calibrated vs reckless agents: the premature-rate difference excludes 0 and the per-agent
    interval holds the point value; under 10 questions: no interval."""
    from llm_methods.seekbench.metrics import metric_intervals

    base = synth_traces(30, ["calibrated"], seed=1)
    reckless = synth_traces(30, ["reckless"], seed=1)
    traces = base + _twin(base, "twin") + reckless
    rows = metric_intervals(traces, n_resamples=99, reference="calibrated")
    point = analyze(traces, n_boot=0)["agents"]
    twin = rows["twin"]
    assert twin["n"] == twin["n_shared"] == 30 and twin["reference"] == "calibrated"
    for metric in ("accuracy", "ce", "premature_rate", "groundedness"):
        diff = twin["differences"][metric]
        assert diff is not None and diff.method == "exact", metric
        assert diff.estimate == diff.low == diff.high == 0.0
        interval = rows["calibrated"]["intervals"][metric]
        assert interval.estimate == pytest.approx(point["calibrated"][metric])
        assert interval.low <= interval.estimate <= interval.high
    gap = rows["reckless"]["differences"]["premature_rate"]
    assert gap.method == "bootstrap" and gap.low > 0 and gap.n == 30 and gap.resample_seed == 0
    assert rows["calibrated"]["differences"] == {}  # the reference itself
    few = metric_intervals(synth_traces(6, ["calibrated"], seed=1), n_resamples=99)
    assert all(i is None for i in few["calibrated"]["intervals"].values())


def test_cli_reference_gives_paired_differences(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    base = synth_traces(12, ["calibrated"], seed=2)
    traces = tmp_path / "t.jsonl"
    write_traces(base + _twin(base, "twin"), traces)
    args = ["seekbench", "analyze", str(traces), "--n-boot", "50", "--reference", "calibrated"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "twin (12 questions, 12 shared with calibrated)" in out
    assert "vs calibrated +0.000 (exact, n=12 questions)" in out
    import pandas as pd

    table = pd.read_csv(tmp_path / "a" / "per_agent.csv", index_col=0)
    assert table.loc["twin", "accuracy_diff"] == 0.0
    assert table.loc["twin", "accuracy_diff_ci_method"] == "exact"
    assert table.loc["twin", "accuracy_diff_n"] == 12
    with pytest.raises(SystemExit) as info:
        main([*args[:5], "--reference", "nobody", "--out", str(tmp_path / "b")])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and "--reference 'nobody' is not a model" in err


def test_cli_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    trace = _hand_trace()
    trace["trace"][5]["annotation"]["type"] = "Musing"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(trace) + "\n")
    with pytest.raises(SystemExit) as info:
        main(["seekbench", "analyze", str(bad), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and len(err.splitlines()) == 1
    assert "bad.jsonl:1 (id 0) step_index 5: unknown annotation type 'Musing'" in err


@pytest.mark.slow
def test_experiment_quick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_methods.seekbench.experiment import EXPERIMENT, PIPELINE_TITLE, PROXY

    monkeypatch.delenv("SEEKBENCH_DATA", raising=False)
    result = EXPERIMENT.run(True, tmp_path)
    assert len(result.claims) == 3 and (tmp_path / "seekbench_metrics.png").is_file()
    assert result.plots == ["seekbench_metrics.png"]
    assert "rule" in result.metrics["judge_kappa"]
    # no trace file: every claim inconclusive with the named control, the report says how to
    # run them; the synthetic proxy gives pipeline checks in Details, never a claim
    assert result.verdict == "inconclusive"
    assert all(
        [p.name for p in c.failed_preconditions] == ["SEEKBENCH_DATA names a trace file"]
        for c in result.claims
    )
    assert "lm_judge_smollm2_real" not in result.metrics and "official" not in result.metrics
    assert result.summary.startswith("Data: no real traces (SEEKBENCH_DATA unset)")
    assert f"pipeline checks on the {PROXY}" in result.summary
    assert "SEEKBENCH_DATA=path/to/seekbench_data.jsonl iclr26 reproduce" in result.summary
    assert f"### {PIPELINE_TITLE}" in result.details
    assert [c["name"] for c in result.metrics["pipeline_checks"]] == [
        "CE on rule-judge labels orders the designed chain calibrated < hasty < premature "
        "< reckless",
        "CE separates the designed equal-accuracy pair",
        "the premature-answer rate separates the same pair",
    ]
    lm = result.metrics["lm_judge_smollm2"]
    assert lm["steps"] == lm["calls"] == 6 and lm["evidence"]["n"] == 4
    assert len(result.metrics["per_seed_judge_labels"]["tau_ce"]) == len(result.seeds)


def test_analyze_refuses_unjudged_traces_and_warns_on_partly_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``analyze`` on ``synth --unlabelled`` output is refused in one line saying to run
    ``judge`` first, and leaves no ``--out``; on ``judge --max-steps`` output (the judge says
    the file is partly judged) it warns with the judged fraction and records it (fails on
    d9942d3: premature_rate 1.000 for most agents and CE NaN, exit 0, no warning)."""
    from iclr26_common.testing import assert_one_line_error, run_main
    from llm_methods.seekbench.data import result_annotation_coverage

    raw = tmp_path / "raw.jsonl"
    assert main(["seekbench", "synth", "--out", str(raw), "--questions", "10", "--unlabelled"]) == 0
    line = assert_one_line_error(
        main, ["seekbench", "analyze", str(raw), "--out", str(tmp_path / "a")], capsys
    )
    assert f"{raw}: no result step carries information_quality" in line, line
    assert "seekbench judge" in line and not (tmp_path / "a").exists()
    judged = tmp_path / "judged.jsonl"
    run = run_main(
        main, ["seekbench", "judge", str(raw), "--out", str(judged), "--max-steps", "6"], capsys
    )
    assert run.code == 0 and f"note: {judged} is partly judged: 6 of " in run.out, run.out
    done, total = result_annotation_coverage(read_traces(judged))
    assert 0 < done < total
    run = run_main(
        main,
        ["seekbench", "analyze", str(judged), "--out", str(tmp_path / "b"), "--n-boot", "0"],
        capsys,
    )
    assert run.code == 0, run.err
    assert f"warning: {judged}: only {done} of {total} result steps" in run.err, run.err
    saved = json.loads((tmp_path / "b" / "metrics.json").read_text())
    assert saved["judged_result_steps"] == {"judged": done, "total": total}
    assert any(f"only {done} of {total}" in note for note in saved["notes"])


def test_analyze_checks_out_before_the_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A folder of earlier results is refused before any work unless ``--overwrite`` (fails on
    d9942d3: metrics.json and per_agent.csv were written over)."""
    from iclr26_common.testing import assert_one_line_error

    traces = tmp_path / "t.jsonl"
    write_traces(synth_traces(10, ["calibrated"], seed=0), traces)
    out = tmp_path / "a"
    out.mkdir()
    (out / "metrics.json").write_text("{}")
    args = ["seekbench", "analyze", str(traces), "--out", str(out), "--n-boot", "0"]
    line = assert_one_line_error(main, args, capsys)
    assert f"--out {out}: holds earlier results; pass --overwrite" in line, line
    assert (out / "metrics.json").read_text() == "{}"
    assert main([*args, "--overwrite"]) == 0
    assert json.loads((out / "metrics.json").read_text())["agents"]


def test_judge_refuses_an_unset_api_key_variable_and_a_bad_device(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--judge http --api-key-env UNSET`` is one line naming the option before any request
    (fails on d9942d3: it went on to the request without a key); ``--judge lm --device gpu`` is
    one line naming ``--device`` (d9942d3: ``--device`` unknown). No ``--out`` is written."""
    from iclr26_common.testing import assert_one_line_error

    monkeypatch.delenv("SEEKBENCH_TEST_UNSET_KEY", raising=False)
    traces = tmp_path / "t.jsonl"
    write_traces(synth_traces(3, ["calibrated"], seed=0), traces)
    out = tmp_path / "j.jsonl"
    args = ["seekbench", "judge", str(traces), "--out", str(out), "--judge", "http"]
    args += ["--url", "http://127.0.0.1:9/v1", "--api-key-env", "SEEKBENCH_TEST_UNSET_KEY"]
    line = assert_one_line_error(main, args, capsys)
    assert "--api-key-env SEEKBENCH_TEST_UNSET_KEY: the environment variable is not set" in line
    args = ["seekbench", "judge", str(traces), "--out", str(out), "--judge", "lm"]
    line = assert_one_line_error(main, [*args, "--device", "gpu"], capsys)
    assert "--device gpu: not a device" in line, line
    assert not out.exists()


def test_judge_ctrl_c_is_one_line_exit_130(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while ``judge`` works ends with one line, exit status 130, and no ``--out`` (a
    guard: d9942d3 already ended so)."""
    from iclr26_common.testing import run_main
    from llm_methods.seekbench import judge

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(judge, "annotate", interrupted)
    monkeypatch.delenv("LLM_METHODS_TRACEBACK", raising=False)
    traces = tmp_path / "t.jsonl"
    write_traces(synth_traces(3, ["calibrated"], seed=0), traces)
    out = tmp_path / "j.jsonl"
    run = run_main(main, ["seekbench", "judge", str(traces), "--out", str(out)], capsys)
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert run.code == 130 and lines == ["llm-methods: interrupted"], run.err
    assert not out.exists()


def test_analyze_compares_a_judged_copy_with_the_expert_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``analyze JUDGED --expert EXPERT_FILE``: claim (a)'s quantity on a user's judge (Kendall
    tau of the agents' CE on the judged labels vs the expert labels, with its interval over the
    questions) and kappa_E. A copy that equals the experts' evidence gives tau 1 (exact); one
    that reads half the agents' evidence backwards does not; a file that is not a fully judged
    copy of the expert file, an unlabelled expert file and --n-boot 0 are one line, exit 2."""
    from iclr26_common.testing import assert_one_line_error, run_main

    expert = write_traces(synth_traces(20, seed=0), tmp_path / "expert.jsonl")
    judged = tmp_path / "judged.jsonl"
    assert main(["seekbench", "judge", str(expert), "--out", str(judged)]) == 0
    capsys.readouterr()
    args = ["seekbench", "analyze", str(judged), "--n-boot", "100", "--expert", str(expert)]
    run = run_main(main, [*args, "--out", str(tmp_path / "a")], capsys)
    assert run.code == 0, run.err
    assert f"vs the expert labels of {expert}: Kendall tau(CE on these labels" in run.out
    saved = json.loads((tmp_path / "a" / "metrics.json").read_text())["expert_comparison"]
    assert saved["tau"]["estimate"] == pytest.approx(1.0) and saved["tau"]["method"] == "exact"
    assert saved["evidence"]["kappa"] == pytest.approx(1.0) and saved["agents_defined"] == 6

    flipped = read_traces(judged)
    for trace in flipped:
        if trace["model"] not in ("calibrated", "premature", "reckless"):
            continue
        for step in trace["trace"]:
            attrs = (step.get("annotation") or {}).get("attributes") or {}
            if "information_quality" in attrs:
                good = attrs["information_quality"] == "Sufficient"
                attrs["information_quality"] = "Insufficient" if good else "Sufficient"
                attrs["information_clarity"] = "Unclear" if good else "Clear"
    bad = write_traces(flipped, tmp_path / "flipped.jsonl")
    args[2] = str(bad)
    run = run_main(main, [*args, "--out", str(tmp_path / "b")], capsys)
    saved = json.loads((tmp_path / "b" / "metrics.json").read_text())["expert_comparison"]
    assert run.code == 0 and saved["tau"]["estimate"] < 2 / 3 and saved["evidence"]["kappa"] < 0.7

    other = write_traces(synth_traces(10, seed=1), tmp_path / "other.jsonl")
    unlabelled = tmp_path / "unlabelled.jsonl"
    main(["seekbench", "synth", "--out", str(unlabelled), "--questions", "20", "--unlabelled"])
    capsys.readouterr()
    for analysed, reference, message in (
        (other, expert, "not a judged copy of that file"),
        (judged, unlabelled, "no result step carries information_quality (no labels)"),
    ):
        args = ["seekbench", "analyze", str(analysed), "--expert", str(reference)]
        line = assert_one_line_error(main, [*args, "--out", str(tmp_path / "x")], capsys)
        assert message in line, line
    args = ["seekbench", "analyze", str(judged), "--expert", str(expert), "--n-boot", "0"]
    line = assert_one_line_error(main, [*args, "--out", str(tmp_path / "c")], capsys)
    assert "--expert needs resamples" in line, line
