"""The push-away objective (paper Sec. 4.3): L = L_CE + λ · (−d_avg). Plain torch, no Lightning.

d_avg is the dispersion of last-layer hidden states (HF ``hidden_states[-1]``, as measured):

- ``mode="single"`` (single-domain): ``scope="sequence"`` averages the within-sequence D over the
  batch's sequences (the quantity the correlation study measures); ``scope="batch"`` pools every
  real token of the batch into one set;
- ``mode="cross"`` (cross-domain A×B): 1 − mean cos between the tokens of sequences from
  different domains, averaged over the domain pairs present in the batch, so representations of
  different domains are pushed apart. Both are O(B·T·d) via the sum-of-unit-vectors identity.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from llm_methods.dispersion.metrics import cross_mean_cosine, dispersion

__all__ = ["MODES", "SCOPES", "PushAwayLoss"]

MODES = ("single", "cross")
SCOPES = ("sequence", "batch")


class PushAwayLoss(nn.Module):
    """``forward(hidden [B, T, d], mask [B, T], domains [B] | None) -> (λ·(−d_avg), d_avg)``."""

    def __init__(self, lam: float = 0.1, mode: str = "single", scope: str = "sequence") -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"push-away mode must be one of {MODES}, got {mode!r}")
        if scope not in SCOPES:
            raise ValueError(f"push-away scope must be one of {SCOPES}, got {scope!r}")
        if lam < 0:
            raise ValueError(f"push-away lambda must be >= 0, got {lam}")
        self.lam, self.mode, self.scope = float(lam), mode, scope

    def d_avg(
        self, hidden: torch.Tensor, mask: torch.Tensor, domains: torch.Tensor | None = None
    ) -> torch.Tensor:
        if self.mode == "cross":
            if domains is None:
                raise ValueError("cross-domain push-away needs a domain label per sequence")
            labels = domains.unique()
            pairs = [(a, b) for i, a in enumerate(labels) for b in labels[i + 1 :]]
            if not pairs:  # one domain in this batch: nothing to push apart
                return hidden.new_zeros(())
            sets = {int(k): hidden[domains == k][mask[domains == k].bool()] for k in labels}
            return torch.stack(
                [1.0 - cross_mean_cosine(sets[int(a)], sets[int(b)]) for a, b in pairs]
            ).mean()
        if self.scope == "batch":
            return dispersion(hidden[mask.bool()])
        return dispersion(hidden, mask).mean()

    def forward(
        self, hidden: torch.Tensor, mask: torch.Tensor, domains: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        d = self.d_avg(hidden, mask, domains)
        return -self.lam * d, d.detach()

    def as_extra_loss(self) -> Any:
        """Adapter for :func:`llm_methods.lm.train.train_lm` (single-domain modes)."""

        def extra(
            outputs: Any, ids: torch.Tensor, mask: torch.Tensor
        ) -> tuple[torch.Tensor, dict[str, float]]:
            term, d = self(outputs.hidden_states[-1], mask)
            return term, {"d_avg": float(d)}

        return extra
