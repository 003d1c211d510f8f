"""Planted-signal tests of ``llm_methods.seekbench.experiment`` (issue 42).

The claims are about real agents' traces and run only on a trace file (``SEEKBENCH_DATA``):
without one each is inconclusive with the named control; on files in the official schema (the
shipped fixture and files built from it) (a) holds and fails, (b) and (c) hold on a planted
equal-accuracy pair, are not held for the null method (an agent against its own copy) and are
inconclusive where no equal-accuracy pair exists. The synthetic proxy's quantities are pipeline
checks (designed outcome), tested here to pass, fail and report failed controls."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from iclr26_common.report import verdict_text
from llm_methods.seekbench import experiment as ex
from llm_methods.seekbench import report_text
from llm_methods.seekbench.data import read_traces, write_traces

REFERENCE = Path(__file__).parent / "data" / "reference" / "seekbench_synthetic.jsonl.gz"


# ------------------------------------------------------------- pipeline checks (synthetic proxy)


def _per_seed(**over: list[float]) -> dict[str, list[float]]:
    values = {
        "tau_ce": [1.0, 1.0, 2 / 3, 1.0, 1.0],
        "ce_gap": [0.06, 0.05, 0.07, 0.06, 0.055],
        "premature_gap": [0.5, 0.52, 0.48, 0.55, 0.5],
        "accuracy_gap": [0.01, -0.01, 0.0, 0.005, -0.005],
        "kappa_evidence": [0.9, 0.85, 0.95, 0.9, 0.88],
    }
    values.update(over)
    return values


def test_pipeline_checks_pass_on_planted_separation() -> None:
    checks = ex.proxy_checks(_per_seed())
    assert [c.outcome for c in checks] == ["passed"] * 3
    assert all(c.to_dict()["effect"]["decision"] == "held" for c in checks)
    assert "**passed**" in checks[0].line()


def test_pipeline_checks_fail_on_planted_reversal_and_null() -> None:
    reversed_ = ex.proxy_checks(
        _per_seed(
            tau_ce=[-1.0, -2 / 3, -1.0, -1.0, -2 / 3],
            ce_gap=[-0.05, -0.06, -0.04, -0.05, -0.06],
            premature_gap=[-0.3, -0.35, -0.3, -0.32, -0.31],
        )
    )
    assert [c.outcome for c in reversed_] == ["failed"] * 3
    # the null method: the calibrated agent in the premature agent's place (every gap exactly
    # 0) and a CE that orders nothing (tau 0)
    null = ex.proxy_checks(
        _per_seed(
            tau_ce=[0.0] * 5, ce_gap=[0.0] * 5, premature_gap=[0.0] * 5, accuracy_gap=[0.0] * 5
        )
    )
    assert [c.outcome for c in null] == ["failed"] * 3
    assert all(c.effect.method == "exact" for c in null)
    spread = ex.proxy_checks(_per_seed(ce_gap=[0.0, 0.05, -0.01, 0.06, 0.02]))
    assert spread[1].outcome == "undecided"


def test_pipeline_check_controls() -> None:
    _, b, c = ex.proxy_checks(_per_seed(accuracy_gap=[0.10, 0.12, 0.09, 0.11, 0.1]))
    assert b.outcome == c.outcome == "control failed: accuracy does not separate the pair"
    # the judge's control: kappa_E >= 0.7 in every seed (0.69 in one fails all three)
    checks = ex.proxy_checks(_per_seed(kappa_evidence=[0.9, 0.69, 0.9, 0.9, 0.9]))
    assert all("judge's evidence levels agree with gold" in c.outcome for c in checks)
    assert "FAILED" in checks[0].line()
    assert ex.proxy_checks(_per_seed(kappa_evidence=[0.7] * 5))[0].outcome == "passed"


# ------------------------------------------------------------------ claims on real traces


def test_claims_without_a_trace_file_are_inconclusive_with_the_named_control() -> None:
    judged = ex.claims(None)
    assert len(judged) == 3
    for claim in judged:
        assert claim.verdict == "inconclusive" and claim.text.startswith("On real agents' traces")
        assert [p.name for p in claim.failed_preconditions] == [ex.DATA_CONTROL]
        line = verdict_text(claim.to_dict())
        assert line == "inconclusive (control failed: SEEKBENCH_DATA names a trace file)"
        assert "\n" not in line
        assert "iclr26 reproduce llm-methods.seekbench" in claim.failed_preconditions[0].measured
        assert claim.effect is None and claim.criterion_met is None  # not measured


def _pairs(
    acc: tuple[float, float, float] | None,
    ce: tuple[float, float, float] | None = (0.05, 0.03, 0.07),
    premature: tuple[float, float, float] | None = (0.3, 0.2, 0.4),
) -> dict:
    def interval(x: tuple[float, float, float] | None) -> dict | None:
        if x is None:
            return None
        exact = x[1] == x[2]
        return {
            "estimate": x[0],
            "low": x[1],
            "high": x[2],
            "method": "exact" if exact else "bootstrap",
            "n": 60,
            "resample_seed": None if exact else 0,
        }

    return {
        "pair": ["A", "B"],
        "accuracy": interval(acc),
        "ce": interval(ce),
        "premature_rate": interval(premature),
        "accuracy_by_pair": [],
    }


def _real(tau: tuple[float, float, float] | None = (0.87, 0.73, 1.0), **over: object) -> dict:
    values = {
        "path": "traces.jsonl",
        "traces": 120,
        "kappa_evidence": 0.85,
        "agents_defined": 6,
        "tau": None
        if tau is None
        else {
            "estimate": tau[0],
            "low": tau[1],
            "high": tau[2],
            "method": "bootstrap",
            "n": 60,
            "resample_seed": 0,
        },
        "pairs": _pairs((0.0, -0.03, 0.03)),
    }
    values.update(over)
    return values


def test_claims_on_planted_real_numbers_hold_fail_and_check_controls() -> None:
    assert [c.verdict for c in ex.claims(_real())] == ["held"] * 3
    # the data control keeps its name whatever its outcome (the outcome: passed / measured)
    for claim in ex.claims(_real()):
        assert claim.preconditions[0].passed and claim.preconditions[0].name == ex.DATA_CONTROL
    assert ex.claims(None)[0].preconditions[0].name == ex.DATA_CONTROL
    a, b, c = ex.claims(_real((0.2, -0.2, 0.6), pairs=_pairs((0.0, -0.03, 0.03), (0.0,) * 3)))
    assert (a.verdict, b.verdict) == ("not held", "not held")
    assert ex.claims(_real((0.6, 0.3, 0.9)))[0].reason == "underpowered"
    # (a)'s controls: the judge against the file's labels, CE defined for >= 3 agents
    a = ex.claims(_real(kappa_evidence=0.01))[0]
    assert [p.name for p in a.failed_preconditions] == ["judge's evidence levels agree with gold"]
    a = ex.claims(_real(None, agents_defined=2))[0]
    assert [p.name for p in a.failed_preconditions] == ["CE defined for the agents"]
    # (b), (c): no equal-accuracy pair (the released file: the narrowest interval is +-0.19)
    _, b, c = ex.claims(_real(pairs=_pairs((0.0, -0.19, 0.19))))
    for claim in (b, c):
        assert claim.verdict == "inconclusive"
        assert [p.name for p in claim.failed_preconditions] == ["an equal-accuracy pair exists"]
    _, b, c = ex.claims(_real(pairs=_pairs(None, None, None)))
    assert {p.name for p in b.failed_preconditions} == {
        "an equal-accuracy pair exists",
        "CE defined for the pair",
    }
    assert "premature rate defined for the pair" in [p.name for p in c.failed_preconditions]


def _swap_levels(traces: list[dict], models: set[str]) -> list[dict]:
    """Copies where the given agents' result labels are flipped (Sufficient & Clear <->
    Insufficient & Unclear): a judge that reads their evidence backwards."""
    out = copy.deepcopy(traces)
    for trace in out:
        if trace["model"] not in models:
            continue
        for step in trace["trace"]:
            attrs = (step.get("annotation") or {}).get("attributes") or {}
            if "information_quality" in attrs:
                good = attrs["information_quality"] == "Sufficient"
                attrs["information_quality"] = "Insufficient" if good else "Sufficient"
                attrs["information_clarity"] = "Unclear" if good else "Clear"
    return out


def _result_steps(trace: dict) -> list[dict]:
    return [
        s
        for s in trace["trace"]
        if "information_quality" in ((s.get("annotation") or {}).get("attributes") or {})
    ]


def _poor_before_answer(traces: list[dict], models: set[str], last_only: bool) -> list[dict]:
    """Copies where the given agents' results before their answer are labelled Insufficient &
    Unclear (``last_only``: only the last one): they answer on poor evidence."""
    out = copy.deepcopy(traces)
    for trace in out:
        if trace["model"] not in models:
            continue
        steps = trace["trace"]
        answer = next(
            (i for i, s in enumerate(steps) if s["type"] in ("CorrectAnswer", "IncorrectAnswer")),
            len(steps),
        )
        results = _result_steps({"trace": steps[:answer]})
        for step in results[-1:] if last_only else results:
            attrs = step["annotation"]["attributes"]
            attrs["information_quality"], attrs["information_clarity"] = "Insufficient", "Unclear"
    return out


def test_official_tau_planted() -> None:
    """A judge that copies the expert labels orders the agents exactly as they do (tau 1); one
    that reads half the agents' evidence backwards does not reach the threshold; the interval
    is over the file's (dataset, question) clusters."""
    gold = read_traces(REFERENCE)
    same = ex.official_tau(gold, copy.deepcopy(gold), n_boot=200)
    assert same["tau"]["estimate"] == pytest.approx(1.0) and same["agents_defined"] == 6
    assert same["tau"]["low"] == pytest.approx(1.0)
    assert same["tau"]["n"] == same["n_clusters"] >= 10
    models = sorted({t["model"] for t in gold})
    swapped = ex.official_tau(gold, _swap_levels(gold, set(models[::2])), n_boot=200)
    assert swapped["tau"]["estimate"] < ex.CLAIM_A_MIN_TAU
    assert ex.official_effect(swapped["tau"]).decide() != "held"


