"""Activation Difference Lens (ADL; Minder et al., arXiv 2510.13900): read what a narrow finetune
did from the mean activation difference between the finetuned and the base model.

- δ̄_j = mean over unrelated texts of (h^ft_j − h^base_j) at layer ℓ (default relative depth 0.5),
  positions j = 0..P−1 (P = 5): :func:`activation_difference`;
- logit lens of δ̄_j (final norm + unembedding of the finetuned model): :func:`lens_tokens`;
- Patchscope: add λ·δ̄_j to the last position of a fixed identity prompt over a grid of scales,
  read the next-token distribution: :func:`patchscope`;
- steering: add α·δ̄_j at every position while generating; the largest α whose output stays
  coherent is found by bisection against a coherence score: :func:`max_coherent_alpha`;
- causal test: h̃ = P_δ h^base + (I − P_δ) h^ft at layer ℓ of the finetuned model (P_δ the
  projection on δ̄), loss change on finetuning vs pretraining text: :func:`projection_loss_change`.

Token relevance is graded objectively against a domain's vocabulary (tokens enriched in the
finetuning data relative to pretraining data: :func:`enriched_tokens`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from llm_methods.lm import (
    LM,
    LMError,
    add_to_residual,
    capture_residual,
    collate,
    encode_texts,
    generate,
    logit_lens,
    replace_residual,
    token_logprobs,
)

__all__ = [
    "ADLDifference",
    "activation_difference",
    "activation_difference_ids",
    "base_residuals",
    "enriched_tokens",
    "lens_token_ids",
    "max_coherent_alpha",
    "patchscope",
    "projection_loss_change",
    "relative_layer",
    "token_counts",
    "token_relevance",
]

N_POSITIONS = 5
PATCHSCOPE_PROMPT = "cat -> cat\n1135 -> 1135\nhello -> hello\n?"


def relative_layer(lm: LM, depth: float = 0.5) -> int:
    """Decoder layer at relative depth ``depth`` in [0, 1]: ``int(depth * (L - 1))``, as
    diffing-toolkit's ``get_layer_indices`` (0.5 of 30 layers -> 14, of 5 layers -> 2)."""
    if not 0.0 <= depth <= 1.0:
        raise LMError(f"relative layer depth must be in [0, 1], got {depth}")
    return int(depth * (lm.n_layers - 1))


@dataclass
class ADLDifference:
    """``delta``, ``mean_base``, ``mean_ft``: ``[P, d]`` at decoder layer ``layer``."""

    delta: torch.Tensor
    mean_base: torch.Tensor
    mean_ft: torch.Tensor
    layer: int
    n_texts: int
    #: mean L2 norm of the residual at positions >= ``norm_skip`` (diffing-toolkit skips 5)
    norm_base: float = float("nan")
    norm_ft: float = float("nan")
    norm_skip: int = 0


def _check_pair(base: LM, ft: LM) -> None:
    if base.n_layers != ft.n_layers or base.hidden_size != ft.hidden_size:
        raise LMError("base and finetuned models differ in depth or width")
    if base.tokenizer.get_vocab() != ft.tokenizer.get_vocab():
        raise LMError("base and finetuned models must share a tokenizer")


#: positions skipped for the residual-norm estimate (diffing-toolkit: BOS effects)
NORM_SKIP = 5


@torch.no_grad()
def _mean_states(
    lm: LM,
    ids: list[list[int]],
    layer: int,
    batch_size: int,
    skip: int,
    quiet: bool = True,
    description: str = "adl activations",
) -> tuple[torch.Tensor, float]:
    """(mean residual after ``layer`` per position ``[P, d]``, mean L2 norm at positions
    ``>= skip``); ``quiet=False``: progress lines per batch on stderr."""
    from iclr26_common.progress import progress

    total, norms = None, 0.0
    starts = range(0, len(ids), batch_size)
    for start in progress(starts, description=description, quiet=quiet):
        batch = collate(ids[start : start + batch_size], lm.tokenizer.pad_token_id, lm.device)
        with capture_residual(lm, [layer]) as store:
            lm.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
        h = store[layer].float()
        part = h.sum(0).cpu()
        norms += float(h[:, skip:].norm(dim=-1).mean(-1).sum())
        total = part if total is None else total + part
    assert total is not None
    return total / len(ids), norms / len(ids)


def activation_difference(
    base: LM,
    ft: LM,
    texts: Sequence[str],
    layer: int | None = None,
    n_positions: int = N_POSITIONS,
    batch_size: int = 16,
    quiet: bool = True,
) -> ADLDifference:
    """δ̄ over the first ``n_positions`` tokens (BOS included when the tokenizer has one) of
    ``texts``; texts shorter than that raise :class:`LMError`. ``quiet=False``: progress lines
    on stderr (:func:`iclr26_common.progress.progress`)."""
    ids = encode_texts(ft, texts)
    short = [i for i, row in enumerate(ids) if len(row) < n_positions]
    if short:
        raise LMError(f"text {short[0]} has fewer than {n_positions} tokens")
    return activation_difference_ids(
        base, ft, [row[:n_positions] for row in ids], layer, batch_size, quiet=quiet
    )


