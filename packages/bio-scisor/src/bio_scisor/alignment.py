"""Alignment counts: the SCISOR training target (paper: the reverse-step posterior).

``ali(X0, Y)`` is the number of ways X0 embeds in Y as a subsequence. For a noised sequence X_t
(X0 with S letters inserted), the exact posterior of which position the reverse (deletion) process
removes next is ``p(i) ∝ ali(X0, X_t with position i removed)``. We compute every ``i`` at once
with a prefix table F and a suffix table G (log space, float64, vectorised over the batch):

    F[j, k] = # embeddings of X0[:k] in X_t[:j],   G[j, k] = # embeddings of X0[k:] in X_t[j:]
    ali(X0, X_t \\ i) = sum_k F[i, k] * G[i + 1, k]

Each table is one Python loop over |X0| with a ``logcumsumexp`` over the positions of X_t.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

__all__ = [
    "alignment_count_brute_force",
    "deletion_posterior",
    "log_alignment_counts",
    "log_deletion_counts",
    "log_deletion_counts_loop",
]


def _match(x0: torch.Tensor, x0_len: torch.Tensor, xt: torch.Tensor, xt_len: torch.Tensor):
    """(B, n, m) log-indicator: 0 where X_t[j] == X0[k] (both inside their lengths), else -inf."""
    n, m = xt.shape[1], x0.shape[1]
    valid_t = torch.arange(n, device=xt.device)[None, :] < xt_len[:, None]
    valid_0 = torch.arange(m, device=x0.device)[None, :] < x0_len[:, None]
    eq = (xt[:, :, None] == x0[:, None, :]) & valid_t[:, :, None] & valid_0[:, None, :]
    zero = torch.zeros((), dtype=torch.float64, device=xt.device)
    return torch.where(eq, zero, torch.full_like(zero, -math.inf))


def _tables(x0, x0_len, xt, xt_len):
    """Log prefix table F (B, n+1, m+1) and log suffix table G (B, n+1, m+1)."""
    bsz, n = xt.shape
    m = x0.shape[1]
    match = _match(x0, x0_len, xt, xt_len)
    neg = torch.full((bsz, 1), -math.inf, dtype=torch.float64, device=xt.device)
    cols_f = [torch.zeros(bsz, n + 1, dtype=torch.float64, device=xt.device)]
    for k in range(1, m + 1):
        step = cols_f[-1][:, :-1] + match[:, :, k - 1]  # (B, n): end X0[k-1] at X_t[j]
        cols_f.append(torch.cat([neg, torch.logcumsumexp(step, dim=1)], dim=1))
    log_f = torch.stack(cols_f, dim=2)
    cols_g: list[torch.Tensor] = [torch.zeros(bsz, n + 1, dtype=torch.float64, device=xt.device)]
    for k in range(m - 1, -1, -1):
        step = cols_g[-1][:, 1:] + match[:, :, k]  # X0[k] placed at X_t[j], rest after j
        rev = torch.logcumsumexp(step.flip(1), dim=1).flip(1)
        col = torch.cat([rev, neg], dim=1)
        done = (k >= x0_len)[:, None]  # X0[k:] is empty for this sequence: one embedding
        cols_g.append(torch.where(done, torch.zeros_like(col), col))
    log_g = torch.stack(cols_g[::-1], dim=2)
    return log_f, log_g


def log_alignment_counts(
    x0: torch.Tensor, x0_len: torch.Tensor, xt: torch.Tensor, xt_len: torch.Tensor
) -> torch.Tensor:
    """log ali(X0, X_t) for each pair: (B,) float64 (``-inf`` when X0 does not embed).

    ``x0`` (B, m) and ``xt`` (B, n) are padded token tensors with lengths ``x0_len``, ``xt_len``.
    """
    log_f, _ = _tables(x0, x0_len, xt, xt_len)
    rows = torch.arange(x0.shape[0], device=x0.device)
    return log_f[rows, xt_len, x0_len]


def log_deletion_counts(
    x0: torch.Tensor, x0_len: torch.Tensor, xt: torch.Tensor, xt_len: torch.Tensor
) -> torch.Tensor:
    """log ali(X0, X_t with position i removed) for every i: (B, n) float64.

    Positions ``i >= xt_len`` (padding) are ``-inf``. Vectorised over the batch; one Python loop
    over the columns of X0 per table.
    """
    log_f, log_g = _tables(x0, x0_len, xt, xt_len)
    n = xt.shape[1]
    total = torch.logsumexp(log_f[:, :n, :] + log_g[:, 1:, :], dim=2)  # (B, n)
    valid = torch.arange(n, device=xt.device)[None, :] < xt_len[:, None]
    return torch.where(valid, total, torch.full_like(total, -math.inf))


def deletion_posterior(
    x0: torch.Tensor, x0_len: torch.Tensor, xt: torch.Tensor, xt_len: torch.Tensor
) -> torch.Tensor:
    """The SCISOR target p(i | X0, X_t) ∝ ali(X0, X_t \\ i): (B, n) float64, zero on padding."""
    return torch.softmax(log_deletion_counts(x0, x0_len, xt, xt_len), dim=1)


def log_deletion_counts_loop(x0: str, xt: str) -> np.ndarray:
    """Straightforward reference for one pair (the upstream shape): Python loops, NumPy rows.

    Returns log ali(X0, X_t \\ i) for i in range(len(xt)), float64. Used by the tests and as the
    peer in ``benchmarks/bench_alignment.py``.
    """
    n, m = len(xt), len(x0)
    f = np.zeros((n + 1, m + 1))
    f[:, 0] = 1.0
    for k in range(1, m + 1):
        for j in range(1, n + 1):
            f[j, k] = f[j - 1, k] + (f[j - 1, k - 1] if xt[j - 1] == x0[k - 1] else 0.0)
    g = np.zeros((n + 2, m + 1))
    g[:, m] = 1.0
    for k in range(m - 1, -1, -1):
        for j in range(n - 1, -1, -1):
            g[j, k] = g[j + 1, k] + (g[j + 1, k + 1] if xt[j] == x0[k] else 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.array([(f[i] * g[i + 1]).sum() for i in range(n)]))


def alignment_count_brute_force(x0: str, y: str) -> int:
    """# index sets of ``y`` spelling ``x0`` (exponential; for tests on short strings)."""
    return sum(
        all(y[j] == c for j, c in zip(idx, x0, strict=True))
        for idx in itertools.combinations(range(len(y)), len(x0))
    )
