"""The SCISOR forward (insertion) process, its loss weight, and the padding of X0 batches.

A pure birth process on the L+1 gaps of X0 (paper Sec. 3; upstream ``insertion_schedule``):
alpha(t) = (1 - t)^(1/p), beta(t) = (1/p) / (1 - t) with p = ``ALPHA_POWER``; the number of
insertions at time t is S ~ NegBinomial(L+1, 1 - alpha(t)); inserted letters are i.i.d. from pi.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bio_scisor.constants import ALPHA_POWER, BACKGROUND, PAD_INDEX, S_REDRAW_MAX, T_MAX

__all__ = [
    "NoisedBatch",
    "alpha",
    "beta",
    "gamma_sample",
    "insert",
    "loss_weight",
    "pad_batch",
    "redraw_probs",
    "redraw_zero",
]


def alpha(t: torch.Tensor, power: float = ALPHA_POWER) -> torch.Tensor:
    """alpha(t) = (1 - t)^(1/power): probability that a gap has had no insertion yet."""
    return (1.0 - t) ** (1.0 / power)


def beta(t: torch.Tensor, power: float = ALPHA_POWER) -> torch.Tensor:
    """beta(t) = (1/power) / (1 - t) = -d log alpha / dt (the per-lineage birth rate)."""
    return (1.0 / power) / (1.0 - t)


def loss_weight(
    t: torch.Tensor, length: torch.Tensor, power: float = ALPHA_POWER, t_max: float = T_MAX
) -> torch.Tensor:
    """beta(t) / (1 - alpha(t)) * (1 - alpha(t)^(L+1)) * t_max (upstream loss weight), (B,)."""
    a = alpha(t, power)
    return beta(t, power) / (1.0 - a) * (1.0 - a ** (length + 1)) * t_max


def pad_batch(seqs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad 1-D token tensors with PAD_INDEX: (B, max_len) int64 and lengths (B,)."""
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    out = torch.full((len(seqs), int(lengths.max())), PAD_INDEX, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = s
    return out, lengths


@dataclass
class NoisedBatch:
    """X_t (B, n) int64 with lengths (B,), S (B,), t (B,) float64 and the originals' mask (B, n)."""

    xt: torch.Tensor
    xt_len: torch.Tensor
    s: torch.Tensor
    t: torch.Tensor
    original: torch.Tensor


def insert(
    x0: torch.Tensor,
    x0_len: torch.Tensor,
    generator: torch.Generator | None = None,
    power: float = ALPHA_POWER,
    t_max: float = T_MAX,
    t: torch.Tensor | None = None,
    background: torch.Tensor | None = None,
) -> NoisedBatch:
    """Sample X_t ~ q(X_t | X0) for a padded batch ``x0`` (B, m) (CPU sampling).

    t ~ U[0, t_max] unless given; S ~ NegBinomial(L+1, 1 - alpha(t)); S = 0 is redrawn from the
    same negative binomial restricted to {1..S_REDRAW_MAX} (:func:`redraw_zero`, upstream
    ``sample_point_given_t``); originals keep their order at sorted random positions among the L+S
    slots, the rest drawn from pi.
    """
    bsz = x0.shape[0]
    pi = torch.as_tensor(BACKGROUND if background is None else background, dtype=torch.float64)
    if t is None:
        t = torch.rand(bsz, generator=generator, dtype=torch.float64) * t_max
    t = t.to(torch.float64).cpu()
    lengths = x0_len.cpu()
    a = alpha(t, power)
    # NegBinomial(r = L+1, p = 1 - alpha) via its Gamma-Poisson mixture (generator-friendly):
    rate = gamma_sample(lengths.to(torch.float64) + 1, generator)
    s = torch.poisson(rate * (1.0 - a) / a, generator=generator).long()
    zero = s == 0
    if zero.any():
        s[zero] = redraw_zero(lengths[zero], a[zero], generator)
    n = lengths + s
    xt = torch.full((bsz, int(n.max())), PAD_INDEX, dtype=torch.long)
    original = torch.zeros(bsz, int(n.max()), dtype=torch.bool)
    for b in range(bsz):
        nb, lb = int(n[b]), int(lengths[b])
        keys = torch.rand(nb, generator=generator)
        slots = torch.sort(torch.topk(keys, lb).indices).values
        row = torch.multinomial(pi, nb, replacement=True, generator=generator)
        row[slots] = x0[b, :lb].cpu()
        xt[b, :nb] = row
        original[b, slots] = True
    return NoisedBatch(xt, n, s, t, original)


def redraw_probs(lengths: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """P(S = k | 1 <= S <= S_REDRAW_MAX) for S ~ NegBinomial(L+1, 1 - a), k = 1..S_REDRAW_MAX: (B, K).

    The negative-binomial pmf C(L+k, k) a^(L+1) (1-a)^k restricted to 1..S_REDRAW_MAX and
    renormalised (upstream: ``Categorical(NegativeBinomial.log_prob(1..20).exp())``).
    """
    k = torch.arange(1, S_REDRAW_MAX + 1, dtype=torch.float64)[None, :]
    n = lengths.to(torch.float64)[:, None] + 1.0
    a = a.to(torch.float64)[:, None]
    log_pmf = torch.lgamma(n + k) - torch.lgamma(n) - torch.lgamma(k + 1) + k * torch.log1p(-a)
    return torch.softmax(log_pmf, dim=1)


def redraw_zero(
    lengths: torch.Tensor, a: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Redraw S for rows where S = 0 from :func:`redraw_probs`: (B,) int64 in 1..S_REDRAW_MAX."""
    probs = redraw_probs(lengths, a)
    return torch.multinomial(probs, 1, generator=generator)[:, 0] + 1


def gamma_sample(shape: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Gamma(shape, 1) draws with an explicit generator (Marsaglia-Tsang, shape >= 1)."""
    d = shape - 1.0 / 3.0
    c = 1.0 / torch.sqrt(9.0 * d)
    out = torch.empty_like(shape)
    todo = torch.ones_like(shape, dtype=torch.bool)
    while todo.any():
        z = torch.randn(shape.shape, generator=generator, dtype=shape.dtype)
        u = torch.rand(shape.shape, generator=generator, dtype=shape.dtype)
        v = (1.0 + c * z) ** 3
        ok = (v > 0) & (
            torch.log(u.clamp_min(1e-300))
            < 0.5 * z**2 + d - d * v + d * torch.log(v.clamp_min(1e-300))
        )
        take = todo & ok
        out[take] = (d * v)[take]
        todo &= ~ok
    return out
