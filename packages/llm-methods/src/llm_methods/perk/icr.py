"""FT-ICR baseline: fine-tune the model to answer with the whole context in the prompt.

Prompt (``format_icr``): the segments as ``doc_{i}: {segment}`` lines, then the question in the
same template as PERK's outer loss, so both methods share the response
``<support>{s}</support>\\n<output>{a}</output>`` (supporting facts joined by newlines):

    doc_0: ...\\ndoc_1: ...\\n...\\nYou have memorized {N} documents.\\n{q}\\nAnswer: <response>

The text is tokenised whole with the prompt masked (as PERK's outer loss); the loss is the mean
cross-entropy of the response tokens (+ EOS). The model is adapted with peft
rsLoRA of the same rank and modules as PERK (``lora=True``, default) or fully (``lora=False``).
A prompt longer than the model's ``max_position_embeddings`` is an error: FT-ICR has no
segmentation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from llm_methods.lm.errors import LMError
from llm_methods.perk.model import (
    LORA_DROPOUT,
    LORA_TARGETS,
    QA_TEMPLATE,
    encode_prompt_response,
    format_qa,
    rslora,
)

__all__ = ["ICR", "format_icr"]


def format_icr(segments: Sequence[str], question: str) -> str:
    """The FT-ICR prompt: every segment in the prompt, then the question."""
    if not segments:
        raise LMError("context has no segments")
    if not question.strip():
        raise LMError("question is empty")
    lines = []
    for i, seg in enumerate(segments):
        if not str(seg).strip():
            raise LMError(f"context segment {i} is empty")
        lines.append(f"doc_{i}: {seg}")
    return "\n".join(lines) + "\n" + QA_TEMPLATE.format(n=len(segments), q=question.strip())


class ICR(nn.Module):
    """A causal LM answering with the context in its prompt (optionally behind rsLoRA)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        r: int = 8,
        alpha: int = 16,
        target_modules: Sequence[str] = LORA_TARGETS,
        lora: bool = True,
        lora_dropout: float = LORA_DROPOUT,
    ) -> None:
        super().__init__()
        if lora:
            model = rslora(model, r, alpha, target_modules, lora_dropout)
        else:
            for p in model.parameters():
                p.requires_grad_(True)
        self.model, self.tokenizer = model, tokenizer

    @property
    def max_len(self) -> int | None:
        return getattr(self.model.config, "max_position_embeddings", None)

    def _check(self, n_tokens: int, reserve: int) -> None:
        if self.max_len is not None and n_tokens + reserve > self.max_len:
            raise LMError(
                f"the context is {n_tokens} tokens (+{reserve} for the answer); the "
                f"model allows {self.max_len} without segmentation (FT-ICR puts the "
                "whole context in the prompt): use PERK or shorter contexts"
            )

    def loss(
        self, segments: Sequence[str], question: str, answer: str, support: Sequence[str] = ()
    ) -> torch.Tensor:
        """Mean CE of the response tokens (+ EOS) given the context + question prompt."""
        tok = self.tokenizer
        prompt = format_icr(segments, question)
        _, response = format_qa(len(segments), question, answer, support)
        ids, n_prompt = encode_prompt_response(
            tok, prompt, f"{prompt} {response}{tok.eos_token or ''}"
        )
        self._check(len(ids), 0)
        dev = next(self.model.parameters()).device
        x = torch.tensor([ids], device=dev)
        logits = self.model(input_ids=x).logits[0, n_prompt - 1 : -1].float()
        return nn.functional.cross_entropy(logits, x[0, n_prompt:])

    @torch.no_grad()
    def answer(self, segments: Sequence[str], question: str, max_new_tokens: int = 24) -> str:
        """Greedy continuation (KV-cached) of the context + question prompt."""
        p_ids = self.tokenizer(format_icr(segments, question), add_special_tokens=False).input_ids
        self._check(len(p_ids), max_new_tokens)
        dev = next(self.model.parameters()).device
        ids = torch.tensor([p_ids], device=dev)
        out = self.model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.tokenizer.eos_token_id,
        )
        return self.tokenizer.decode(out[0, len(p_ids) :], skip_special_tokens=True)