def test_claim_a_holds_and_fails_on_the_fixture_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """(a) on the shipped file in the official schema: the rule judge (kappa_E 0.88 against its
    labels) orders the agents as the labels do: held. A judge that agrees as well (kappa_E
    0.79, the control passes) but calls the last result before the answer Insufficient for the
    three best-calibrated agents reorders them: not held."""
    real = ex.real_traces(REFERENCE, n_boot=300)
    a = ex.claims(real)[0]
    assert real["kappa_evidence"] >= ex.MIN_EVIDENCE_KAPPA and a.verdict == "held"
    assert a.effect is not None and a.effect.units.startswith("questions")

    gold = read_traces(REFERENCE)
    ranked = ex.official_tau(gold, copy.deepcopy(gold), n_boot=10)
    best = {m for _, m in sorted(zip(ranked["ce_expert"], ranked["agents"], strict=True))[:3]}
    misread = _poor_before_answer(gold, best, last_only=True)
    monkeypatch.setattr("llm_methods.seekbench.judge.annotate", lambda traces, judge: misread)
    real = ex.real_traces(REFERENCE, n_boot=300, judge=object())
    a = ex.claims(real)[0]
    assert real["kappa_evidence"] >= ex.MIN_EVIDENCE_KAPPA
    assert not a.failed_preconditions and a.verdict == "not held"


