"""PERK's claims on planted paired outcomes: each can hold, fail, or be inconclusive."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


def _acc(rate: float, n: int = 100, shift: int = 0) -> np.ndarray:
    """``n`` 0/1 outcomes with ``round(rate * n)`` ones, starting at record ``shift``."""
    out = np.zeros(n)
    out[np.arange(shift, shift + round(rate * n)) % n] = 1
    return out


T, X = [4, 8], [16, 32]
GOOD = {
    "perk": {4: _acc(0.6), 8: _acc(0.6), 16: _acc(0.55), 32: _acc(0.5)},
    "ficr": {4: _acc(0.5), 8: _acc(0.5), 16: _acc(0.2), 32: _acc(0.1)},
}


def test_planted_signal_holds_both_with_intervals() -> None:
    from llm_methods.perk.experiment import judge

    a, b = judge(GOOD, T, X)
    assert (a.verdict, b.verdict) == ("held", "held")
    assert a.effect is not None and b.effect is not None
    assert a.effect.estimate == pytest.approx(10.0) and a.effect.n == 200
    assert a.effect.method in ("paired bootstrap", "exact") and a.effect.low >= 0
    # drop(FT-ICR) = 0.35, drop(PERK) = 0.075: 27.5 pts, whole interval above the 5-pt margin
    assert b.effect.estimate == pytest.approx(27.5) and b.effect.low >= 5.0
    assert a.measured["records"] == 200


def test_planted_losses_fail_both() -> None:
    from llm_methods.perk.experiment import judge

    a, b = judge({"perk": GOOD["ficr"], "ficr": GOOD["perk"]}, T, X)
    assert (a.verdict, b.verdict) == ("not held", "not held")


def test_null_method_and_small_samples() -> None:
    """FT-ICR in PERK's place: (a), a non-inferiority claim at margin 0, holds exactly (a tie is
    "at least as accurate"); (b), a gain of >= 5 pts, is not held (exact 0). A PERK 10 points
    worse fails (a); a 3-record design is underpowered, not decided."""
    from llm_methods.perk.experiment import judge

    a, b = judge({"perk": GOOD["ficr"], "ficr": GOOD["ficr"]}, T, X)
    assert (a.verdict, b.verdict) == ("held", "not held")
    assert a.effect.method == "exact" and b.effect.method == "exact"
    worse = {"perk": {L: _acc(0.4) for L in T + X}, "ficr": {L: _acc(0.5) for L in T + X}}
    assert judge(worse, T, X)[0].verdict == "not held"
    tiny = {
        "perk": {L: np.array([1.0, 0.0, 1.0]) for L in T + X},
        "ficr": {L: np.array([0.0, 1.0, 1.0]) for L in T + X},
    }
    assert judge(tiny, T, X)[0].verdict == "inconclusive"
    assert judge(tiny, T, X)[0].reason == "underpowered"


def test_controls_make_claims_inconclusive() -> None:
    from llm_methods.perk.experiment import judge

    chance = {"perk": {L: _acc(0.15) for L in T + X}, "ficr": GOOD["ficr"]}
    a, b = judge(chance, T, X)  # PERK at chance: (a) is testable, (b) is not
    assert (a.verdict, b.verdict) == ("not held", "inconclusive")
    assert b.reason == "control failed: both methods learned the task"
    floor = {m: {L: _acc(0.15) for L in T + X} for m in ("perk", "ficr")}
    assert judge(floor, T, X)[0].verdict == "inconclusive"


def test_neutral_pretraining_uses_neither_prompt() -> None:
    from llm_methods.perk.data import synth_babilong
    from llm_methods.perk.experiment import neutral_text

    rec = synth_babilong(1, 4, seed=0)[0]
    text = neutral_text(rec)
    for marker in ("doc_", "You have memorized", "<support>", "<output>", "Answer:"):
        assert marker not in text
    assert text.endswith(f"{rec.question} {rec.answer}.") and rec.context[0] in text


def test_base_neutral_accuracy_reads_the_first_answer_word(tmp_path: Path) -> None:
    """The diagnostic ``pretrain.neutral_acc_trained_lengths``: the first word after the
    question decides (punctuation and case ignored), and on a real (untrained) base folder the
    accuracy is a rate of the records given."""
    from llm_methods.perk.data import synth_babilong
    from llm_methods.perk.experiment import base_neutral_accuracy, neutral_answer_correct
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    assert neutral_answer_correct(" garden.<|endoftext|>", "garden")
    assert neutral_answer_correct("Kitchen", "kitchen")
    assert not neutral_answer_correct(" the garden", "garden")
    assert not neutral_answer_correct("", "garden")
    recs = synth_babilong(4, 2, None, ("qa1",), 3)
    tok = train_bpe([" ".join(r.context) + f" {r.question} {r.answer}." for r in recs], 300)
    model = tiny_llama(len(tok), 1, 16, 2, max_len=256, seed=0)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    acc = base_neutral_accuracy(tmp_path, recs, max_new_tokens=2)
    assert acc * len(recs) == round(acc * len(recs)) and 0.0 <= acc <= 1.0


def test_experiment_runs_its_real_path_at_the_smallest_scale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``experiment.run`` end to end (neutral pretraining, PERK's and FT-ICR's Lightning fits,
    the paired evaluation by length and position, peak memory, the claims, the plot) at a
    scale of seconds: the code the GPU-sized run would execute, only the sizes shrunk (the
    controls cannot pass on this CPU at any budgeted scale, README; what this checks is that
    the path runs and reports, not a verdict)."""
    from llm_methods.perk import experiment

    tiny = {
        **experiment.settings(True),
        "vocab": 256,
        "hidden": 32,
        "heads": 2,
        "pretrain_records": 8,
        "pretrain_steps": 2,
        "train_steps": 1,
        "n_eval": 2,
        "n_eval_position": 1,
        "lengths": (4, 16),
        "positions": (0.0,),
        "max_new_tokens": 3,
    }
    monkeypatch.setattr(experiment, "settings", lambda quick: tiny)
    result = experiment.run(True, tmp_path)
    assert len(result.claims) == 2
    assert all(c.effect is not None for c in result.claims)
    assert {c.verdict for c in result.claims} <= {"held", "not held", "inconclusive"}
    acc = result.metrics["accuracy"]
    assert set(acc) == {"perk", "ficr"}
    assert all(0 <= v <= 1 for m in acc.values() for v in m["length"].values())
    assert set(acc["perk"]["length"]) == {"4", "16"}
    assert 0 <= result.metrics["pretrain"]["neutral_acc_trained_lengths"] <= 1
    assert (tmp_path / "perk_accuracy.png").is_file()
    assert (tmp_path / "base_model" / "config.json").is_file()