def activation_difference_ids(
    base: LM,
    ft: LM,
    ids: Sequence[Sequence[int]],
    layer: int | None = None,
    batch_size: int = 16,
    quiet: bool = True,
) -> ADLDifference:
    """δ̄ over token sequences of one length P (diffing-toolkit's first-n-token ids)."""
    _check_pair(base, ft)
    layer = relative_layer(ft) if layer is None else ft.layer_index(layer)
    ids = [list(row) for row in ids]
    if not ids or len({len(row) for row in ids}) != 1 or not ids[0]:
        raise LMError("activation_difference_ids needs token sequences of one length >= 1")
    n_positions = len(ids[0])
    skip = NORM_SKIP if n_positions > NORM_SKIP else min(1, n_positions - 1)
    mean_base, norm_base = _mean_states(
        base, ids, layer, batch_size, skip, quiet, "adl diff base-model batches"
    )
    mean_ft, norm_ft = _mean_states(
        ft, ids, layer, batch_size, skip, quiet, "adl diff model batches"
    )
    return ADLDifference(
        mean_ft - mean_base, mean_base, mean_ft, layer, len(ids), norm_base, norm_ft, skip
    )


@torch.no_grad()
def lens_token_ids(lm: LM, vec: torch.Tensor, k: int = 20) -> list[int]:
    """Top-``k`` token ids of the logit lens of one ``[d]`` vector."""
    return torch.topk(logit_lens(lm, vec.reshape(1, -1)).float()[0], k).indices.tolist()


def token_counts(tokenizer: object, texts: Sequence[str]) -> Counter[int]:
    """How often each token id occurs in ``texts`` (each tokenised without special tokens)."""
    c: Counter[int] = Counter()
    for text in texts:
        c.update(tokenizer(text, add_special_tokens=False).input_ids)  # type: ignore[operator]
    return c


def enriched_tokens(
    tokenizer: object,
    domain_texts: Sequence[str],
    background_texts: Sequence[str],
    top_n: int = 100,
    min_count: int = 3,
    *,
    background_counts: Counter[int] | None = None,
) -> set[int]:
    """The domain's vocabulary: the ``top_n`` token ids with the highest smoothed log-odds of
    appearing in ``domain_texts`` rather than ``background_texts`` (seen >= ``min_count`` times
    in the domain), excluding special tokens. ``background_counts``: the background's
    :func:`token_counts`, when already computed (several domains against one background read
    it once; ``background_texts`` is then not read)."""
    dom = token_counts(tokenizer, domain_texts)
    bg = (
        token_counts(tokenizer, background_texts)
        if background_counts is None
        else background_counts
    )
    nd, nb = sum(dom.values()), sum(bg.values())
    special = set(getattr(tokenizer, "all_special_ids", []))
    scores = {
        t: math.log((dom[t] + 1) / (nd + 1)) - math.log((bg.get(t, 0) + 1) / (nb + 1))
        for t, c in dom.items()
        if c >= min_count and t not in special
    }
    return set(sorted(scores, key=scores.__getitem__, reverse=True)[:top_n])


def token_relevance(token_ids: Sequence[int], vocabulary: set[int]) -> float:
    """Fraction of ``token_ids`` in the domain ``vocabulary``."""
    if not token_ids:
        raise LMError("no tokens to grade")
    return sum(t in vocabulary for t in token_ids) / len(token_ids)


@torch.no_grad()
def patchscope(
    lm: LM,
    vec: torch.Tensor,
    layer: int,
    scales: Sequence[float],
    k: int = 20,
    prompt: str = PATCHSCOPE_PROMPT,
) -> dict[float, list[int]]:
    """For each scale λ: top-``k`` next-token ids after adding λ·vec/‖vec‖·‖h‖ (λ relative to the
    mean residual norm at ``layer``) to the last position of the identity prompt."""
    ids = torch.tensor(encode_texts(lm, [prompt]), device=lm.device)
    with capture_residual(lm, [layer]) as store:
        lm.model(input_ids=ids)
    norm = float(store[lm.layer_index(layer)][0].norm(dim=-1).mean())
    unit = vec.float() / vec.float().norm().clamp_min(1e-12)
    out = {}
    last = ids.shape[1] - 1
    for scale in scales:
        with add_to_residual(lm, layer, unit * norm, scale=scale, positions=[last]):
            logits = lm.model(input_ids=ids).logits[0, -1]
        out[float(scale)] = torch.topk(logits.float(), k).indices.tolist()
    return out