def _pair_file(tmp_path: Path, relabel: bool) -> Path:
    """One agent of the fixture (Qwen2.5-7B-Instruct, premature in 13 %) and a copy of it under another name
    (same questions, same answers: equal accuracy exactly); ``relabel``: in two traces of three
    the copy's results before its answer are labelled poor (it answers prematurely there; the
    third keeps every evidence level, so CE stays defined), else the copy is the null method."""
    gold = [t for t in read_traces(REFERENCE) if t["model"] == "Qwen2.5-7B-Instruct"]
    twin = copy.deepcopy(gold)
    for trace in twin:
        trace["model"] = "Qwen-twin"
        trace["id"] = f"{trace['id']}-twin"
    if relabel:
        poor = _poor_before_answer(twin, {"Qwen-twin"}, last_only=False)
        twin = [p if k % 3 else t for k, (t, p) in enumerate(zip(twin, poor, strict=True))]
    return write_traces(gold + twin, tmp_path / f"pair-{relabel}.jsonl")


@pytest.mark.parametrize("relabel", [True, False])
def test_claims_b_c_on_official_format_pairs(tmp_path: Path, relabel: bool) -> None:
    """(b), (c) on the file's own labels: a planted equal-accuracy pair that differs in its
    evidence at the answer holds; the null method (an agent against its own copy) is not
    held, with an exact zero difference; both pass the equal-accuracy control."""
    pairs = ex.pair_differences(read_traces(_pair_file(tmp_path, relabel)), n_boot=300)
    assert pairs["accuracy"]["method"] == "exact" and pairs["accuracy"]["estimate"] == 0.0
    real = _real(pairs=pairs)
    _, b, c = ex.claims(real)
    assert not b.failed_preconditions and not c.failed_preconditions
    if relabel:
        assert (b.verdict, c.verdict) == ("held", "held")
        assert pairs["premature_rate"]["order"][0] == "Qwen-twin"
    else:
        assert (b.verdict, c.verdict) == ("not held", "not held")
        assert b.effect is not None and b.effect.method == "exact"


