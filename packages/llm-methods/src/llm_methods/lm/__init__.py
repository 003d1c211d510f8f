"""The shared LM core: loading, tokenisation, scoring, generation, hooks, logit lens, LoRA.

Import the submodules directly (``from llm_methods.lm import load_lm`` works too); everything
here needs torch + transformers, peft only for :func:`add_lora`. See ``README.md`` next to this
file for the API summary.
"""

from llm_methods.lm.adapters import add_lora, count_parameters, train_only_layers
from llm_methods.lm.errors import LMError
from llm_methods.lm.generation import chat_prompt, generate
from llm_methods.lm.hooks import (
    add_to_residual,
    capture_residual,
    capture_sublayers,
    replace_residual,
)
from llm_methods.lm.lens import logit_lens, top_tokens
from llm_methods.lm.loading import LM, find_modules, load_lm, resolve_device, resolve_dtype, wrap
from llm_methods.lm.scoring import (
    Batch,
    collate,
    continuation_logprobs,
    encode_texts,
    final_hidden,
    forward_hidden,
    head_logits,
    last_token_logits,
    option_logprobs,
    perplexity,
    target_logprobs,
    token_logprobs,
)

__all__ = [
    "LM",
    "Batch",
    "LMError",
    "add_lora",
    "add_to_residual",
    "capture_residual",
    "capture_sublayers",
    "chat_prompt",
    "collate",
    "continuation_logprobs",
    "count_parameters",
    "encode_texts",
    "final_hidden",
    "find_modules",
    "forward_hidden",
    "generate",
    "head_logits",
    "last_token_logits",
    "load_lm",
    "logit_lens",
    "option_logprobs",
    "perplexity",
    "replace_residual",
    "resolve_device",
    "resolve_dtype",
    "target_logprobs",
    "token_logprobs",
    "top_tokens",
    "train_only_layers",
    "wrap",
]