def coherence(judge: LM, texts: Sequence[str]) -> float:
    """Mean per-token log-prob of ``texts`` under the ``judge`` model (higher = more fluent);
    empty generations count as -inf."""
    nonempty = [t for t in texts if t.strip()]
    if len(nonempty) < len(texts):
        return -math.inf
    ids = [row for row in encode_texts(judge, nonempty) if len(row) >= 2]
    if not ids:
        return -math.inf
    return float(torch.cat(token_logprobs(judge, ids)).mean())


def max_coherent_alpha(
    lm: LM,
    vec: torch.Tensor,
    layer: int,
    prompts: Sequence[str],
    judge: LM,
    min_coherence: float,
    alpha_max: float = 64.0,
    steps: int = 6,
    max_new_tokens: int = 16,
    generate_fn: Callable[..., list[str]] = generate,
) -> tuple[float, list[str]]:
    """Largest α in [0, alpha_max] (bisection, ``steps`` halvings) whose steered greedy outputs
    (α·vec added at every position) keep ``coherence(judge, outputs) >= min_coherence``.
    Returns (α, the outputs at α)."""

    def outputs(alpha: float) -> list[str]:
        with add_to_residual(lm, layer, vec, scale=alpha):
            return generate_fn(lm, list(prompts), max_new_tokens=max_new_tokens)

    lo, hi = 0.0, alpha_max
    best = outputs(0.0)
    top = outputs(hi)
    if coherence(judge, top) >= min_coherence:
        return hi, top
    for _ in range(steps):
        mid = (lo + hi) / 2
        out = outputs(mid)
        if coherence(judge, out) >= min_coherence:
            lo, best = mid, out
        else:
            hi = mid
    return lo, best


@torch.no_grad()
def base_residuals(base: LM, layer: int, texts: Sequence[str]) -> list[torch.Tensor]:
    """h^base after ``layer`` of each text (``[1, T, d]``, one forward per text, BOS first as
    :func:`~llm_methods.lm.encode_texts`): what :func:`projection_loss_change` reads from the
    base model. The base is frozen, so a caller that tests several finetunes of one base on the
    same texts computes these once and passes them as ``base_states``."""
    layer = base.layer_index(layer)
    out = []
    for row in encode_texts(base, texts):
        with capture_residual(base, [layer]) as store:
            base.model(input_ids=torch.tensor([row], device=base.device))
        out.append(store[layer])
    return out


@torch.no_grad()
def projection_loss_change(
    base: LM,
    ft: LM,
    direction: torch.Tensor,
    layer: int,
    texts: Sequence[str],
    base_states: Sequence[torch.Tensor] | None = None,
) -> float:
    """Mean NLL of ``texts`` under the finetuned model with its layer-``layer`` residual replaced
    by P h^base + (I − P) h^ft (P = projection on ``direction``), minus its plain NLL.
    Positive on finetuning text = the δ̄ direction carries what the finetune learned.
    ``base_states``: :func:`base_residuals` of ``base`` at ``layer`` on ``texts``, computed
    earlier (the same numbers; None: computed here).

    The two models may sit on different devices or hold different dtypes: h^base and the
    direction are cast to the finetuned residual's device and dtype inside the patch."""
    _check_pair(base, ft)
    layer = ft.layer_index(layer)
    u = direction.float() / direction.float().norm().clamp_min(1e-12)
    ids = encode_texts(ft, texts)
    if base_states is None:
        base_states = base_residuals(base, layer, texts)
    if len(base_states) != len(ids):
        raise LMError(f"{len(base_states)} base states for {len(ids)} texts")
    plain, patched = [], []
    for row, h_base in zip(ids, base_states, strict=True):
        if h_base.shape[:2] != (1, len(row)):
            raise LMError(
                f"a base state of shape {tuple(h_base.shape)} for a text of {len(row)} tokens"
            )

        def mix(h_ft: torch.Tensor, h_base: torch.Tensor = h_base) -> torch.Tensor:
            # P h_base + (I - P) h_ft = h_ft + P (h_base - h_ft), in h_ft's device and dtype
            u_ft = u.to(device=h_ft.device, dtype=h_ft.dtype)
            coef = (h_base.to(device=h_ft.device, dtype=h_ft.dtype) - h_ft) @ u_ft
            return h_ft + coef[..., None] * u_ft

        plain.append(-torch.cat(token_logprobs(ft, [row])).mean())
        with replace_residual(ft, layer, mix):
            patched.append(-torch.cat(token_logprobs(ft, [row])).mean())
    return float(torch.stack(patched).mean() - torch.stack(plain).mean())
