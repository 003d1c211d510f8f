"""The one default test on the real offline SmolLM2 (cached conversion: a load takes seconds)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("gguf")


# ``smollm2``: the session fixture of conftest.py (one load, shared with test_linguamap.py)


def test_smollm2_scores_logit_lens_and_hooks(smollm2) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.lm import capture_residual, continuation_logprobs, encode_texts, logit_lens

    lm = smollm2
    assert (
        lm.n_layers == 30
        and lm.hidden_size == 576
        and type(lm.model).__name__ == "LlamaForCausalLM"
    )
    good, bad = continuation_logprobs(
        lm, ["The capital of France is", "The capital of France is"], [" Paris.", " Madrid."]
    )
    assert good > bad  # the real model knows this
    ids = torch.tensor(encode_texts(lm, ["The capital of France is Paris."]))
    with torch.no_grad(), capture_residual(lm, [-1]) as store:
        logits = lm.model(input_ids=ids).logits
        lens = logit_lens(lm, store[29])
    torch.testing.assert_close(lens, logits, rtol=1e-4, atol=1e-3)


@pytest.mark.slow
def test_smollm2_chat_answer(smollm2) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.lm import chat_prompt, generate

    (answer,) = generate(
        smollm2, [chat_prompt(smollm2, "What is the capital of France?")], max_new_tokens=12
    )
    assert "Paris" in answer
