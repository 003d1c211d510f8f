"""PERK's claims on planted paired outcomes: each can hold, fail, or be inconclusive."""

from __future__ import annotations

import numpy as np


def _acc(rate: float, n: int = 100) -> np.ndarray:
    out = np.zeros(n)
    out[: round(rate * n)] = 1
    return out


def test_perk_claims_planted() -> None:
    from llm_methods.perk.experiment import judge

    T, X = [4, 8], [16, 32]
    good = {
        "perk": {4: _acc(0.6), 8: _acc(0.6), 16: _acc(0.55), 32: _acc(0.5)},
        "ficr": {4: _acc(0.5), 8: _acc(0.5), 16: _acc(0.2), 32: _acc(0.1)},
    }
    a, b = judge(good, T, X)
    assert (a.verdict, b.verdict) == ("held", "held")
    assert a.measured["records"] == 200 and a.measured["gap"] == 0.1
    bad = {"perk": good["ficr"], "ficr": good["perk"]}
    a, b = judge(bad, T, X)
    assert (a.verdict, b.verdict) == ("not held", "not held")
    chance = {"perk": {L: _acc(0.15) for L in T + X}, "ficr": good["ficr"]}
    a, b = judge(chance, T, X)  # PERK at chance: (a) is testable, (b) is not
    assert (a.verdict, b.verdict) == ("not held", "inconclusive")
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