def test_no_equal_accuracy_pair_on_the_fixture_file() -> None:
    """The shipped file (30 questions per agent) has agents with equal point accuracy
    (ReSearch and gpt-4o: 0.6) but no interval within +-0.05, like the released file."""
    pairs = ex.pair_differences(read_traces(REFERENCE), n_boot=300)
    assert len(pairs["accuracy_by_pair"]) == 15
    assert pairs["pair"] == ["ReSearch-ref-agent", "gpt-4o-ref-agent"]
    assert pairs["accuracy"]["estimate"] == pytest.approx(0.0)
    _, b, c = ex.claims(_real(pairs=pairs))
    assert b.verdict == c.verdict == "inconclusive"
    assert [p.name for p in b.failed_preconditions] == ["an equal-accuracy pair exists"]


def test_experiment_reads_official_traces_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SEEKBENCH_DATA`` set: the claims run on that file (a small one in the official schema)
    and the report says which data ran; the proxy gives pipeline checks, never claims; unset:
    the claims are inconclusive with the named control; a missing file is one line naming
    the variable."""
    small = {
        "n_questions": 40,
        "seeds": (0, 1),
        "n_boot": 200,
        "lm_results": 0,
        "lm_other": 0,
        "lm_real": 6,
    }
    monkeypatch.setattr(ex, "settings", lambda quick: small)
    # the SmolLM2 judge's place: a judge that copies the file's labels (passes the control)
    monkeypatch.setattr(ex, "_smollm2_judge", _CopyJudge)
    monkeypatch.setenv("SEEKBENCH_DATA", str(REFERENCE))
    result = ex.run(True, tmp_path / "official")
    assert result.summary.startswith("Data: claims on the real traces ")
    assert str(REFERENCE) in result.metrics["data"] and "synthetic proxy" in result.metrics["data"]
    official = result.metrics["official"]
    assert official["traces"] == 180 and official["evidence"]["n"] > 100
    assert [c.verdict for c in result.claims] == ["held", "inconclusive", "inconclusive"]
    assert all(c.text.startswith("On real agents' traces") for c in result.claims)
    assert ex.PIPELINE_TITLE in result.details and len(result.metrics["pipeline_checks"]) == 3
    assert result.metrics["pipeline_checks"][0]["outcome"] == "passed"  # the designed order
    # the LM judge's sample of the file's result steps, reported beside the rule judge's kappa_E
    lm = official["lm_judge_smollm2"]
    assert lm["steps"] == lm["calls"] == lm["evidence"]["n"] == 6 and lm["decides_a"]
    assert "SmolLM2 judge on a random sample of 6 of them (seed 0): kappa_E 1.00" in result.summary
    assert "claim (a) on its labels would be decidable" in result.details
    # (b), (c): their control failed, so no "deciding this effect needs ~N" for them
    for k, end in (("(b)", "(c)"), ("(c)", "Real traces")):
        part = result.summary.split(f"{k} inconclusive", 1)[1].split(end, 1)[0]
        assert "needs ~" not in part and "control failed: an equal-accuracy pair" in part

    monkeypatch.setenv("SEEKBENCH_DATA", "")
    assert ex.official_data() is None
    monkeypatch.setenv("SEEKBENCH_DATA", str(tmp_path / "missing.jsonl"))
    with pytest.raises(ValueError, match=r"SEEKBENCH_DATA=.*missing\.jsonl: no such file"):
        ex.run(True, tmp_path / "missing")


OFFICIAL_SHA256 = "ecbbed133abd21a3"  # SHAO-Jiaqi757/SeekBench @ afddcb3 data/seekbench_data.jsonl


def test_released_traces_have_no_equal_accuracy_pair() -> None:
    """With ``SEEKBENCH_DATA`` naming the released file (not shipped: no licence): the README's
    numbers. Every claim is inconclusive: the rule judge fails the judge control (kappa_E
    0.01) and no pair of the five agents has an accuracy interval within +-0.05."""
    import hashlib
    import os

    path = Path(os.environ.get("SEEKBENCH_DATA", "") or "/nonexistent")
    if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest()[:16] != OFFICIAL_SHA256:
        pytest.skip("SEEKBENCH_DATA does not name the released seekbench_data.jsonl")
    real = ex.real_traces(path, n_boot=1000)
    assert real["traces"] == 190 and real["kappa_evidence"] < 0.05
    bounds = [row["bound"] for row in real["pairs"]["accuracy_by_pair"]]
    assert len(bounds) == 10 and min(bounds) > 0.15
    assert real["pairs"]["pair"] == ["DeepResearcher-7b", "fewshot-Qwen2.5-7B-Instruct"]
    judged = ex.claims(real)
    assert [c.verdict for c in judged] == ["inconclusive"] * 3
    assert [c.failed_preconditions[0].name for c in judged] == [
        "judge's evidence levels agree with gold",
        "an equal-accuracy pair exists",
        "an equal-accuracy pair exists",
    ]


class _CopyJudge:
    """A judge that copies the traces' own result labels (kappa_E 1 against them)."""

    name = "copy"

    def __init__(self, invert: bool = False) -> None:
        self.calls, self.invert = 0, invert

    def label(self, trace: dict, i: int) -> dict:
        self.calls += 1
        attrs = dict(((trace["trace"][i].get("annotation") or {}).get("attributes")) or {})
        if self.invert:  # the null judge: the same answer for every step
            return {"information_quality": "Insufficient", "information_clarity": "Unclear"}
        return {k: attrs.get(k) for k in ("information_quality", "information_clarity")}


