"""Per-token KL model diffing (diffing-toolkit's ``kl`` method), beside the activation difference.

For every position t of a text, KL_t = KL(p_ft(· | x_≤t) ‖ p_base(· | x_≤t)) =
Σ_v p_ft(v) (log p_ft(v) − log p_base(v)), with both distributions at temperature T
(logits / T). Per text: the mean over its tokens; over a corpus: summary statistics and the
texts / tokens where the finetune departs most from its base (the "max activating examples").
Both models' logits are computed over blocks of positions (``lm.scoring.LOGSOFTMAX_BLOCK``), so
``[B, T, V]`` is never held twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from llm_methods.lm import LM, LMError, collate, encode_texts, final_hidden, head_logits, scoring

__all__ = ["KLResult", "kl_summary", "per_token_kl"]


def _check_pair(base: LM, ft: LM) -> None:
    if base.tokenizer.get_vocab() != ft.tokenizer.get_vocab():
        raise LMError("base and finetuned models must share a tokenizer")


@torch.no_grad()
def per_token_kl(
    base: LM,
    ft: LM,
    ids: Sequence[Sequence[int]],
    temperature: float = 1.0,
    batch_size: int = 8,
    quiet: bool = True,
) -> list[torch.Tensor]:
    """KL(p_ft ‖ p_base) at every position of each id sequence: ``[len(row)]`` float32 each
    (position t: the next-token distributions after ``row[: t + 1]``). ``quiet=False``: a
    progress line per batch on stderr (:func:`iclr26_common.progress.progress`)."""
    from iclr26_common.progress import progress

    _check_pair(base, ft)
    if temperature <= 0:
        raise LMError(f"temperature must be > 0, got {temperature}")
    if not ids or any(len(row) == 0 for row in ids):
        raise LMError("per_token_kl needs non-empty token sequences")
    out: list[torch.Tensor] = []
    starts = range(0, len(ids), batch_size)
    for start in progress(starts, description="adl kl batches", quiet=quiet):
        batch = collate(ids[start : start + batch_size], base.tokenizer.pad_token_id, base.device)
        hb = final_hidden(base, batch)
        hf = final_hidden(ft, batch)
        B, T = batch.input_ids.shape
        vocab = int(base.unembed.weight.shape[0])
        step = max(1, scoring.LOGSOFTMAX_BLOCK // max(1, B * vocab))
        parts = []
        for t in range(0, T, step):
            lb = (head_logits(base, hb[:, t : t + step]).float() / temperature).log_softmax(-1)
            lf = (head_logits(ft, hf[:, t : t + step]).float() / temperature).log_softmax(-1)
            lf = lf.to(lb.device)
            parts.append((lf.exp() * (lf - lb)).sum(-1))
        kl = torch.cat(parts, 1).cpu()
        out += [kl[r, : int(n)] for r, n in enumerate(batch.lengths)]
    return out


@dataclass
class KLResult:
    """Per-text mean KL, corpus statistics over all tokens, and the largest per-token KLs."""

    per_text_mean: list[float]
    stats: dict[str, float]
    top_texts: list[tuple[int, float]]  # (text index, mean KL), largest first
    top_tokens: list[tuple[int, int, int, float]]  # (text, position, token id, KL)


def kl_summary(
    base: LM,
    ft: LM,
    texts: Sequence[str],
    temperature: float = 1.0,
    top: int = 20,
    max_tokens: int = 1024,
    batch_size: int = 8,
    quiet: bool = True,
) -> KLResult:
    """Per-token KL on ``texts`` (BOS prepended, cut to ``max_tokens``) and its summaries:
    mean, std, median, min, max, 25/50/75th percentiles over all tokens (as the toolkit)."""
    ids = [row[:max_tokens] for row in encode_texts(ft, texts)]
    kls = per_token_kl(base, ft, ids, temperature, batch_size, quiet=quiet)
    flat = torch.cat(kls).double().numpy()
    stats = {
        "mean": float(flat.mean()),
        "std": float(flat.std(ddof=1)) if flat.size > 1 else 0.0,
        "median": float(np.median(flat)),
        "min": float(flat.min()),
        "max": float(flat.max()),
        **{f"percentile_{q}": float(np.percentile(flat, q)) for q in (25, 50, 75)},
        "tokens": int(flat.size),
    }
    means = [float(k.mean()) for k in kls]
    order = sorted(range(len(means)), key=lambda i: -means[i])[:top]
    tokens = [(i, t, int(ids[i][t]), float(k[t])) for i, k in enumerate(kls) for t in range(len(k))]
    tokens.sort(key=lambda row: -row[3])
    return KLResult(means, stats, [(i, means[i]) for i in order], tokens[:top])
