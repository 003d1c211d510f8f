"""The SCISOR objective, the prior term and a Monte-Carlo ELBO with common random numbers.

* :func:`per_sequence_loss`: the diffusion term S * KL(p || q_theta) * w(t, L) (upstream
  ``ShorteningSCUD.forward``, logged as ``val_l01``).
* :func:`prior_term`: upstream's ``get_kl_t1`` (``val_l1``): one draw X_T ~ q(X_T | X0) at
  t = t_max and log ali(X0, X_T) - log C(L+S, S) - sum_i log pi(X0_i), times the
  Rao-Blackwell factor 1 - alpha(t_max)^(L+1) (``rao_blackwellize: true`` upstream).
* :func:`score_elbo`: ELBO(mutant) - ELBO(WT) with ELBO = -(E_t[diffusion term] + prior term),
  upstream's validation bound val_l01 + val_l1, estimated with stratified times and noise that
  is shared across the variants scored together (:func:`coupled_noise`).

Common random numbers. Under the forward process every one of the L+1 gaps of X0 receives an
independent Geometric number of insertions, P(N = k) = alpha (1 - alpha)^k (a pure birth
process per gap; their sum is S ~ NegBinomial(L+1, 1 - alpha) and, given S, the arrangement is
uniform over the C(L+S, S) interleavings). So one draw per *WT gap* (its count and its inserted
letters) defines X_t for the WT and for every deletion variant at once: a variant keeps the gap
before each residue it retains plus the final gap. Each variant's X_t is an exact draw from its
own forward process, identical sequences get identical X_t, and a deletion variant's X_t equals
the WT's minus the deleted residues and the insertions of one gap per deleted residue.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from bio_scisor.alignment import deletion_posterior, log_alignment_counts
from bio_scisor.constants import ALPHA_POWER, BACKGROUND, S_REDRAW_MAX, T_MAX
from bio_scisor.insertion import NoisedBatch, alpha, insert, loss_weight, pad_batch, redraw_probs
from bio_scisor.io import encode, is_deletion_of
from bio_scisor.windows import denoiser_log_q

__all__ = [
    "SharedNoise",
    "coupled_noise",
    "draw_shared_noise",
    "elbo_values",
    "embedding_indices",
    "per_sequence_loss",
    "prior_term",
    "score_elbo",
]


def per_sequence_loss(
    model: nn.Module,
    x0: torch.Tensor,
    x0_len: torch.Tensor,
    noised: NoisedBatch,
    power: float = ALPHA_POWER,
    t_max: float = T_MAX,
    mode: str = "random",
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sequence SCISOR loss S * KL(p || q_theta) * w(t, L) and the bare KL, both (B,).

    p is the exact deletion posterior (alignment-count DP, float64); w is
    :func:`bio_scisor.insertion.loss_weight`; q_theta is windowed for long X_t
    (:func:`bio_scisor.windows.denoiser_log_q`, ``mode``/``generator``).
    """
    device = x0.device
    xt, xt_len = noised.xt.to(device), noised.xt_len.to(device)
    s, t = noised.s.to(device), noised.t.to(device)
    target = deletion_posterior(x0, x0_len, xt, xt_len)  # (B, n) float64
    log_q = denoiser_log_q(model, xt, xt_len, s, mode, generator)
    log_p = torch.log(target.clamp_min(1e-300))
    kl = torch.where(target > 0, target * (log_p - log_q), torch.zeros_like(target)).sum(1)
    weight = loss_weight(t, x0_len.to(torch.float64), power, t_max)
    return s.to(torch.float64) * kl * weight, kl


def _log_pi(background: torch.Tensor | np.ndarray | None) -> torch.Tensor:
    pi = torch.as_tensor(BACKGROUND if background is None else background, dtype=torch.float64)
    return torch.log(pi / pi.sum())


def prior_term(
    x0: torch.Tensor,
    x0_len: torch.Tensor,
    generator: torch.Generator | None = None,
    power: float = ALPHA_POWER,
    t_max: float = T_MAX,
    background: torch.Tensor | np.ndarray | None = None,
    noised: NoisedBatch | None = None,
) -> torch.Tensor:
    """Upstream's prior term ``get_kl_t1`` per sequence, nats: (B,) float64.

    X_T ~ q(X_T | X0) at t = t_max (or the given ``noised``), then
    (log ali(X0, X_T) - log C(L+S, S) - sum_i log pi(X0_i)) * (1 - alpha(t_max)^(L+1)).
    Like upstream it leaves out the length terms log P(S) - log p(|X_T|).
    """
    x0, x0_len = x0.cpu(), x0_len.cpu()
    if noised is None:
        t = torch.full((x0.shape[0],), t_max, dtype=torch.float64)
        noised = insert(x0, x0_len, generator, power, t_max, t=t, background=background)
    length = x0_len.to(torch.float64)
    s = noised.s.to(torch.float64)
    log_ali = log_alignment_counts(x0, x0_len, noised.xt, noised.xt_len)
    log_binom = torch.lgamma(length + s + 1) - torch.lgamma(length + 1) - torch.lgamma(s + 1)
    log_pi = torch.cat([_log_pi(background), torch.zeros(1, dtype=torch.float64)])
    valid = torch.arange(x0.shape[1])[None, :] < x0_len[:, None]
    sum_log_pi = (log_pi[x0] * valid).sum(1)
    a_max = alpha(torch.tensor(t_max, dtype=torch.float64), power)
    return (log_ali - log_binom - sum_log_pi) * (1.0 - a_max ** (length + 1))