def test_lm_sample_of_expert_labelled_result_steps() -> None:
    """The LM judge's sample of a trace file: only result steps with a gold evidence level,
    fixed by its seed; a judge that copies the labels passes the judge control, a judge that
    says Insufficient everywhere does not (kappa_E 0)."""
    from llm_methods.seekbench.counts import evidence_level
    from llm_methods.seekbench.judge import KINDS

    gold = read_traces(REFERENCE)
    sample = ex.lm_sample(gold, 12, 0, seed=0)
    assert len(sample) == 12 and sample == ex.lm_sample(gold, 12, 0, seed=0)
    assert sample != ex.lm_sample(gold, 12, 0, seed=1)
    for t, i in sample:
        step = gold[t]["trace"][i]
        assert KINDS[step["type"]] == "search_result" and evidence_level(step) is not None
    copied = ex.judge_sample(gold, _CopyJudge(), sample)
    assert copied["evidence"]["n"] == copied["calls"] == 12 and copied["passes_control"]
    null = ex.judge_sample(gold, _CopyJudge(invert=True), sample)
    assert null["evidence"]["kappa"] <= 0.0 and not null["passes_control"]
    real = ex.lm_real(gold, 12, _CopyJudge)
    assert real["decides_a"] and len(real["sample"]) == 12 and real["seed"] == ex.LM_REAL_SEED
    assert real["labelled_result_steps"] == sum(
        1
        for trace in gold
        for step in trace["trace"]
        if KINDS.get(step["type"]) == "search_result" and evidence_level(step) is not None
    )
    assert "would be decidable" in report_text._lm_real_text(real)
    assert "would not be decidable" in report_text._lm_real_text(
        ex.lm_real(gold, 12, lambda: _CopyJudge(True))
    )
    assert ex.lm_real(gold, 0, _CopyJudge) == {}


