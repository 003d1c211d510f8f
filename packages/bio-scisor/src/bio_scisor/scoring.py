"""Using a trained denoiser: the training objective, deletion scoring, shrinking, generation.

All functions take any denoiser with the interface of :class:`bio_scisor.model.ScisorDenoiser`
(tokens (B, n), lengths (B,), S (B,) -> log q (B, n)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from bio_scisor.alignment import deletion_posterior
from bio_scisor.constants import ALPHA_POWER, AMINO_ACIDS, BACKGROUND, S_REDRAW_MAX, T_MAX
from bio_scisor.io import encode, is_deletion_of
from bio_scisor.process import (
    NoisedBatch,
    alpha,
    beta,
    gamma_sample,
    insert,
    loss_weight,
    pad_batch,
)

__all__ = [
    "generate",
    "per_sequence_loss",
    "prior_kl",
    "score_elbo",
    "score_path",
    "shrink",
    "shrink_step",
]


def per_sequence_loss(
    model: nn.Module,
    x0: torch.Tensor,
    x0_len: torch.Tensor,
    noised: NoisedBatch,
    power: float = ALPHA_POWER,
    t_max: float = T_MAX,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sequence SCISOR loss S * KL(p || q_theta) * w(t, L) and the bare KL, both (B,).

    p is the exact deletion posterior (alignment-count DP, float64); w is :func:`loss_weight`.
    """
    device = x0.device
    xt, xt_len = noised.xt.to(device), noised.xt_len.to(device)
    s, t = noised.s.to(device), noised.t.to(device)
    target = deletion_posterior(x0, x0_len, xt, xt_len)  # (B, n) float64
    log_q = model(xt, xt_len, s).to(torch.float64)
    log_p = torch.log(target.clamp_min(1e-300))
    kl = torch.where(target > 0, target * (log_p - log_q), torch.zeros_like(target)).sum(1)
    weight = loss_weight(t, x0_len.to(torch.float64), power, t_max)
    return s.to(torch.float64) * kl * weight, kl


def prior_kl(x0: torch.Tensor, x0_len: torch.Tensor) -> torch.Tensor:
    """KL(Cat(residue frequencies of X0) || Cat(pi)) per sequence, nats: (B,) (logged only)."""
    pi = torch.as_tensor(BACKGROUND, dtype=torch.float64, device=x0.device)
    valid = torch.arange(x0.shape[1], device=x0.device)[None, :] < x0_len[:, None]
    counts = torch.zeros(x0.shape[0], len(AMINO_ACIDS) + 1, dtype=torch.float64, device=x0.device)
    counts.scatter_add_(1, x0, valid.to(torch.float64))
    freq = counts[:, : len(AMINO_ACIDS)] / x0_len[:, None].to(torch.float64)
    terms = torch.where(freq > 0, freq * torch.log(freq.clamp_min(1e-300) / pi), 0.0)
    return terms.sum(1)


