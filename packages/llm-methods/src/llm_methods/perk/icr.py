"""FT-ICR baseline: fine-tune the model to answer with the whole context in the prompt.

Prompt (``format_icr``): the segments as ``doc_{i}: {segment}`` lines, then the question in the
same template as PERK's outer loss, so both methods share the target
``<support>{s}</support>\\n<output>{a}</output>``:

    doc_0: ...\\ndoc_1: ...\\n...\\nYou have memorized {N} documents.\\n{q}\\nAnswer: <target>

The loss is the mean cross-entropy of the target tokens (+ EOS). The model is adapted with peft
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
from llm_methods.perk.model import QA_TEMPLATE, TARGET_TEMPLATE

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

    def __init__(self, model: Any, tokenizer: Any, r: int = 8, alpha: int = 16,
                 target_modules: Sequence[str] = ("q_proj", "k_proj", "v_proj", "o_proj",
                                                  "gate_proj", "up_proj", "down_proj"),
                 lora: bool = True) -> None:  # fmt: skip
        super().__init__()
        if lora:
            from peft import LoraConfig, get_peft_model

            cfg = LoraConfig(r=r, lora_alpha=alpha, target_modules=list(target_modules),
                             use_rslora=True, lora_dropout=0.0, bias="none")  # fmt: skip
            model = get_peft_model(model, cfg)
            for name, p in model.named_parameters():
                p.requires_grad_("lora_" in name)
        else:
            for p in model.parameters():
                p.requires_grad_(True)
        self.model, self.tokenizer = model, tokenizer

    @property
    def max_len(self) -> int | None:
        return getattr(self.model.config, "max_position_embeddings", None)

    def _prompt_ids(self, segments: Sequence[str], question: str, reserve: int) -> list[int]:
        ids = self.tokenizer(format_icr(segments, question), add_special_tokens=False).input_ids
        if self.max_len is not None and len(ids) + reserve > self.max_len:
            raise LMError(f"the context is {len(ids)} tokens (+{reserve} for the answer); the "
                          f"model allows {self.max_len} without segmentation (FT-ICR puts the "
                          "whole context in the prompt): use PERK or shorter contexts")  # fmt: skip
        return ids

    def loss(self, segments: Sequence[str], question: str, answer: str,
             support: Sequence[str] = ()) -> torch.Tensor:  # fmt: skip
        """Mean CE of the target tokens given the context + question prompt."""
        tok = self.tokenizer
        target = TARGET_TEMPLATE.format(s=" ".join(support), a=answer) + (tok.eos_token or "")
        t_ids = tok(target, add_special_tokens=False).input_ids
        p_ids = self._prompt_ids(segments, question, len(t_ids))
        dev = next(self.model.parameters()).device
        ids = torch.tensor([p_ids + t_ids], device=dev)
        logits = self.model(input_ids=ids).logits[0, len(p_ids) - 1 : -1].float()
        return nn.functional.cross_entropy(logits, ids[0, len(p_ids) :])

    @torch.no_grad()
    def answer(self, segments: Sequence[str], question: str, max_new_tokens: int = 24) -> str:
        """Greedy continuation (KV-cached) of the context + question prompt."""
        p_ids = self._prompt_ids(segments, question, max_new_tokens)
        dev = next(self.model.parameters()).device
        ids = torch.tensor([p_ids], device=dev)
        out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                  max_new_tokens=max_new_tokens, do_sample=False,
                                  pad_token_id=self.tokenizer.pad_token_id,
                                  eos_token_id=self.tokenizer.eos_token_id)  # fmt: skip
        return self.tokenizer.decode(out[0, len(p_ids) :], skip_special_tokens=True)