def test_no_sample_size_advice_where_a_control_failed() -> None:
    """A straddling effect's line says how many units would decide it, unless a control failed:
    then no number of units would (the pipeline check's line and the summary drop it)."""
    ok = ex.proxy_checks(_per_seed(ce_gap=[0.0, 0.05, -0.01, 0.06, 0.02]))[1]
    assert ok.outcome == "undecided" and "deciding this effect needs ~" in ok.line()
    failed = ex.proxy_checks(
        _per_seed(ce_gap=[0.0, 0.05, -0.01, 0.06, 0.02], accuracy_gap=[0.10, 0.12, 0.09, 0.11, 0.1])
    )[1]
    assert failed.outcome.startswith("control failed") and "needs ~" not in failed.line()
    text = ex.effect_text(ok.effect, control_failed=True)
    assert "needs ~" not in text and text.endswith(")")
    assert ex.effect_text(ok.effect) == ex.format_effect(ok.effect)


# ------------------------------------------------- claim (a) on a judged copy (SEEKBENCH_JUDGED)


def _judged_copy(tmp_path: Path, traces: list[dict], name: str = "judged.jsonl") -> Path:
    return write_traces(traces, tmp_path / name)


def _use_judged(monkeypatch: pytest.MonkeyPatch, data: Path | None, judged: Path | str):  # type: ignore[no-untyped-def]
    from llm_methods.seekbench.judged import judged_copy

    monkeypatch.setenv("SEEKBENCH_JUDGED", str(judged))
    return judged_copy(read_traces(data) if data is not None else None)