def _tokens(seqs: Sequence[str], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, lengths = pad_batch([torch.from_numpy(encode(s)) for s in seqs])
    return tokens.to(device), lengths.to(device)


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def _log_q(model: nn.Module, items: list[tuple[str, int]], batch_size: int) -> list[np.ndarray]:
    device = _device(model)
    out: list[np.ndarray] = []
    for i in range(0, len(items), batch_size):
        chunk = items[i : i + batch_size]
        tokens, lengths = _tokens([seq for seq, _ in chunk], device)
        s = torch.tensor([k for _, k in chunk], device=device)
        log_q = model(tokens, lengths, s).double().cpu().numpy()
        out.extend(row[: len(seq)] for row, (seq, _) in zip(log_q, chunk, strict=True))
    return out


@torch.no_grad()
def score_path(
    model: nn.Module, wt: str, mutants: Sequence[str], batch_size: int = 64
) -> np.ndarray:
    """Scoring (a): log q_theta(reverse path X_wt -> mutant), (N,) float64.

    For a deletion of d residues this is the log of the sum, over every ordered sequence of d
    single-residue deletions that turns the WT into the mutant, of the product of the per-step
    probabilities q_theta(k | X, S = d - step). Identical children (deletions inside a run of equal
    residues) are merged, so ambiguous positions are summed. All single deletions share one
    forward pass (X_wt, S=1); each further level is one batched pass over the distinct states.
    """
    model.eval()
    for m in mutants:
        if not is_deletion_of(m, wt):
            raise ValueError(f"mutant of length {len(m)} is not a deletion of the wild type")
    depth = [len(wt) - len(m) for m in mutants]
    states: list[dict[str, float]] = [{wt: 0.0} for _ in mutants]
    cache: dict[tuple[str, int], np.ndarray] = {}
    for level in range(max(depth)):
        needed = sorted(
            {
                (seq, depth[i] - level)
                for i, st in enumerate(states)
                if depth[i] > level
                for seq in st
            }
            - set(cache)
        )
        cache.update(zip(needed, _log_q(model, needed, batch_size), strict=True))
        for i, st in enumerate(states):
            if depth[i] <= level:
                continue
            nxt: dict[str, float] = {}
            for seq, logp in st.items():
                log_q = cache[(seq, depth[i] - level)]
                for k in range(len(seq)):
                    child = seq[:k] + seq[k + 1 :]
                    if child != mutants[i] and not is_deletion_of(mutants[i], child):
                        continue
                    value = logp + float(log_q[k])
                    nxt[child] = np.logaddexp(nxt[child], value) if child in nxt else value
            states[i] = nxt
    return np.array([st[m] for st, m in zip(states, mutants, strict=True)], dtype=np.float64)


@torch.no_grad()
def score_elbo(
    model: nn.Module,
    wt: str,
    mutants: Sequence[str],
    n_samples: int = 8,
    seed: int = 0,
    batch_size: int = 64,
    power: float = ALPHA_POWER,
    t_max: float = T_MAX,
) -> np.ndarray:
    """Scoring (b): Monte-Carlo ELBO(mutant) - ELBO(WT), (N,) float64.

    ELBO(X) is estimated as minus the mean SCISOR loss over ``n_samples`` stratified times
    t_j = (j + 1/2) t_max / n_samples, with the same times and the same noise seed for every
    sequence (common random numbers, so the difference has low variance). The prior term is
    omitted (README, Deviations).
    """
    model.eval()
    device = _device(model)
    seqs = [wt, *mutants]
    total = np.zeros(len(seqs))
    for j in range(n_samples):
        t_j = (j + 0.5) * t_max / n_samples
        for i in range(0, len(seqs), batch_size):
            chunk = seqs[i : i + batch_size]
            x0, x0_len = _tokens(chunk, torch.device("cpu"))
            gen = torch.Generator().manual_seed(seed * 100_003 + j)
            noised = insert(x0, x0_len, gen, power, t_max, t=torch.full((len(chunk),), t_j))
            loss, _ = per_sequence_loss(
                model, x0.to(device), x0_len.to(device), noised, power, t_max
            )
            total[i : i + len(chunk)] += loss.cpu().numpy()
    elbo = -total / n_samples
    return elbo[1:] - elbo[0]


@torch.no_grad()
def shrink(
    model: nn.Module,
    seq: str,
    pct: float,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> str:
    """Remove k = ceil(L * pct / 100) residues in k reverse steps, step r conditioned on S = k - r.

    Each step samples one position from softmax(log q / temperature); ``temperature=0`` takes the
    arg-max (top-1).
    """
    if not 0 < pct < 100:
        raise ValueError(f"pct must be in (0, 100), got {pct}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    model.eval()
    k = math.ceil(len(seq) * pct / 100)
    if k >= len(seq):
        raise ValueError(f"removing {k} of {len(seq)} residues leaves nothing")
    for r in range(k):
        seq = shrink_step(model, seq, k - r, temperature, generator)
    return seq


@torch.no_grad()
def generate(
    model: nn.Module,
    length: int,
    generator: torch.Generator | None = None,
    temperature: float = 1.0,
    power: float = ALPHA_POWER,
    t_max: float = T_MAX,
) -> tuple[str, list[float]]:
    """Generation from scratch: X_{t_max} ~ random sequence of length L + S from pi, S ~
    NegBinomial(L+1, 1 - alpha(t_max)) (0 redrawn from 1..20), then S reverse deletions.

    Deletion times follow an exponential clock run backwards from t_max: with r insertions left
    at time t the next deletion waits Exp(r * beta(t)) (clipped at 0). The denoiser conditions on
    S only, so the times are returned for inspection. Returns (sequence, deletion times).
    """
    t_end = torch.tensor([t_max], dtype=torch.float64)
    a = float(alpha(t_end, power))
    rate = gamma_sample(torch.tensor([length + 1.0], dtype=torch.float64), generator)
    s = int(torch.poisson(rate * (1 - a) / a, generator=generator)[0])
    if s == 0:
        s = int(torch.randint(1, S_REDRAW_MAX + 1, (1,), generator=generator))
    pi = torch.as_tensor(BACKGROUND)
    idx = torch.multinomial(pi, length + s, replacement=True, generator=generator)
    seq = "".join(AMINO_ACIDS[i] for i in idx.tolist())
    times, t = [], t_max
    for r in range(s, 0, -1):
        wait = -math.log(1.0 - float(torch.rand(1, generator=generator))) / (
            r * float(beta(torch.tensor(t), power))
        )
        t = max(t - wait, 0.0)
        times.append(t)
        seq = shrink_step(model, seq, r, temperature, generator)
    return seq, times


def shrink_step(
    model: nn.Module, seq: str, s: int, temperature: float, generator: torch.Generator | None
) -> str:
    """One reverse step: delete one position sampled from q(. | seq, S=s)."""
    (log_q,) = _log_q(model, [(seq, s)], 1)
    if temperature == 0:
        pos = int(np.argmax(log_q))
    else:
        probs = torch.softmax(torch.from_numpy(log_q) / temperature, dim=0)
        pos = int(torch.multinomial(probs, 1, generator=generator))
    return seq[:pos] + seq[pos + 1 :]
