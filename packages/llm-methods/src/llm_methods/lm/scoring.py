"""Batched tokenisation with padding masks, continuation log-prob scoring, perplexity, hidden states.

Batches are right-padded (positions of real tokens are unaffected) with an attention mask; every
reduction ignores padding. Log-probs are natural-log, ``float32`` whatever the model dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from llm_methods.lm.errors import LMError
from llm_methods.lm.loading import LM, cache_kwargs

__all__ = [
    "Batch",
    "collate",
    "continuation_logprobs",
    "encode_texts",
    "final_hidden",
    "forward_hidden",
    "head_logits",
    "last_token_logits",
    "option_logprobs",
    "perplexity",
    "target_logprobs",
    "token_logprobs",
]

#: float32 elements of one log-softmax block (64 MiB): log-probs are computed over blocks of
#: positions, never over a whole ``[B, T, V]`` tensor (8 x 2048 x 151k would be ~10 GB).
LOGSOFTMAX_BLOCK = 1 << 24


@dataclass
class Batch:
    """``input_ids``/``attention_mask`` ``[B, T]`` (right-padded) and per-row ``lengths``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    lengths: torch.Tensor


def _check_texts(texts: Sequence[str], what: str = "text") -> list[str]:
    if isinstance(texts, str):
        raise LMError(f"expected a list of {what}s, got one string")
    out = list(texts)
    if not out:
        raise LMError(f"no {what}s given")
    for i, text in enumerate(out):
        if not isinstance(text, str) or not text.strip():
            raise LMError(f"{what} {i} is empty")
    return out


def _bos(lm: LM) -> list[int]:
    bos = lm.tokenizer.bos_token_id
    return [] if bos is None else [int(bos)]


def encode_texts(lm: LM, texts: Sequence[str], prepend_bos: bool = True) -> list[list[int]]:
    """Token ids per text (no special tokens; BOS prepended when the tokenizer has one and
    ``prepend_bos``, so the first real token is scored too)."""
    texts = _check_texts(texts)
    prefix = _bos(lm) if prepend_bos else []
    return [prefix + list(lm.tokenizer(t, add_special_tokens=False).input_ids) for t in texts]


def collate(ids: Sequence[Sequence[int]], pad_id: int, device: torch.device | None = None) -> Batch:
    """Right-pad token id lists into a :class:`Batch`."""
    if not ids or any(len(row) == 0 for row in ids):
        raise LMError("cannot collate an empty token sequence")
    width = max(len(row) for row in ids)
    input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for r, row in enumerate(ids):
        input_ids[r, : len(row)] = torch.as_tensor(list(row), dtype=torch.long)
        mask[r, : len(row)] = 1
    lengths = mask.sum(1)
    if device is not None:
        input_ids, mask = input_ids.to(device), mask.to(device)
    return Batch(input_ids, mask, lengths)


