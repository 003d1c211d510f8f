"""The core on other families: tiny GPT-2 and Qwen2 configs built in the test."""

from __future__ import annotations

import pytest
import torch

from llm_methods.lm import (
    add_lora,
    add_to_residual,
    capture_residual,
    continuation_logprobs,
    logit_lens,
    wrap,
)


def _gpt2(vocab: int):  # type: ignore[no-untyped-def]
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(
        GPT2Config(vocab_size=vocab, n_positions=64, n_embd=32, n_layer=2, n_head=2)
    )


def _qwen2(vocab: int):  # type: ignore[no-untyped-def]
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=vocab,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=64,
        )
    )


@pytest.mark.parametrize("build", [_gpt2, _qwen2], ids=["gpt2", "qwen2"])
def test_family(build, tiny) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    lm = wrap(tiny.tokenizer, build(len(tiny.tokenizer)).eval())
    assert lm.n_layers == 2 and lm.hidden_size == 32
    ids = torch.tensor([tiny.tokenizer("The quick brown fox").input_ids])
    with torch.no_grad(), capture_residual(lm, [-1]) as store:
        logits = lm.model(input_ids=ids).logits
        torch.testing.assert_close(logit_lens(lm, store[1]), logits, rtol=0, atol=1e-5)
    vec = torch.randn(32)
    with torch.no_grad():
        with capture_residual(lm, [0]) as clean:
            lm.model(input_ids=ids)
        clean = dict(clean)
        with add_to_residual(lm, 0, vec), capture_residual(lm, [0]) as steered:
            lm.model(input_ids=ids)
    torch.testing.assert_close(steered[0] - clean[0], vec.expand_as(clean[0]))
    assert continuation_logprobs(lm, ["The quick"], [" brown fox"]).shape == (1,)
    assert lm.sublayer(1, "attn") is not None and lm.sublayer(1, "ffn") is not None
    lora = add_lora(lm, r=2)
    assert 0 < lora.n_parameters(trainable_only=True) < lora.n_parameters() / 5
