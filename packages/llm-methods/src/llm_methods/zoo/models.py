"""Tiny Llama-config causal LMs (transformers ``LlamaForCausalLM``), importable without Lightning."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from llm_methods.lm.loading import LM

__all__ = ["tiny_llama", "tiny_lm"]


def tiny_llama(
    vocab_size: int,
    n_layers: int = 2,
    hidden: int = 64,
    heads: int = 4,
    intermediate: int | None = None,
    max_len: int = 256,
    seed: int = 0,
    tie_embeddings: bool = True,
):  # -> LlamaForCausalLM
    """A randomly initialised (seeded) Llama: RMSNorm, RoPE, SwiGLU, ``n_layers`` x ``hidden``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=intermediate or 4 * hidden,
        num_hidden_layers=n_layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_len,
        tie_word_embeddings=tie_embeddings,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=1,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.eval()


def tiny_lm(texts: Sequence[str], vocab_size: int = 300, seed: int = 0, **kwargs) -> LM:
    """An untrained tiny Llama with a BPE tokenizer trained on ``texts`` (for tests and demos)."""
    from llm_methods.lm.loading import wrap
    from llm_methods.zoo.tokenizer import train_bpe

    tokenizer = train_bpe(texts, vocab_size)
    model = tiny_llama(len(tokenizer), seed=seed, **kwargs)
    return wrap(tokenizer, model, name="tiny")