def head_logits(lm: LM, hidden: torch.Tensor) -> torch.Tensor:
    """The model's output logits of final hidden states ``[..., d] -> [..., V]``: the
    unembedding, then the logit scale (Cohere) or soft-capping (Gemma 2) its config declares."""
    logits = lm.unembed(hidden)
    config = getattr(lm.model, "config", None)
    scale = getattr(config, "logit_scale", None)
    if isinstance(scale, (int, float)) and scale != 1:
        logits = logits * scale
    cap = getattr(config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def target_logprobs(lm: LM, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` log p(targets[:, t] | hidden[:, t]) for final hidden states ``[B, T, d]``
    (after the final norm), float32. The log-softmax runs over blocks of positions of at most
    :data:`LOGSOFTMAX_BLOCK` elements, so memory is O(block) instead of O(B T V)."""
    B, T = targets.shape
    vocab = int(lm.unembed.weight.shape[0]) if hasattr(lm.unembed, "weight") else 1
    step = max(1, LOGSOFTMAX_BLOCK // max(1, B * vocab))
    out = []
    for t in range(0, T, step):
        logp = head_logits(lm, hidden[:, t : t + step]).float().log_softmax(-1)
        out.append(logp.gather(-1, targets[:, t : t + step, None]).squeeze(-1))
        del logp
    return torch.cat(out, 1) if out else hidden.new_zeros((B, 0), dtype=torch.float32)


def final_hidden(lm: LM, batch: Batch) -> torch.Tensor:
    """``[B, T, d]`` final hidden states (after the final norm) of a batch, from the decoder
    alone: the ``[B, T, V]`` logits are never materialised."""
    decoder = lm.model.get_decoder()
    return decoder(
        input_ids=batch.input_ids.to(lm.device), attention_mask=batch.attention_mask.to(lm.device)
    ).last_hidden_state


@torch.no_grad()
def token_logprobs(lm: LM, ids: Sequence[Sequence[int]], batch_size: int = 8) -> list[torch.Tensor]:
    """Per-token log-probs of each id sequence: ``len(row) - 1`` values (token 1.. given prefix).

    Memory: the decoder's hidden states plus one log-softmax block (:func:`target_logprobs`)."""
    out: list[torch.Tensor] = []
    for start in range(0, len(ids), batch_size):
        rows = ids[start : start + batch_size]
        if any(len(row) < 2 for row in rows):
            raise LMError("a sequence needs at least 2 tokens to be scored")
        batch = collate(rows, lm.tokenizer.pad_token_id, lm.device)
        hidden = final_hidden(lm, batch)
        lp = target_logprobs(lm, hidden[:, :-1], batch.input_ids[:, 1:]).cpu()
        out += [lp[r, : int(n) - 1] for r, n in enumerate(batch.lengths)]
    return out


def continuation_logprobs(
    lm: LM,
    prompts: Sequence[str],
    continuations: Sequence[str],
    batch_size: int = 8,
    reduce: str = "sum",
) -> torch.Tensor:
    """log p(continuation | prompt) for each pair, ``[N]`` (``reduce="sum"`` or ``"mean"`` per
    continuation token).

    The prompt is encoded with BOS (when the tokenizer has one), the continuation without special
    tokens, and the two id lists are concatenated, so the continuation's tokens are exactly its
    own tokenisation. An empty prompt is allowed when the tokenizer has a BOS token.
    """
    conts = _check_texts(continuations, "continuation")
    prompts = list(prompts)
    if len(prompts) != len(conts):
        raise LMError(f"{len(prompts)} prompts but {len(conts)} continuations")
    if reduce not in ("sum", "mean"):
        raise LMError(f"reduce must be 'sum' or 'mean', got {reduce!r}")
    rows, starts = [], []
    for i, (prompt, cont) in enumerate(zip(prompts, conts, strict=True)):
        head = _bos(lm) + list(lm.tokenizer(prompt, add_special_tokens=False).input_ids)
        if not head:
            raise LMError(f"prompt {i} is empty and the tokenizer has no BOS token")
        tail = list(lm.tokenizer(cont, add_special_tokens=False).input_ids)
        rows.append(head + tail)
        starts.append(len(head))
    scores = token_logprobs(lm, rows, batch_size)
    out = []
    for lp, start in zip(scores, starts, strict=True):
        part = lp[start - 1 :]
        out.append(part.sum() if reduce == "sum" else part.mean())
    return torch.stack(out)


def perplexity(lm: LM, ids: Sequence[Sequence[int]], batch_size: int = 8) -> torch.Tensor:
    """exp(mean token NLL) of each id sequence, ``[N]``."""
    return torch.stack([torch.exp(-lp.mean()) for lp in token_logprobs(lm, ids, batch_size)])


def forward_hidden(lm: LM, batch: Batch) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """One forward with ``output_hidden_states``: (logits ``[B, T, V]``, HF hidden states: entry
    0 the embeddings, entry ``i`` after layer ``i``, the last one after the final norm)."""
    out = lm.model(
        input_ids=batch.input_ids.to(lm.device),
        attention_mask=batch.attention_mask.to(lm.device),
        output_hidden_states=True,
    )
    return out.logits, tuple(out.hidden_states)


@torch.no_grad()
def last_token_logits(lm: LM, ids: Sequence[Sequence[int]], batch_size: int = 16) -> torch.Tensor:
    """``[N, V]`` next-token logits after each id sequence (float32). The decoder runs on
    right-padded batches and only each row's last hidden state goes through the unembedding,
    instead of materialising ``[B, T, V]`` logits."""
    out: list[torch.Tensor] = []
    for start in range(0, len(ids), batch_size):
        batch = collate(ids[start : start + batch_size], lm.tokenizer.pad_token_id, lm.device)
        hidden = final_hidden(lm, batch)
        last = hidden[
            torch.arange(hidden.shape[0], device=hidden.device), batch.lengths.to(hidden.device) - 1
        ]
        out.append(head_logits(lm, last).float())
    return torch.cat(out)


def option_logprobs(lm: LM, prompt: str, options: Sequence[tuple[str, str]]) -> list[float]:
    """Mean token log-prob of each option ``(lead, scored)`` after ``prompt + lead``; only the
    ``scored`` tokens count. One forward of the prompt, then each ``lead + scored`` on its KV
    cache, cropped back to the prompt after each, so N options cost one prompt forward plus N
    short ones. Equals ``continuation_logprobs(lm, [prompt + lead], [scored], reduce="mean")``
    (to float tolerance). Used for multiple-choice judging and answer-option likelihoods
    (yes/no, A/B/C): ``softmax`` over the returned values normalises over the options."""
    tok = lm.tokenizer
    head = _bos(lm) + list(tok(prompt, add_special_tokens=False).input_ids)
    if len(head) == 0:
        raise LMError("option_logprobs: empty prompt and no BOS token")
    scores = []
    with torch.no_grad():
        first = lm.model(input_ids=torch.tensor([head], device=lm.device), use_cache=True)
        cache = getattr(first, "cache", None) or first.past_key_values
        last = first.logits[0, -1:].float().log_softmax(-1)
        for lead, scored in options:
            lead_ids = list(tok(lead, add_special_tokens=False).input_ids) if lead else []
            scored_ids = list(tok(scored, add_special_tokens=False).input_ids)
            if not scored_ids:
                raise LMError(f"option_logprobs: option {scored!r} has no tokens")
            ids = lead_ids + scored_ids
            logp = last
            if len(ids) > 1:
                step = lm.model(
                    input_ids=torch.tensor([ids[:-1]], device=lm.device),
                    use_cache=True,
                    **cache_kwargs(lm.model, cache),
                )
                logp = torch.cat([last, step.logits[0].float().log_softmax(-1)])
                cache.crop(-(len(ids) - 1))  # back to the prompt (negative: tokens to drop)
            picked = [float(logp[j, ids[j]]) for j in range(len(lead_ids), len(ids))]
            scores.append(sum(picked) / len(picked))
    return scores