def test_claim_a_on_a_judged_copy_holds_fails_and_checks_its_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SEEKBENCH_JUDGED`` (a judge's labelled copy of the file, as `seekbench judge --judge
    http` writes it): (a) and its judge control are computed on that copy's labels, not the
    rule judge's. The rule judge's own copy gives the rule judge's numbers (held); a copy that
    misreads the last result before the answer of the three best-calibrated agents reorders
    them (not held, control passed); the null judge (Insufficient everywhere) fails the
    judge control (inconclusive). The per-agent metrics on the judge's labels are reported."""
    from llm_methods.seekbench.judge import RuleJudge, annotate

    gold = read_traces(REFERENCE)
    monkeypatch.setenv("SEEKBENCH_JUDGED", "")
    from llm_methods.seekbench.judged import judged_copy

    assert judged_copy(gold) is None  # unset or empty: the rule judge

    rule = _use_judged(monkeypatch, REFERENCE, _judged_copy(tmp_path, annotate(gold, RuleJudge())))
    real = ex.real_traces(REFERENCE, n_boot=300, judged_file=rule)
    same = ex.real_traces(REFERENCE, n_boot=300)
    assert real["judge"].startswith("SEEKBENCH_JUDGED=") and same["judge"] == "rule judge"
    assert real["tau"] == same["tau"] and real["kappa_evidence"] == same["kappa_evidence"]
    assert ex.claims(real)[0].verdict == "held"
    assert set(real["metrics_judge_labels"]) == set(real["agents"])
    assert real["metrics_judge_labels"] != real["metrics_expert_labels"]  # judge vs experts

    ranked = ex.official_tau(gold, copy.deepcopy(gold), n_boot=10)
    best = {m for _, m in sorted(zip(ranked["ce_expert"], ranked["agents"], strict=True))[:3]}
    misread = _poor_before_answer(gold, best, last_only=True)
    real = ex.real_traces(
        REFERENCE,
        n_boot=300,
        judged_file=_use_judged(monkeypatch, REFERENCE, _judged_copy(tmp_path, misread, "m.jsonl")),
    )
    a = ex.claims(real)[0]
    assert not a.failed_preconditions and a.verdict == "not held"

    null = copy.deepcopy(gold)
    for trace in null:
        for step in _result_steps(trace):
            step["annotation"]["attributes"].update(
                information_quality="Insufficient", information_clarity="Unclear"
            )
    real = ex.real_traces(
        REFERENCE,
        n_boot=300,
        judged_file=_use_judged(monkeypatch, REFERENCE, _judged_copy(tmp_path, null, "n.jsonl")),
    )
    a = ex.claims(real)[0]
    assert real["kappa_evidence"] <= 0.0 and a.verdict == "inconclusive"
    assert "judge's evidence levels agree with gold" in [p.name for p in a.failed_preconditions]
    table = "\n".join(report_text._judge_table(real))
    assert "SEEKBENCH_JUDGED=" in table and "| agent | accuracy | ce | premature_rate" in table


def test_a_judged_copy_of_other_traces_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``SEEKBENCH_JUDGED`` that is not a fully judged copy of ``SEEKBENCH_DATA``'s traces is
    refused with one line naming the variable: without SEEKBENCH_DATA, a missing file, another
    count, another id, other steps, a partly judged copy (it would keep the expert labels)."""
    from llm_methods.seekbench.judged import JudgedFileError

    gold = read_traces(REFERENCE)
    fewer = _judged_copy(tmp_path, gold[:-1], "fewer.jsonl")
    renamed = copy.deepcopy(gold)
    renamed[3]["id"] = "someone-else"
    shorter = copy.deepcopy(gold)
    shorter[5]["trace"] = shorter[5]["trace"][:-1]
    partial = copy.deepcopy(gold)
    _result_steps(partial[7])[0]["annotation"]["attributes"].pop("information_quality")
    cases = [
        (None, _judged_copy(tmp_path, gold), "needs SEEKBENCH_DATA"),
        (REFERENCE, tmp_path / "missing.jsonl", "no such file"),
        (REFERENCE, fewer, f"{len(gold) - 1} traces, SEEKBENCH_DATA has {len(gold)}"),
        (REFERENCE, _judged_copy(tmp_path, renamed, "r.jsonl"), "trace 4 has id 'someone-else'"),
        (REFERENCE, _judged_copy(tmp_path, shorter, "s.jsonl"), "trace 6 (id"),
        (REFERENCE, _judged_copy(tmp_path, partial, "p.jsonl"), "partly judged"),
    ]
    for data, judged, message in cases:
        with pytest.raises(JudgedFileError) as error:
            _use_judged(monkeypatch, data, judged)
        text = str(error.value)
        assert text.startswith("SEEKBENCH_JUDGED=") and message in text and "\n" not in text


def test_experiment_decides_a_on_the_judged_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The experiment with SEEKBENCH_DATA and SEEKBENCH_JUDGED: (a) on the copy's labels (the
    report names the copy and gives the per-agent metrics on its labels); a bad copy stops it
    before any work."""
    from llm_methods.seekbench.judge import RuleJudge, annotate

    small = {"n_questions": 20, "seeds": (0, 1), "n_boot": 100, "lm_results": 0, "lm_other": 0}
    monkeypatch.setattr(ex, "settings", lambda quick: small)
    gold = read_traces(REFERENCE)
    judged = _judged_copy(tmp_path, annotate(gold, RuleJudge()))
    monkeypatch.setenv("SEEKBENCH_DATA", str(REFERENCE))
    monkeypatch.setenv("SEEKBENCH_JUDGED", str(judged))
    result = ex.run(True, tmp_path / "out")
    official = result.metrics["official"]
    assert official["judge"].startswith(f"SEEKBENCH_JUDGED={judged}")
    assert result.claims[0].verdict == "held"
    assert f"Real traces: SEEKBENCH_JUDGED={judged}" in result.summary
    assert "Per-agent metrics on the labels of the SEEKBENCH_JUDGED=" in result.details
    monkeypatch.setenv("SEEKBENCH_JUDGED", str(_judged_copy(tmp_path, gold[:5], "bad.jsonl")))
    with pytest.raises(ValueError, match=r"^SEEKBENCH_JUDGED=.*bad\.jsonl: 5 traces"):
        ex.run(True, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()
