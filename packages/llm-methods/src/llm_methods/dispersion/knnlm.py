"""kNN-LM (Khandelwal et al. 2020) with exact search, for the layer-selection study (Sec. 4.2).

Datastore: key = a hidden vector at position t, value = the token at t + 1. For a query q the
neighbour distribution is p_kNN(w) ∝ Σ_{j ∈ kNN(q), v_j = w} exp(−‖q − k_j‖² / T), and the model
predicts p = λ p_kNN + (1 − λ) p_LM. Search is exact (``torch.cdist`` over query blocks) rather
than FAISS: the datastores here have tens of thousands of keys.
"""

from __future__ import annotations

import math

import torch

__all__ = ["KNNLM", "interpolated_perplexity"]


class KNNLM:
    """Exact kNN over ``keys`` ``[N, d]`` with next-token ``values`` ``[N]``."""

    def __init__(
        self, keys: torch.Tensor, values: torch.Tensor, k: int = 32, temperature: float = 1.0
    ) -> None:
        if keys.dim() != 2 or len(keys) != len(values):
            raise ValueError(f"keys {tuple(keys.shape)} and values {tuple(values.shape)} mismatch")
        if not 1 <= k <= len(keys):
            raise ValueError(f"k={k} must be in 1..{len(keys)} (datastore size)")
        self.keys = keys.float()
        self.values = values.long()
        self.k = k
        self.temperature = temperature

    def target_logprobs(
        self, queries: torch.Tensor, targets: torch.Tensor, block: int = 512
    ) -> torch.Tensor:
        """log p_kNN(target | query) ``[M]`` (−inf when no neighbour carries the target)."""
        out = []
        for start in range(0, len(queries), block):
            q = queries[start : start + block].float()
            d2 = torch.cdist(q, self.keys).pow(2)
            dist, idx = torch.topk(d2, self.k, dim=1, largest=False)
            logw = torch.log_softmax(-dist / self.temperature, dim=1)
            hit = self.values[idx] == targets[start : start + block, None]
            logw = logw.masked_fill(~hit, -math.inf)
            out.append(torch.logsumexp(logw, dim=1))
        return torch.cat(out)


def interpolated_perplexity(
    lm_logprobs: torch.Tensor, knn_logprobs: torch.Tensor, lam: float
) -> float:
    """exp(−mean log(λ p_kNN + (1 − λ) p_LM)) over target tokens (log-space, stable)."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda must be in [0, 1], got {lam}")
    parts = [
        lm_logprobs.double() + math.log1p(-lam) if lam < 1 else None,
        knn_logprobs.double() + math.log(lam) if lam > 0 else None,
    ]
    mix = torch.logsumexp(torch.stack([p for p in parts if p is not None]), dim=0)
    return float(torch.exp(-mix.mean()))
