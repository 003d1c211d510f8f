"""Multi-kernel Boolean weights (MBOK, arXiv 2505.22811; BOLD, arXiv 2405.16339).

A weight ``W`` ``[out, in]`` is represented as W ≈ Σ_k B_k ⊙ (s_out^k s_in^kᵀ), B_k ∈ {±1}
(the paper's Eq. for K kernels). SVID initialisation: B_1 = sign(W), (s_out, s_in) the rank-1
SVD of |W|; then the same on the residual R_k = W − Σ_{j<k} B_j ⊙ s_out^j s_in^jᵀ for k = 2..K.
Boolean kernels are stored bit-packed, 8 weights per byte (:func:`pack_bits`), so the stored
bytes are real. :class:`BooleanLinear` unpacks once into a dense cache and does one matmul.

Training-time layers and baselines: :mod:`~llm_methods.mbok.quant`; finetuning and
save/load: :mod:`~llm_methods.mbok.distill`.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["BooleanLinear", "bits_per_weight", "pack_bits", "svid", "unpack_bits"]


def pack_bits(signs: torch.Tensor) -> torch.Tensor:
    """±1 (or bool, True = +1) tensor ``[..., n]`` -> uint8 ``[..., ceil(n / 8)]``, LSB first."""
    bits = (signs > 0) if signs.dtype != torch.bool else signs
    n = bits.shape[-1]
    pad = (-n) % 8
    if pad:
        bits = torch.nn.functional.pad(bits, (0, pad))
    bits = bits.reshape(*bits.shape[:-1], -1, 8).to(torch.uint8)
    weights = (2 ** torch.arange(8, dtype=torch.uint8)).to(bits.device)
    return (bits * weights).sum(-1, dtype=torch.uint8)


def unpack_bits(packed: torch.Tensor, n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Inverse of :func:`pack_bits`: ±1 values ``[..., n]`` of ``dtype``."""
    shifts = torch.arange(8, dtype=torch.uint8, device=packed.device)
    bits = (packed[..., None] >> shifts) & 1
    bits = bits.reshape(*packed.shape[:-1], -1)[..., :n]
    return bits.to(dtype) * 2 - 1


def svid(weight: torch.Tensor, k: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """K kernels (signs ±1 ``[out, in]``, s_out ``[out]``, s_in ``[in]``) by successive SVID on
    the residual; raises ``ValueError`` for ``k < 1``."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"number of Boolean kernels K must be >= 1, got {k!r}")
    residual = weight.detach().float().clone()
    out = []
    for _ in range(k):
        signs = torch.where(residual >= 0, 1.0, -1.0)
        u, s, vh = torch.linalg.svd(residual.abs(), full_matrices=False)
        s_out, s_in = u[:, 0] * s[0].sqrt(), vh[0] * s[0].sqrt()
        if s_out.sum() < 0:  # the rank-1 factor of a non-negative matrix is sign-symmetric
            s_out, s_in = -s_out, -s_in
        out.append((signs, s_out, s_in))
        residual = residual - signs * torch.outer(s_out, s_in)
    return out


def bits_per_weight(out_features: int, in_features: int, k: int, scale_bits: int = 16) -> float:
    """K sign bits per weight plus the K (out + in) scale vectors at ``scale_bits`` each."""
    n = out_features * in_features
    return (k * n + k * (out_features + in_features) * scale_bits) / n


class BooleanLinear(nn.Module):
    """Inference layer: ``y = x Ŵᵀ + b`` with Ŵ = Σ_k unpack(B_k) ⊙ s_out^k s_in^kᵀ, unpacked
    once into a dense cache (``x`` ``[..., in]`` -> ``[..., out]``)."""

    def __init__(
        self,
        packed: torch.Tensor,
        s_out: torch.Tensor,
        s_in: torch.Tensor,
        in_features: int,
        bias: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        if packed.dim() != 3 or packed.shape[0] < 1:
            raise ValueError("packed kernels must be [K >= 1, out, ceil(in / 8)] uint8")
        self.in_features = in_features
        self.register_buffer("packed", packed)
        self.register_buffer("s_out", s_out)
        self.register_buffer("s_in", s_in)
        self.register_buffer("bias", bias)
        self._dense: torch.Tensor | None = None

    @classmethod
    def from_linear(cls, linear: nn.Linear, k: int) -> BooleanLinear:
        kernels = svid(linear.weight, k)
        packed = torch.stack([pack_bits(b) for b, _, _ in kernels])
        s_out = torch.stack([o for _, o, _ in kernels])
        s_in = torch.stack([i for _, _, i in kernels])
        bias = None if linear.bias is None else linear.bias.detach().clone()
        return cls(packed, s_out, s_in, linear.in_features, bias)

    def dense_weight(self) -> torch.Tensor:
        signs = unpack_bits(self.packed, self.in_features, self.s_out.dtype)
        return (signs * self.s_out[:, :, None] * self.s_in[:, None, :]).sum(0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._dense is None or self._dense.device != x.device:
            self._dense = self.dense_weight().to(x.device)
        return nn.functional.linear(x, self._dense.to(x.dtype), self.bias)

    def stored_bytes(self) -> int:
        """Bytes of the stored representation (packed signs + scales + bias), not the cache."""
        tensors = [self.packed, self.s_out, self.s_in] + (
            [self.bias] if self.bias is not None else []
        )
        return sum(t.numel() * t.element_size() for t in tensors)
