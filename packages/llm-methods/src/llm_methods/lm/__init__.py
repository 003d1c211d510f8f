"""The shared LM core: loading, tokenisation, scoring, generation, hooks, logit lens, LoRA.

The names below are exported here and imported on first use (``import llm_methods.lm`` is
cheap; ``from llm_methods.lm import load_lm`` imports torch + transformers, :func:`add_lora`
peft). See ``README.md`` next to this file for the API summary.
"""

from iclr26_common.exports import lazy_exports

#: Public name -> the submodule that defines it (imported on first access, so importing this
#: package does not import torch).
_EXPORTS = {
    "add_lora": "llm_methods.lm.adapters",
    "count_parameters": "llm_methods.lm.adapters",
    "train_only_layers": "llm_methods.lm.adapters",
    "LMError": "llm_methods.lm.errors",
    "chat_prompt": "llm_methods.lm.generation",
    "generate": "llm_methods.lm.generation",
    "add_to_residual": "llm_methods.lm.hooks",
    "capture_residual": "llm_methods.lm.hooks",
    "capture_sublayers": "llm_methods.lm.hooks",
    "forward_residual": "llm_methods.lm.hooks",
    "replace_residual": "llm_methods.lm.hooks",
    "reuse_prefix": "llm_methods.lm.hooks",
    "logit_lens": "llm_methods.lm.lens",
    "top_tokens": "llm_methods.lm.lens",
    "LM": "llm_methods.lm.loading",
    "find_modules": "llm_methods.lm.loading",
    "load_lm": "llm_methods.lm.loading",
    "resolve_device": "llm_methods.lm.loading",
    "resolve_dtype": "llm_methods.lm.loading",
    "wrap": "llm_methods.lm.loading",
    "Batch": "llm_methods.lm.scoring",
    "collate": "llm_methods.lm.scoring",
    "continuation_logprobs": "llm_methods.lm.scoring",
    "encode_texts": "llm_methods.lm.scoring",
    "final_hidden": "llm_methods.lm.scoring",
    "forward_hidden": "llm_methods.lm.scoring",
    "head_logits": "llm_methods.lm.scoring",
    "last_token_logits": "llm_methods.lm.scoring",
    "option_logprobs": "llm_methods.lm.scoring",
    "perplexity": "llm_methods.lm.scoring",
    "target_logprobs": "llm_methods.lm.scoring",
    "token_logprobs": "llm_methods.lm.scoring",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [*_EXPORTS]
