"""Per-chunk perplexity and per-layer dispersion of an LM, the paper's binned protocol, and
datastore collection for kNN-LM.

Protocol (paper Sec. 3; official ``analysis/step2_group_and_sample.py`` + ``step3``): score each
fixed-length chunk's perplexity, sort chunks by perplexity, group consecutive chunks into bins of
a fixed size (an incomplete last bin is dropped), and correlate each bin's mean D with its mean
perplexity (Pearson r over bins). D of a chunk is computed over all its positions at HF hidden
state index ``i`` (0 = embeddings, ``i`` = after decoder layer ``i``, the last one after the final
norm, as ``output_hidden_states`` returns them, i.e. the official ``layer_idx=-1``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field

import numpy as np
import torch

from llm_methods.dispersion.metrics import dispersion
from llm_methods.lm import LM, LMError, capture_sublayers, collate, target_logprobs

__all__ = ["ChunkStats", "binned", "binned_correlation", "chunk_statistics", "parse_key_source"]

KEY_KINDS = ("hidden", "attn", "ffn")


def parse_key_source(text: str) -> tuple[str, int]:
    """``"hidden:30"`` / ``"attn:29"`` / ``"ffn:-1"`` -> (kind, index)."""
    kind, _, index = text.partition(":")
    if kind not in KEY_KINDS or not index.lstrip("-").isdigit():
        raise LMError(f"bad key source {text!r}: expected KIND:INDEX with KIND in {KEY_KINDS}")
    return kind, int(index)


@dataclass
class ChunkStats:
    """Per chunk: ``ppl`` [N]; ``dispersion`` [N, L+1] per hidden-state index; optionally the
    datastore rows (``keys[name]`` [N·(T−1), d], next-token ``values``, the LM's own
    ``lm_logprobs`` of those tokens) in chunk order."""

    ppl: np.ndarray
    dispersion: np.ndarray
    keys: dict[str, torch.Tensor] = field(default_factory=dict)
    values: torch.Tensor | None = None
    lm_logprobs: torch.Tensor | None = None


@torch.no_grad()
def chunk_statistics(
    lm: LM,
    chunks: Sequence[Sequence[int]],
    batch_size: int = 8,
    key_sources: Sequence[str] = (),
    collect: bool = False,
    quiet: bool = True,
) -> ChunkStats:
    """Forward every chunk once; ``key_sources`` (see :func:`parse_key_source`) and
    ``collect=True`` also gather kNN-LM datastore rows. ``quiet=False``: progress lines per
    batch on stderr (:func:`iclr26_common.progress.progress`)."""
    from iclr26_common.progress import progress

    if not chunks:
        raise LMError("no chunks to measure")
    sources = {name: parse_key_source(name) for name in key_sources}
    for kind, index in sources.values():
        if kind == "hidden" and not -(lm.n_layers + 1) <= index <= lm.n_layers:
            raise LMError(f"unknown hidden-state index {index}: 0..{lm.n_layers}")
    ppl, disp = [], []
    keys: dict[str, list[torch.Tensor]] = {name: [] for name in sources}
    values, lps = [], []
    starts = range(0, len(chunks), batch_size)
    for start in progress(starts, description="dispersion batches", quiet=quiet):
        batch = collate(chunks[start : start + batch_size], lm.tokenizer.pad_token_id, lm.device)
        with ExitStack() as stack:
            subs = {
                name: stack.enter_context(capture_sublayers(lm, [idx], kind))
                for name, (kind, idx) in sources.items()
                if kind != "hidden"
            }
            out = lm.model.get_decoder()(
                input_ids=batch.input_ids,
                attention_mask=batch.attention_mask,
                output_hidden_states=True,
            )
        hidden = tuple(out.hidden_states)
        mask = batch.attention_mask
        target_lp = target_logprobs(lm, out.last_hidden_state[:, :-1], batch.input_ids[:, 1:])
        tmask = mask[:, 1:].float()
        ppl.append(torch.exp(-(target_lp * tmask).sum(1) / tmask.sum(1)).cpu())
        disp.append(torch.stack([dispersion(h, mask) for h in hidden], 1).cpu())
        if collect:
            keep = mask[:, 1:].bool()
            values.append(batch.input_ids[:, 1:][keep].cpu())
            lps.append(target_lp[keep].cpu())
            for name, (kind, idx) in sources.items():
                h = hidden[idx] if kind == "hidden" else next(iter(subs[name].values()))
                keys[name].append(h[:, :-1][keep].float().cpu())
    stats = ChunkStats(torch.cat(ppl).numpy(), torch.cat(disp).numpy())
    if collect:
        stats.keys = {name: torch.cat(rows) for name, rows in keys.items()}
        stats.values, stats.lm_logprobs = torch.cat(values), torch.cat(lps)
    return stats


def binned(ppl: np.ndarray, values: np.ndarray, bin_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Sort by perplexity, bins of ``bin_size`` consecutive chunks (incomplete bin dropped):
    (mean perplexity per bin, mean value per bin)."""
    if bin_size < 1:
        raise ValueError(f"bin size must be >= 1, got {bin_size}")
    order = np.argsort(ppl, kind="stable")
    n_bins = len(order) // bin_size
    if n_bins < 3:
        raise ValueError(f"{len(order)} chunks give {n_bins} bins of {bin_size}; need >= 3")
    groups = order[: n_bins * bin_size].reshape(n_bins, bin_size)
    return ppl[groups].mean(1), values[groups].mean(1)


def pearson_r(x: np.ndarray, y: np.ndarray) -> float:
    """``scipy.stats.pearsonr(x, y).statistic`` for 1-D float64 arrays, computed with the same
    numpy operations in the same order (the same bits) without scipy's per-call overhead (the
    bootstrap of the correlation claim calls it thousands of times). Constant inputs and
    ``n <= 2`` (scipy's special cases) go to scipy itself."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or len(x) <= 2 or np.all(x == x[0]) or np.all(y == y[0]):
        from scipy.stats import pearsonr

        return float(pearsonr(x, y).statistic)
    xm = x - x.mean(axis=-1, keepdims=True)
    ym = y - y.mean(axis=-1, keepdims=True)
    xmax = np.max(np.abs(xm), axis=-1, keepdims=True)
    ymax = np.max(np.abs(ym), axis=-1, keepdims=True)
    normxm = xmax * np.linalg.norm(xm / xmax, ord=2, axis=-1, keepdims=True)
    normym = ymax * np.linalg.norm(ym / ymax, ord=2, axis=-1, keepdims=True)
    return float(np.clip(np.vecdot(xm / normxm, ym / normym, axis=-1), -1.0, 1.0))


def binned_correlation(ppl: np.ndarray, values: np.ndarray, bin_size: int) -> float:
    """Pearson r between bin-mean D and bin-mean perplexity (:func:`pearson_r`)."""
    x, y = binned(ppl, values, bin_size)
    return pearson_r(x, y)
