"""Selective fine-tuning (LinguaMap Sec. 5): train only the last k decoder layers of a causal LM
on language-consistent examples, the loss masked to the answer tokens.

k comes from the logit-lens diagnosis (:func:`~llm_methods.linguamap.analysis.decision_layer`:
``k = n_layers - decision layer``) or is given. Used by the experiment and by
``llm-methods linguamap finetune``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_methods.lm.errors import LMError

__all__ = [
    "FinetuneResult",
    "answer_masked_rows",
    "last_layers",
    "read_pairs",
    "selective_finetune",
]


def last_layers(n_layers: int, k: int) -> list[int]:
    """The indices of the last ``k`` of ``n_layers`` decoder layers (``1 <= k <= n_layers``)."""
    if not 1 <= k <= n_layers:
        raise LMError(f"k = {k}: the model has {n_layers} layers (need 1 <= k <= {n_layers})")
    return list(range(n_layers - k, n_layers))


def answer_masked_rows(
    tokenizer: Any, pairs: Sequence[tuple[str, str]], length: int
) -> tuple[list[list[int]], list[list[int]], int]:
    """One ``(prompt, answer)`` pair per row, tokenised without special tokens, cut or
    right-padded to ``length`` tokens; the loss mask is 1 on the answer's tokens only (the
    paper's loss on the answer span, not the prompt). Returns ``(rows, masks, n_cut)``:
    ``[N, length]`` token ids and 0/1 masks, and how many rows lost answer tokens to the cut."""
    pad = tokenizer.pad_token_id
    rows, masks, cut = [], [], 0
    for prompt, answer in pairs:
        head = tokenizer(prompt, add_special_tokens=False).input_ids
        tail = tokenizer(answer, add_special_tokens=False).input_ids
        ids = (head + tail)[:length]
        mask = ([0] * len(head) + [1] * len(tail))[:length]
        cut += len(head) + len(tail) > length
        rows.append(ids + [pad] * (length - len(ids)))
        masks.append(mask + [0] * (length - len(mask)))
    return rows, masks, cut


def read_pairs(
    path: str | Path, prompt_field: str = "prompt", answer_field: str = "answer"
) -> list[tuple[str, str]]:
    """``(prompt, answer)`` from each record of a ``.jsonl`` file (``{"prompt": ..., "answer":
    ...}``; the answer is what the loss is on, e.g. reasoning and answer in the expected
    language). Bad input: ``LMError`` naming the file and line (``FILE:LINE: field 'answer' is
    empty or not a string``)."""
    from llm_methods.jsonl import read_jsonl

    pairs = []
    for where, record in read_jsonl(path, (prompt_field, answer_field), what="examples"):
        texts = record[prompt_field], record[answer_field]
        for name, text in zip((prompt_field, answer_field), texts, strict=True):
            if not isinstance(text, str):
                raise LMError(f"{where}: field {name!r} is not a string")
        if not texts[1].strip():
            raise LMError(f"{where}: field {answer_field!r} is empty")
        pairs.append(texts)
    return pairs


@dataclass
class FinetuneResult:
    layers: list[int]  # the trained decoder layers
    trainable: int  # parameters trained
    total: int  # parameters of the model (tied weights once)
    losses: list[float]  # the answer-token loss of every step

    @property
    def fraction(self) -> float:
        return self.trainable / self.total


def selective_finetune(
    lm: Any,
    rows: Sequence[Sequence[int]],
    masks: Sequence[Sequence[int]],
    layers: Sequence[int],
    *,
    steps: int,
    lr: float,
    batch_size: int = 16,
    seed: int = 0,
    warmup: int = 5,
    quiet: bool = True,
) -> FinetuneResult:
    """Freeze ``lm`` except decoder ``layers`` (:func:`llm_methods.lm.train_only_layers`) and
    train them in place for ``steps`` AdamW steps on ``rows`` (``[N, T]`` token ids) with the
    loss on the tokens where ``masks`` is 1 (:func:`llm_methods.lm.train.train_lm`; cosine decay
    after ``warmup`` steps). ``quiet=False``: progress lines on stderr."""
    from llm_methods.lm import train_only_layers
    from llm_methods.lm.train import train_lm

    trainable, total = train_only_layers(lm, list(layers))
    log = train_lm(
        lm.model,
        rows,
        steps,
        batch_size,
        lr,
        seed=seed,
        warmup=warmup,
        loss_mask=masks,
        quiet=quiet,
    )
    index = sorted({lm.layer_index(i) for i in layers})
    return FinetuneResult(index, trainable, total, log.losses)
