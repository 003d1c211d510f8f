"""Text for distillation and perplexity: a ``.txt`` file (plain text) or ``.jsonl`` (one
``{"text": ...}`` object per line), or the offline pydoc corpus (``llm_methods.corpora``),
tokenised with the model's tokenizer and cut into fixed-length chunks, plus a Lightning data
module over those chunks for ``llm-methods mbok finetune``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from iclr26_common.textio import input_file
from llm_methods.jsonl import read_text
from llm_methods.lm.errors import LMError

__all__ = ["batches_of", "pydoc_split", "read_texts", "token_chunks"]


def read_texts(path: str | Path) -> list[str]:
    """Texts of a ``.txt`` file (one text) or a ``.jsonl`` file (field ``text`` per line);
    errors (:class:`LMError`) name the file, the line and the field: ``PATH: no such text file``,
    ``PATH: is a folder; give a text file``."""
    path = input_file(path, "text file", error=LMError)  # missing, or a folder: one line
    raw = read_text(path)
    if path.suffix == ".jsonl":
        texts = []
        for i, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise LMError(f"{path}:{i}: not valid JSON ({error.msg})") from error
            if not isinstance(row, dict) or not isinstance(row.get("text"), str):
                raise LMError(f"{path}:{i}: field 'text' missing or not a string")
            texts.append(row["text"])
    else:
        texts = [raw]
    if not any(t.strip() for t in texts):
        raise LMError(f"{path}: no text")
    return texts


def pydoc_split(seed: int = 0) -> tuple[list[str], list[str]]:
    """(train, test) texts: the pydoc topics split by topic name (``corpora.split_names``)."""
    from llm_methods.corpora import pydoc_topics, split_names

    topics = pydoc_topics()
    train, test = split_names(list(topics), test_fraction=0.2, seed=seed)
    return [topics[n] for n in train], [topics[n] for n in test]


def token_chunks(
    tokenizer: Any,
    texts: Sequence[str],
    length: int,
    max_chunks: int | None = None,
    seed: int | None = 0,
    source: str = "text",
) -> list[list[int]]:
    """Concatenate the tokenised texts (EOS between them) and cut ``length``-token chunks; raises
    :class:`LMError` when ``source`` is too short for one chunk."""
    from llm_methods.corpora import chunk_ids

    ids: list[int] = []
    eos = tokenizer.eos_token_id
    for text in texts:
        ids += tokenizer(text, add_special_tokens=False).input_ids
        if eos is not None:
            ids.append(eos)
    chunks = chunk_ids(ids, length, max_chunks=max_chunks, seed=seed)
    if not chunks:
        raise LMError(f"{source}: {len(ids)} tokens, fewer than one chunk of {length}")
    return chunks


def batches_of(
    chunks: Sequence[Sequence[int]], batch_size: int, device: torch.device | str = "cpu"
) -> list[dict[str, torch.Tensor]]:
    """Equal-length chunks -> model batches ``{"input_ids", "attention_mask"}`` ``[B, T]``."""
    out = []
    for i in range(0, len(chunks), batch_size):
        ids = torch.tensor(chunks[i : i + batch_size], dtype=torch.long, device=device)
        out.append({"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    return out
