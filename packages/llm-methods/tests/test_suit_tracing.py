from __future__ import annotations

import math

import pytest

from llm_methods.lm import LMError
from llm_methods.suit.tracing import causal_trace, choose_rome_layer, subject_span


def test_subject_span_covers_the_subject(tiny) -> None:  # type: ignore[no-untyped-def]
    ids, first, last = subject_span(tiny, "The capital of {} is", "France")
    text = tiny.tokenizer.decode(ids[first : last + 1]).strip()
    assert text == "France"
    ids, first, last = subject_span(tiny, "{} is a tuple", "A list")
    assert tiny.tokenizer.decode(ids[first : last + 1]).strip() == "A list"


def test_trace_shapes_and_null_noise(tiny) -> None:  # type: ignore[no-untyped-def]
    prompts, subjects = ["The capital of {} is", "{} is a tuple"], ["France", "A list"]
    result = causal_trace(tiny, prompts, subjects, samples=2, window=1)
    assert len(result.aie) == tiny.n_layers and result.n_facts == 2
    assert 0.0 < result.p_clean <= 1.0 and 0.0 <= result.p_corrupted <= 1.0
    # with (almost) no noise, corruption changes nothing and no restoration has an effect
    quiet = causal_trace(tiny, prompts, subjects, samples=2, window=1, noise_scale=1e-9)
    assert quiet.p_corrupted == pytest.approx(quiet.p_clean, abs=1e-5)
    assert all(abs(a) < 1e-5 for a in quiet.aie)
    # restoring every FFN at the last subject token from the clean run can only be measured,
    # not assumed; a restricted trace leaves the other layers as nan
    part = causal_trace(tiny, prompts, subjects, samples=2, window=1, layers=[0])
    assert not math.isnan(part.aie[0]) and math.isnan(part.aie[1])
    assert choose_rome_layer(part, tiny.n_layers) == 0


def test_trace_bad_input(tiny) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(LMError, match="at least one"):
        causal_trace(tiny, [], [])
    with pytest.raises(LMError, match="window"):
        causal_trace(tiny, ["{} is"], ["A list"], window=99)
    with pytest.raises(LMError, match=r"not a token span|exactly one"):
        causal_trace(tiny, ["no subject here"], ["A list"])
