"""Dispersion claim (b), the paper's attention-vs-FFN comparison: planted outcomes (issue 26)."""

from __future__ import annotations

from llm_methods.dispersion.experiment import judge_sublayers


def test_sublayer_claim_holds_fails_and_is_inconclusive() -> None:
    # attention disperses more and gives the better keys: held
    assert judge_sublayers(0.56, 0.42, 20.0, 22.0, lm_ppl=30.0).verdict == "held"
    # attention disperses more but FFN keys are better by 4 %: not held (our first full run)
    claim = judge_sublayers(0.56, 0.42, 25.81, 24.84, lm_ppl=33.0)
    assert claim.verdict == "not held" and claim.measured["picked"] == "attn"
    # FFN disperses more and is better: held
    assert judge_sublayers(0.30, 0.42, 25.81, 24.84, lm_ppl=33.0).verdict == "held"
    # kNN-LM helps with neither key: the keys cannot be compared
    assert judge_sublayers(0.56, 0.42, 40.0, 41.0, lm_ppl=33.0).verdict == "inconclusive"
