"""BOLD's Boolean optimiser (arXiv 2405.16339 Alg. 1, as used by MBOK): no latent FP weights.

For each Boolean tensor W ∈ {±1} (held as a float ±1 tensor whose ``.grad`` is the backprop
signal Q = ∂L/∂W): accumulator M ← β_t·M + η·Q; a weight is flipped where xnor(M, W) is TRUE
(M and W have the same sign: moving W to −W descends the loss) *and* |M| ≥ 1 (our reading of
the threshold that makes η meaningful); flipped accumulators are reset to 0. β_t = 1 − (fraction
flipped at the previous step), BOLD's adaptive decay. State: one fp32 accumulator per weight
(4 B/param) vs Adam's two moments on latent FP weights (8 B/param + 4 B latent).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["BooleanOptimizer"]


class BooleanOptimizer:
    def __init__(self, params: Iterable[torch.Tensor], lr: float = 5e-3) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("BooleanOptimizer got no parameters")
        for p in self.params:
            if not torch.all(p.detach().abs() == 1):
                raise ValueError("Boolean parameters must hold only ±1")
        self.lr = lr
        self.accum = [torch.zeros_like(p) for p in self.params]
        self.beta = 1.0
        self.last_flipped = 0

    @torch.no_grad()
    def step(self) -> int:
        """One update; returns the number of flipped weights."""
        flipped, total = 0, 0
        for p, m in zip(self.params, self.accum, strict=True):
            if p.grad is None:
                continue
            m.mul_(self.beta).add_(p.grad, alpha=self.lr)
            flip = (torch.sign(m) == p) & (m.abs() >= 1.0)
            p[flip] = -p[flip]
            m[flip] = 0.0
            flipped += int(flip.sum())
            total += p.numel()
        self.beta = 1.0 - flipped / max(total, 1)
        self.last_flipped = flipped
        return flipped

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def state_bytes(self) -> int:
        return sum(m.numel() * m.element_size() for m in self.accum)
