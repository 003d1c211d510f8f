"""``llm-methods ltpo judge``: the experiment's claims from four ``ltpo solve`` runs.

Planted runs (no model): LTPO that beats CoT-Unk, most on hard problems, must give "held" for
both claims; LTPO that loses to CoT-Unk on hard problems must give "not held" for both; all four
methods equal must not hold (b). Mismatched runs are refused in one line naming the file. One
test chains ``synth`` -> four ``solve`` runs on a tiny model -> ``judge``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from iclr26_common.testing import assert_one_line_error
from llm_methods.cli import main
from llm_methods.ltpo.data import read_problems, synth_problems

METHODS = ("cot", "cot_unk", "latentseek", "ltpo")
FLAGS = {"cot": "--cot", "cot_unk": "--cot-unk", "latentseek": "--latentseek", "ltpo": "--ltpo"}


def _plant(
    root: Path, rates: dict[str, dict[int, float]], n: int = 200, seed: int = 1
) -> dict[str, Path]:
    """Four ``ltpo solve``-shaped runs on ``n`` synth problems: method m solves a problem of
    difficulty d with probability ``rates[m][d]`` (draws shared across methods, so an equal
    rate means the same problems). LTPO's output text always differs from CoT-Unk's."""
    records = synth_problems(n, seed=0)
    u = np.random.default_rng(seed).random(n)
    runs = {}
    for m in METHODS:
        rows = []
        for i, r in enumerate(records):
            solved = bool(u[i] < rates[m][r["difficulty"]])
            rows.append(
                {
                    "id": r["id"],
                    "difficulty": r["difficulty"],
                    "question": r["question"],
                    "gold": r["answer"].rsplit("####", 1)[1].strip(),
                    "prediction": "",
                    "correct": solved,
                    "fallback_match": False,
                    "output": f"{m} {i} \\boxed{{{int(solved)}}}",
                }
            )
        folder = root / m
        folder.mkdir(parents=True)
        (folder / "predictions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
        summary = {"method": m, "model": "planted", "n": n}
        (folder / "summary.json").write_text(json.dumps(summary))
        runs[m] = folder
    return runs


def _args(runs: dict[str, Path]) -> list[str]:
    return [x for m in METHODS for x in (FLAGS[m], str(runs[m]))]


BASE = {1: 0.6, 2: 0.5, 3: 0.3, 4: 0.2}


def test_planted_ltpo_win_holds_both_claims(tmp_path: Path, capsys: Any) -> None:
    """LTPO = CoT-Unk on 1-2 steps, +40 pts on 3-4 steps: (a) gain ~ +20 pts, (b) growth
    ~ +40 pts; both intervals clear their thresholds (0 and 5 pts)."""
    ltpo = {1: 0.6, 2: 0.5, 3: 0.7, 4: 0.6}
    runs = _plant(tmp_path, {"cot": BASE, "cot_unk": BASE, "latentseek": BASE, "ltpo": ltpo})
    out = tmp_path / "claims.json"
    assert main(["ltpo", "judge", *_args(runs), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "(a) held" in printed and "(b) held" in printed and "verdict: held" in printed
    data = json.loads(out.read_text())
    assert [c["verdict"] for c in data["claims"]] == ["held", "held"]
    gain = data["claims"][0]["effect"]
    assert gain["low"] > 0 and 10 < gain["estimate"] < 30, gain
    growth = data["claims"][1]["effect"]
    assert growth["low"] > 5 and 25 < growth["estimate"] < 55, growth
    assert data["metrics"]["n_problems"] == 200
    assert data["metrics"]["accuracy"]["ltpo"]["all_ci95"][0] > 0.4


def test_planted_ltpo_loss_holds_neither_claim(tmp_path: Path) -> None:
    """LTPO = CoT-Unk on 1-2 steps, 3-4 steps solved only where CoT-Unk's rate is 0.1 instead of
    0.5: (a) gain ~ -20 pts, (b) growth ~ -40 pts: both "not held" (the controls pass)."""
    base = {1: 0.6, 2: 0.5, 3: 0.5, 4: 0.5}
    ltpo = {1: 0.6, 2: 0.5, 3: 0.1, 4: 0.1}
    runs = _plant(tmp_path, {"cot": base, "cot_unk": base, "latentseek": base, "ltpo": ltpo})
    out = tmp_path / "claims.json"
    assert main(["ltpo", "judge", *_args(runs), "--out", str(out)]) == 0
    claims = json.loads(out.read_text())["claims"]
    assert [c["verdict"] for c in claims] == ["not held", "not held"]
    assert all(p["passed"] for c in claims for p in c["preconditions"])
    assert claims[0]["effect"]["high"] < 0 and claims[1]["effect"]["high"] < 5


def test_equal_methods_do_not_hold_growth(tmp_path: Path) -> None:
    """Every method solves the same problems: LTPO's advantage is 0 in both bands, so (b)'s
    growth of >= 5 pts is "not held" (a null cannot pass it)."""
    runs = _plant(tmp_path, dict.fromkeys(METHODS, BASE))
    from llm_methods.ltpo.experiment import judge_predictions

    claims, metrics = judge_predictions(runs)
    assert claims[1].verdict == "not held"
    assert metrics["ltpo_answers_changed_vs_cot_unk"] == 200  # texts differ, outcomes not


def test_floor_runs_are_inconclusive(tmp_path: Path) -> None:
    """No method solves anything (SmolLM2-135M's case): the shared control fails, both claims
    "inconclusive" whatever LTPO does."""
    zero = dict.fromkeys(range(1, 5), 0.0)
    runs = _plant(tmp_path, dict.fromkeys(METHODS, zero))
    from llm_methods.ltpo.experiment import judge_predictions

    claims, _ = judge_predictions(runs)
    assert [c.verdict for c in claims] == ["inconclusive", "inconclusive"]


def _edit_rows(path: Path, change: Any) -> None:
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows = change(rows)
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))


def test_mismatched_runs_are_refused_in_one_line(tmp_path: Path, capsys: Any) -> None:
    runs = _plant(tmp_path, dict.fromkeys(METHODS, BASE), n=12)
    args = ["ltpo", "judge", *_args(runs)]
    ltpo_file = runs["ltpo"] / "predictions.jsonl"
    saved = ltpo_file.read_text()

    def refused(expected: str) -> None:
        line = assert_one_line_error(main, args, capsys)
        assert expected in line, line
        ltpo_file.write_text(saved)

    # another problem set: one problem replaced (same count)
    _edit_rows(ltpo_file, lambda rows: [*rows[:-1], {**rows[-1], "id": "other-7"}])
    refused(f"{ltpo_file}: not the problem set of {runs['cot'] / 'predictions.jsonl'}")
    _edit_rows(ltpo_file, lambda rows: rows[:-1])  # one problem fewer
    (runs["ltpo"] / "summary.json").write_text(
        json.dumps({"method": "ltpo", "model": "planted", "n": 11})
    )
    refused(f"{ltpo_file}: not the problem set of")
    (runs["ltpo"] / "summary.json").write_text(
        json.dumps({"method": "ltpo", "model": "planted", "n": 12})
    )
    _edit_rows(ltpo_file, lambda rows: [{**rows[0], "gold": "-1"}, *rows[1:]])
    refused(f"{ltpo_file}: problem 'synth-s0-0' has gold '-1'")
    _edit_rows(ltpo_file, lambda rows: [{**rows[0], "difficulty": 0}, *rows[1:]])
    refused(f"{ltpo_file}:1: field 'difficulty' is 0, expected 1-4")
    _edit_rows(ltpo_file, lambda rows: [{k: v for k, v in rows[0].items() if k != "id"}])
    refused(f"{ltpo_file}:1: missing field 'id'")
    # the wrong run given for a method, another model, an unfinished run
    line = assert_one_line_error(
        main, ["ltpo", "judge", *_args({**runs, "ltpo": runs["cot_unk"]})], capsys
    )
    assert f"{runs['cot_unk'] / 'summary.json'}: field 'method' is 'cot_unk'" in line, line
    summary = runs["latentseek"] / "summary.json"
    summary.write_text(json.dumps({"method": "latentseek", "model": "other", "n": 12}))
    assert f"{summary}: field 'model' is 'other'" in assert_one_line_error(main, args, capsys)
    summary.unlink()
    assert f"{summary}: no such file: the latentseek run is unfinished" in assert_one_line_error(
        main, args, capsys
    )


def test_out_file_is_never_overwritten_silently(tmp_path: Path, capsys: Any) -> None:
    runs = _plant(tmp_path / "runs", dict.fromkeys(METHODS, BASE), n=8)
    out = tmp_path / "claims.json"
    out.write_text("mine")
    line = assert_one_line_error(main, ["ltpo", "judge", *_args(runs), "--out", str(out)], capsys)
    assert "exists; pass --overwrite" in line and out.read_text() == "mine"
    assert main(["ltpo", "judge", *_args(runs), "--out", str(out), "--overwrite"]) == 0
    assert len(json.loads(out.read_text())["claims"]) == 2


def test_problem_ids_from_the_input(tmp_path: Path) -> None:
    """A record's own id (``id``, MATH-500's ``unique_id``) is kept; without one, ``line N``."""
    gsm = tmp_path / "g.jsonl"
    gsm.write_text(
        '{"question": "q1?", "answer": "#### 1", "id": "a"}\n\n'
        '{"question": "q2?", "answer": "#### 2", "difficulty": 3}\n'
    )
    probs = read_problems(gsm)
    assert [(p.id, p.difficulty) for p in probs] == [("a", 0), ("line 3", 3)]
    m500 = tmp_path / "m.jsonl"
    m500.write_text('{"problem": "x?", "answer": "2", "unique_id": "test/algebra/1.json"}\n')
    assert read_problems(m500, "math500")[0].id == "test/algebra/1.json"


@pytest.fixture(scope="module")
def model_dir(saved_tiny_lm: Any) -> Path:
    return saved_tiny_lm(
        "tiny-ltpo-judge",
        ["Tom has 3 apples and buys 4 more. " * 4, "How many now? 7. " * 8] * 3,
        vocab_size=280,
        n_layers=2,
        hidden=32,
        heads=2,
        max_len=1024,
    )


def test_synth_solve_judge_end_to_end(model_dir: Path, tmp_path: Path, capsys: Any) -> None:
    """The GPU recipe of the README on a tiny model: ``synth``, ``solve`` per method (each row
    carries the problem's id and difficulty), ``judge``. The tiny model solves nothing, so the
    shared control fails and both claims are "inconclusive"."""
    data = tmp_path / "p.jsonl"
    assert main(["ltpo", "synth", "--out", str(data), "--n", "4"]) == 0
    small = ["--ltpo.steps", "1", "--ltpo.n_thoughts", "2", "--decode.max_new_tokens", "2"]
    runs = {}
    for m in METHODS:
        runs[m] = tmp_path / m
        args = ["ltpo", "solve", "--model", str(model_dir), "--data", str(data), "--method", m]
        assert main([*args, "--out", str(runs[m]), "--device", "cpu", "--quiet", *small]) == 0
    rows = [json.loads(x) for x in (runs["ltpo"] / "predictions.jsonl").read_text().splitlines()]
    assert [(r["id"], r["difficulty"]) for r in rows] == [
        (f"synth-s0-{i}", i + 1) for i in range(4)
    ]
    capsys.readouterr()
    out = tmp_path / "claims.json"
    assert main(["ltpo", "judge", *_args(runs), "--out", str(out)]) == 0
    assert "verdict: inconclusive" in capsys.readouterr().out
    claims = json.loads(out.read_text())["claims"]
    assert [c["verdict"] for c in claims] == ["inconclusive", "inconclusive"]
