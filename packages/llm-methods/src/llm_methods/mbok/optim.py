"""BOLD's Boolean optimiser (arXiv 2405.16339 Alg. 1, as used by MBOK): no latent FP weights.

For each Boolean tensor W ∈ {±1} (held as a float ±1 tensor whose ``.grad`` is the backprop
signal Q = ∂L/∂W, the Boolean variation of the loss in BOLD's mixed logic):

    q̃ = Q / mean|Q|                      (per tensor; ``normalize=False`` keeps Q as it is)
    M ← β·M + η·q̃
    flip W where M·W ≥ 1                  (xnor(M, W) TRUE and |M| ≥ 1), then M ← 0 there
    β ← 1 − (fraction of the tensor flipped at this step)

The threshold |M| ≥ 1 and the per-tensor β are those of the public BOLD-style optimisers, which
take integer counts of Boolean variations as Q (shapes and rule checked against their code, not
copied). With a real-valued Q (an LLM's loss gradient, whose scale depends on the token count,
the loss weights and the layer) a fixed η means nothing: at MBOK's η = 5e-3 on SmolLM2 not one
weight reached the threshold. Normalising Q by its per-tensor mean magnitude (our choice, issue
27) makes η the accumulated step in units of the mean variation, the same on every model and
layer: a weight flips once its accumulated, sign-consistent variation reaches 1/η mean
variations. State: one fp32 accumulator per Boolean weight (4 B/weight).

``per_slice=True`` treats each leading slice ``p[k]`` of a parameter as its own Boolean tensor
(its own mean|Q|, accumulator and β): MBOK's layer holds its K kernels in one ``[K, out, in]``
parameter, and each kernel W_bool^k is a tensor of its own in the method (issue 27 review #5:
pooling the K kernels let kernel 1's larger s_out s_inᵀ set the normalisation of all of them).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["BooleanOptimizer"]


class BooleanOptimizer:
    """Boolean optimiser over float ±1 tensors (see the module doc); ``step`` returns the number
    of weights flipped, ``flip_fraction`` their share of all Boolean weights."""

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 0.01,
        normalize: bool = True,
        per_slice: bool = False,
    ) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("BooleanOptimizer got no parameters")
        for p in self.params:
            if not torch.all(p.detach().abs() == 1):
                raise ValueError("Boolean parameters must hold only ±1")
        if not lr > 0:
            raise ValueError(f"Boolean learning rate must be > 0, got {lr}")
        self.lr = float(lr)
        self.normalize = normalize
        # the Boolean tensors: (parameter, slice index or None for the whole parameter)
        self.units: list[tuple[torch.Tensor, int | None]] = [
            (p, k) for p in self.params for k in (range(p.shape[0]) if per_slice else [None])
        ]
        self.accum = [torch.zeros_like(p if k is None else p[k]) for p, k in self.units]
        self.betas = [1.0] * len(self.units)
        self.last_flipped = 0
        self.total = sum(p.numel() for p in self.params)

    @torch.no_grad()
    def step(self) -> int:
        """One update; returns the number of flipped weights."""
        flipped = 0
        for i, ((param, k), m) in enumerate(zip(self.units, self.accum, strict=True)):
            if param.grad is None:
                continue
            p = param if k is None else param[k]
            q = param.grad if k is None else param.grad[k]
            if self.normalize:
                scale = q.abs().mean()
                q = q / scale if scale > 0 else torch.zeros_like(q)
            m.mul_(self.betas[i]).add_(q, alpha=self.lr)
            flip = m * p >= 1.0
            p[flip] = -p[flip]
            m[flip] = 0.0
            n = int(flip.sum())
            self.betas[i] = 1.0 - n / p.numel()
            flipped += n
        self.last_flipped = flipped
        return flipped

    @property
    def flip_fraction(self) -> float:
        return self.last_flipped / max(self.total, 1)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def state_bytes(self) -> int:
        return sum(m.numel() * m.element_size() for m in self.accum)
