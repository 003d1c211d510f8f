"""Logit lens: read a residual-stream state through the final norm and the unembedding."""

from __future__ import annotations

import torch

from llm_methods.lm.loading import LM

__all__ = ["logit_lens", "top_tokens"]


def logit_lens(lm: LM, hidden: torch.Tensor, apply_norm: bool = True) -> torch.Tensor:
    """``unembed(final_norm(hidden))``: ``[..., d] -> [..., V]``.

    Applied to the residual stream after the last layer this equals the model's own logits.
    ``apply_norm=False`` skips the norm (for difference vectors whose scale is meaningful).
    """
    hidden = hidden.to(device=lm.device, dtype=lm.dtype)
    if apply_norm:
        hidden = lm.final_norm(hidden)
    return lm.unembed(hidden)


def top_tokens(lm: LM, hidden: torch.Tensor, k: int = 10, apply_norm: bool = True) -> list[str]:
    """The ``k`` decoded tokens with the highest logit-lens score for one ``[d]`` vector."""
    logits = logit_lens(lm, hidden.reshape(-1), apply_norm=apply_norm)
    ids = torch.topk(logits.float(), k).indices.tolist()
    return [lm.tokenizer.decode([i]) for i in ids]