def embedding_indices(variant: str, wt: str) -> np.ndarray:
    """Indices of the WT residues that ``variant`` keeps (leftmost embedding), sorted (m,)."""
    out, j = [], 0
    for c in variant:
        while j < len(wt) and wt[j] != c:
            j += 1
        if j == len(wt):
            raise ValueError(f"a sequence of length {len(variant)} is not a deletion of the WT")
        out.append(j)
        j += 1
    return np.array(out, dtype=np.int64)


@dataclass
class SharedNoise:
    """One Monte-Carlo draw of the forward process, indexed by the L+1 gaps of the reference.

    ``counts`` (G,): insertions per gap (Geometric); ``letters`` (G, K): the inserted tokens,
    K >= max(counts, S_REDRAW_MAX); ``u_redraw``: the uniform for the S = 0 redraw;
    ``u_place`` (S_REDRAW_MAX,): the uniforms that place redrawn insertions; ``a``: alpha(t).
    """

    counts: np.ndarray
    letters: np.ndarray
    u_redraw: float
    u_place: np.ndarray
    t: float
    a: float


def draw_shared_noise(
    n_gaps: int,
    t: float,
    generator: torch.Generator,
    power: float = ALPHA_POWER,
    background: torch.Tensor | np.ndarray | None = None,
) -> SharedNoise:
    """Counts N_g = floor(log U / log(1 - alpha)) (P(N = k) = alpha (1-alpha)^k) and letters
    from pi by inverse CDF, for ``n_gaps`` gaps at time ``t``."""
    a = float(alpha(torch.tensor(t, dtype=torch.float64), power))
    u = 1.0 - torch.rand(n_gaps, generator=generator, dtype=torch.float64)  # (0, 1]
    counts = torch.floor(torch.log(u) / math.log1p(-a)).long() if a < 1 else torch.zeros_like(u)
    width = max(int(counts.max()), S_REDRAW_MAX)
    u_letter = torch.rand(n_gaps, width, generator=generator, dtype=torch.float64)
    cdf = torch.cumsum(_log_pi(background).exp(), 0)
    letters = torch.searchsorted(cdf, u_letter.contiguous()).clamp_max(len(cdf) - 1)
    u_redraw = float(torch.rand(1, generator=generator, dtype=torch.float64))
    u_place = torch.rand(S_REDRAW_MAX, generator=generator, dtype=torch.float64)
    return SharedNoise(
        counts.long().numpy(), letters.numpy(), u_redraw, u_place.numpy(), float(t), a
    )


def _variant_counts(noise: SharedNoise, gaps: np.ndarray, length: int) -> np.ndarray:
    """Insertions per gap of one variant; S = 0 is redrawn from the restricted NB (upstream)
    and the S insertions placed by a Polya urn over the gaps (a uniform interleaving)."""
    counts = noise.counts[gaps].copy()
    if counts.sum() > 0:
        return counts
    probs = redraw_probs(torch.tensor([length]), torch.tensor([noise.a]))[0].numpy()
    s = min(int(np.searchsorted(np.cumsum(probs), noise.u_redraw, side="right")) + 1, S_REDRAW_MAX)
    for r in range(s):
        weights = counts + 1.0
        gap = int(np.searchsorted(np.cumsum(weights) / weights.sum(), noise.u_place[r], "right"))
        counts[min(gap, len(counts) - 1)] += 1
    return counts


def coupled_noise(
    tokens: Sequence[np.ndarray], keeps: Sequence[np.ndarray], n_ref: int, noise: SharedNoise
) -> NoisedBatch:
    """X_t for each variant (tokens, kept reference indices) from one :class:`SharedNoise`.

    Variant gap g < m is the reference gap before its g-th kept residue; gap m is the
    reference's final gap ``n_ref``. Returns a padded :class:`NoisedBatch` (CPU).
    """
    rows, masks, s_values = [], [], []
    for tok, keep in zip(tokens, keeps, strict=True):
        gaps = np.append(keep, n_ref)
        counts = _variant_counts(noise, gaps, len(tok))
        row, mask = [], []
        for g, (ref_gap, count) in enumerate(zip(gaps, counts, strict=True)):
            row.extend(noise.letters[ref_gap, :count].tolist())
            mask.extend([False] * int(count))
            if g < len(tok):
                row.append(int(tok[g]))
                mask.append(True)
        rows.append(torch.tensor(row, dtype=torch.long))
        masks.append(mask)
        s_values.append(int(counts.sum()))
    xt, xt_len = pad_batch(rows)
    original = torch.zeros(xt.shape, dtype=torch.bool)
    for b, mask in enumerate(masks):
        original[b, : len(mask)] = torch.tensor(mask)
    t = torch.full((len(rows),), noise.t, dtype=torch.float64)
    return NoisedBatch(xt, xt_len, torch.tensor(s_values), t, original)


