"""Chat templates and batched generation (left-padded, greedy by default)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from llm_methods.lm.errors import LMError
from llm_methods.lm.loading import LM

__all__ = ["chat_prompt", "generate"]

FALLBACK_TEMPLATE = "{system}User: {user}\nAssistant:"


def chat_prompt(lm: LM, user: str, system: str | None = None) -> str:
    """The prompt string for one user turn, ending where the assistant's answer starts.

    Uses the tokenizer's chat template when it has one, else ``FALLBACK_TEMPLATE``.
    """
    if not user.strip():
        raise LMError("chat message is empty")
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": user}
    ]
    if getattr(lm.tokenizer, "chat_template", None):
        return lm.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
    return FALLBACK_TEMPLATE.format(system=f"{system}\n" if system else "", user=user)


@torch.no_grad()
def generate(
    lm: LM,
    prompts: Sequence[str],
    max_new_tokens: int = 32,
    do_sample: bool = False,
    temperature: float = 1.0,
    seed: int | None = None,
    batch_size: int = 8,
) -> list[str]:
    """Continue each prompt (already chat-formatted if wanted); returns the new text only."""
    if isinstance(prompts, str):
        raise LMError("expected a list of prompts, got one string")
    if any(not p for p in prompts):
        raise LMError("a prompt is empty")
    if seed is not None:
        torch.manual_seed(seed)
    tok = lm.tokenizer
    side = tok.padding_side
    tok.padding_side = "left"
    out: list[str] = []
    try:
        for start in range(0, len(prompts), batch_size):
            chunk = list(prompts[start : start + batch_size])
            enc = tok(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
            enc = {k: v.to(lm.device) for k, v in enc.items()}
            kwargs = {
                "do_sample": do_sample,
                "max_new_tokens": max_new_tokens,
                "pad_token_id": tok.pad_token_id,
            }
            if do_sample:
                kwargs["temperature"] = temperature
            else:
                kwargs.update(temperature=None, top_p=None, top_k=None)
            ids = lm.model.generate(**enc, **kwargs)
            new = ids[:, enc["input_ids"].shape[1] :]
            out += tok.batch_decode(new, skip_special_tokens=True)
    finally:
        tok.padding_side = side
    return out
