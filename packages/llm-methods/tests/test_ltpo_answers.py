"""Issue 41, LTPO: a solve counts only from the answer format the prompts ask for (``\\boxed{}``);
answers found only by a fallback (``#### N``, an answer phrase, the last number) are reported
apart, never as solves. Every test here fails on d9942d3, where the last number of any text
counted ("... rolling a 6 ..." solved a problem whose answer is 6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_methods.cli import main
from llm_methods.ltpo.data import grade, is_correct

OFF_TOPIC = "# How do I simulate rolling a 6 on a die in Python?"


@pytest.mark.parametrize(
    ("text", "gold", "verdict"),
    [
        (OFF_TOPIC, "6", "fallback"),  # off-topic text: not a solve
        ("3 + 3 = 6. The answer is 6.", "6", "fallback"),  # not the asked-for format
        ("#### 6", "6", "fallback"),
        ("So she has \\boxed{6} apples.", "6", "correct"),
        ("\\boxed{\\frac{12}{2}}", "6", "correct"),
        ("\\boxed{5}, then 6", "6", "wrong"),  # the boxed answer decides, not the last number
        ("no number here", "6", "wrong"),
    ],
)
def test_only_the_boxed_answer_solves(text: str, gold: str, verdict: str) -> None:
    assert grade(text, gold) == verdict
    assert is_correct(text, gold) == (verdict == "correct")


def test_solve_reports_fallback_matches_apart(tmp_path: Path, monkeypatch: Any) -> None:
    """``ltpo solve`` on three problems whose outputs are a boxed solve, the off-topic text
    ending in the gold and a wrong boxed answer: accuracy 1/3, one fallback match counted apart
    (``fallback_matches`` in summary.json, ``fallback_match`` / ``answer_source`` per row)."""
    from llm_methods.ltpo import optimize
    from llm_methods.zoo.models import tiny_lm

    lm = tiny_lm(
        ["Tom has 3 apples. " * 4] * 3, vocab_size=280, n_layers=1, hidden=16, heads=2, max_len=1024
    )
    folder = tmp_path / "m"
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    data = tmp_path / "p.jsonl"
    rows = [{"question": f"What is {i} + 1?", "answer": f"work\n#### {i + 1}"} for i in (5, 5, 5)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    outputs = ["so \\boxed{6}", OFF_TOPIC, "\\boxed{7} or 6"]

    def fake_decode(lm_, prefixes, thoughts, **_: Any) -> list[str]:  # type: ignore[no-untyped-def]
        return outputs[: len(prefixes)]

    monkeypatch.setattr(optimize, "decode_with_thoughts", fake_decode)
    out = tmp_path / "run"
    argv = ["ltpo", "solve", "--model", str(folder), "--data", str(data), "--method", "cot"]
    argv += ["--decode.batch_size", "3", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accuracy"] == pytest.approx(1 / 3)
    assert summary["fallback_matches"] == 1
    preds = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["correct"] for p in preds] == [True, False, False]
    assert [p["fallback_match"] for p in preds] == [False, True, False]
    assert [p["answer_source"] for p in preds] == ["boxed", "last_number", "boxed"]


def test_answer_sources_counts_each_format_once() -> None:
    """The experiment's ``answer_sources`` (why a method solved nothing: it wrote no
    ``\\boxed{}``): one count per text, in the format :func:`grade` would read."""
    from llm_methods.ltpo.experiment import answer_sources

    texts = [OFF_TOPIC, "\\boxed{6}", "x \\boxed{5} 6", "#### 6", "The answer is 6.", "no number"]
    counts = answer_sources(texts)
    assert counts == {"boxed": 2, "####": 1, "answer_phrase": 1, "last_number": 1, "none": 1}
    assert sum(counts.values()) == len(texts)


@pytest.mark.parametrize(
    ("text", "gold", "fmt", "verdict"),
    [
        # upstream's GSM8K/AIME judge (_extract_answer): the FIRST numeric \boxed{} decides
        ("So \\boxed{6}. Check: maybe \\boxed{7}", "6", "gsm8k", "correct"),
        ("So \\boxed{6}. Check: maybe \\boxed{7}", "7", "gsm8k", "wrong"),
        ("So \\boxed{6}. Check: maybe \\boxed{7}", "6", "aime", "correct"),
        ("So \\boxed{6}. Check: maybe \\boxed{7}", "6", "asdiv", "correct"),
        # a non-numeric box is skipped, the first numeric one read
        ("\\boxed{x+1} so \\boxed{6} or \\boxed{7}", "6", "gsm8k", "correct"),
        ("\\boxed{$1,200}", "1200", "gsm8k", "correct"),  # upstream strips $ and commas
        # no numeric box at all: only a fallback can match, never a solve
        ("\\boxed{six}, i.e. 6", "6", "gsm8k", "fallback"),
        # MATH-500 (upstream's Qwen extract_answer): the LAST \boxed{}, any content
        ("So \\boxed{6}. Check: maybe \\boxed{7}", "7", "math500", "correct"),
        ("So \\boxed{6}. Check: maybe \\boxed{7}", "6", "math500", "wrong"),
        ("\\boxed{1} then \\boxed{\\sqrt{2}}", "\\sqrt{2}", "math500", "correct"),
    ],
)
def test_boxed_answer_follows_upstreams_rule_per_format(
    text: str, gold: str, fmt: str, verdict: str
) -> None:
    """Review of issue 41: ours took the LAST \\boxed{} for every format, so "\\boxed{6} ...
    \\boxed{7}" with gold 6 was wrong here and right upstream (ltpo2025/LTPO@2c3d4f2,
    ``extract_judge_answer/utils.py``)."""
    assert grade(text, gold, fmt) == verdict


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown format 'gsm9k'"):
        grade("\\boxed{6}", "6", "gsm9k")