@torch.no_grad()
def elbo_values(
    model: nn.Module,
    wt: str,
    seqs: Sequence[str],
    n_samples: int = 8,
    seed: int = 0,
    batch_size: int = 64,
    power: float = ALPHA_POWER,
    t_max: float = T_MAX,
    background: torch.Tensor | np.ndarray | None = None,
    *,
    quiet: bool = True,
) -> np.ndarray:
    """ELBO(X) = -(diffusion term + prior term) of each of ``seqs``, (N,) float64, nats.

    ``seqs`` are the WT or deletions of it. The diffusion term is the mean of
    :func:`per_sequence_loss` over stratified times t_j = (j + 1/2) t_max / n_samples; the prior
    term is :func:`prior_term` at t_max. Every sequence uses the same :class:`SharedNoise` per
    time (coupled through the WT's gaps), and equal sequences are scored once (de-duplicated
    before batching), so equal inputs get bit-identical ELBOs and ELBO(WT) - ELBO(WT) is exactly
    0 by construction. The shared noise alone would not give that: the batch a sequence is scored
    in changes float32 rounding (a difference of order 1e-6). ``quiet=False`` shows progress
    over the (time, batch) passes on stderr (:func:`iclr26_common.progress.progress`).
    """
    from iclr26_common.progress import progress

    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    model.eval()
    device = next(model.parameters()).device
    for seq in seqs:
        if seq != wt and not is_deletion_of(seq, wt):
            raise ValueError(f"a sequence of length {len(seq)} is not the WT or a deletion of it")
    distinct = list(dict.fromkeys(seqs))
    tokens = [encode(s) for s in distinct]
    keeps = [embedding_indices(s, wt) for s in distinct]
    x0_all, len_all = pad_batch([torch.from_numpy(t) for t in tokens])
    diffusion = np.zeros(len(distinct))
    prior = np.zeros(len(distinct))
    passes = [(j, i) for j in range(n_samples + 1) for i in range(0, len(distinct), batch_size)]
    noise_j, noise = -1, None
    for j, i in progress(passes, description="ELBO score, time x batch passes", quiet=quiet):
        prior_draw = j == n_samples
        t_j = t_max if prior_draw else (j + 0.5) * t_max / n_samples
        if j != noise_j:  # one shared draw per time, for every batch
            gen = torch.Generator().manual_seed(seed * 1_000_003 + j)
            noise_j, noise = j, draw_shared_noise(len(wt) + 1, t_j, gen, power, background)
        sl = slice(i, i + batch_size)
        noised = coupled_noise(tokens[sl], keeps[sl], len(wt), noise)
        x0, x0_len = x0_all[sl], len_all[sl]
        x0 = x0[:, : int(x0_len.max())]
        if prior_draw:
            value = prior_term(x0, x0_len, None, power, t_max, background, noised=noised)
            prior[sl] = value.numpy()
        else:
            loss, _ = per_sequence_loss(
                model, x0.to(device), x0_len.to(device), noised, power, t_max, "average"
            )
            diffusion[sl] += loss.cpu().numpy()
    elbo = -(diffusion / n_samples + prior)
    index = {s: k for k, s in enumerate(distinct)}
    return np.array([elbo[index[s]] for s in seqs], dtype=np.float64)


def score_elbo(
    model: nn.Module,
    wt: str,
    mutants: Sequence[str],
    n_samples: int = 8,
    seed: int = 0,
    batch_size: int = 64,
    power: float = ALPHA_POWER,
    t_max: float = T_MAX,
    background: torch.Tensor | np.ndarray | None = None,
    *,
    quiet: bool = True,
) -> np.ndarray:
    """Scoring (b): ELBO(mutant) - ELBO(WT), (N,) float64, with common random numbers
    (:func:`elbo_values`); a mutant equal to the WT scores exactly 0 because equal sequences
    are scored once, not only because they share the noise. ``quiet=False``: progress on
    stderr."""
    values = elbo_values(
        model,
        wt,
        [wt, *mutants],
        n_samples,
        seed,
        batch_size,
        power,
        t_max,
        background,
        quiet=quiet,
    )
    return values[1:] - values[0]
