"""Representation dispersion (Li et al., arXiv 2506.24106, Sec. 2) in O(n d).

D = 1 − mean_{i<j} cos(h_i, h_j) over the n hidden vectors of a chunk. With u_i = h_i/‖h_i‖ and
s = Σ_i u_i, Σ_{i≠j} u_i·u_j = ‖s‖² − Σ_i ‖u_i‖², so

    mean_{i<j} cos = (‖s‖² − Σ_i ‖u_i‖²) / (n (n − 1))          (Σ‖u_i‖² = n for non-zero h_i)

which needs one pass and O(d) memory instead of the n×n Gram matrix (the official code builds
the Gram matrix and averages its upper triangle; :func:`mean_pairwise_cosine_gram` does the same
and is kept for the equality test and the benchmark). Zero vectors count as cosine 0 in both.
The cross-domain form (mean cos between the vectors of sets A and B) is (Σu_a)·(Σu_b)/(n_a n_b).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = [
    "DispersionAccumulator",
    "cross_mean_cosine",
    "dispersion",
    "mean_pairwise_cosine",
    "mean_pairwise_cosine_gram",
]


def _units(h: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    u = F.normalize(h.float(), dim=-1)
    if mask is None:
        count = torch.full(h.shape[:-2], h.shape[-2], dtype=u.dtype, device=u.device)
    else:
        m = mask.to(u.dtype)
        if m.shape != h.shape[:-1]:
            raise ValueError(f"mask shape {tuple(m.shape)} != hidden shape {tuple(h.shape[:-1])}")
        u = u * m[..., None]
        count = m.sum(-1)
    return u, count


def mean_pairwise_cosine(h: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean cosine over distinct pairs of the vectors along axis -2: ``[..., n, d] -> [...]``.

    ``mask`` ``[..., n]`` (1 = real token) excludes padding. Needs n >= 2 real vectors (NaN else).
    Differentiable (used by the push-away loss).
    """
    u, n = _units(h, mask)
    s = u.sum(-2)
    self_dots = (u * u).sum((-2, -1))
    return ((s * s).sum(-1) - self_dots) / (n * (n - 1))


def mean_pairwise_cosine_gram(h: torch.Tensor) -> torch.Tensor:
    """Reference O(n² d) version for one ``[n, d]`` set: mean of the Gram matrix's upper triangle
    (what the official ``step3_compute_dispersion_and_plot.py`` computes)."""
    u = F.normalize(h.float(), dim=-1)
    gram = u @ u.T
    iu = torch.triu_indices(len(u), len(u), offset=1, device=u.device)
    return gram[iu[0], iu[1]].mean()


def dispersion(h: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """D = 1 − mean pairwise cosine (see :func:`mean_pairwise_cosine`)."""
    return 1.0 - mean_pairwise_cosine(h, mask)


def cross_mean_cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Mean cos(a_i, b_j) over all pairs of ``a`` ``[n_a, d]`` and ``b`` ``[n_b, d]``, in
    O((n_a + n_b) d)."""
    ua, ub = F.normalize(a.float(), dim=-1), F.normalize(b.float(), dim=-1)
    return (ua.sum(0) @ ub.sum(0)) / (len(ua) * len(ub))


class DispersionAccumulator:
    """Streaming D over any number of vectors added in blocks (float64 sums, O(d) memory)."""

    def __init__(self) -> None:
        self.sum: torch.Tensor | None = None
        self.self_dots = 0.0
        self.count = 0

    def add(self, h: torch.Tensor) -> None:
        u = F.normalize(h.reshape(-1, h.shape[-1]).double(), dim=-1)
        s = u.sum(0)
        self.sum = s if self.sum is None else self.sum + s
        self.self_dots += float((u * u).sum())
        self.count += len(u)

    def value(self) -> float:
        if self.sum is None or self.count < 2:
            raise ValueError("dispersion needs at least 2 vectors")
        n = self.count
        mean_cos = (float(self.sum @ self.sum) - self.self_dots) / (n * (n - 1))
        return 1.0 - mean_cos
