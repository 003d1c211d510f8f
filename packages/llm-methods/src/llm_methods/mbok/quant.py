"""Trainable MBOK layers and the baselines: RTN, OneBit-STE, BiLLM-style binarisation.

Every layer here replaces an ``nn.Linear`` (``x`` ``[..., in]`` -> ``[..., out]``) and reports
the bytes its stored form takes (:meth:`stored_bytes`, scales counted).

- :class:`MBOKTrainLinear`: W = Σ_k B_k ⊙ (s_out^k s_in^kᵀ) (MBOK's multi-kernel Eq.), SVID
  init; every kernel is trained (``kernels``, a ±1 float parameter ``[K, out, in]``): the
  gradient ∂L/∂B_k = ∂L/∂W ⊙ s_out^k s_in^kᵀ is the Boolean optimiser's signal Q of kernel k;
  all scales trainable. :meth:`to_boolean` gives the packed
  :class:`~llm_methods.mbok.model.BooleanLinear`.
- :class:`OneBitLinear` (OneBit, arXiv 2402.11295): W = sign(W_latent) ⊙ g hᵀ with a
  straight-through sign on FP latent weights, (g, h) from SVID of W (K = 1).
- :class:`RTNLinear`: round-to-nearest, ``b`` bits, asymmetric min-max per output row,
  codes stored as ``b`` bit-planes packed 8 per byte + fp16 scale and zero per row.
- :func:`billm_binarize`: BiLLM-style PTQ (arXiv 2402.04291): Hessian-salient columns get a
  residual (2-pass) binarisation, the rest are split at a searched break-point into two groups
  binarised separately; no OBC block compensation (see README Deviations).
"""

from __future__ import annotations

import torch
from torch import nn

from llm_methods.mbok.model import BooleanLinear, pack_bits, svid, unpack_bits

__all__ = [
    "MBOKTrainLinear",
    "OneBitLinear",
    "RTNLinear",
    "billm_binarize",
    "rtn_quantize",
    "sign_ste",
]


def _bias(linear: nn.Linear) -> torch.Tensor | None:
    return None if linear.bias is None else linear.bias.detach().clone()


class MBOKTrainLinear(nn.Module):
    """MBOK layer during finetuning (see module doc). ``kernels`` as returned by :func:`svid`."""

    def __init__(
        self,
        kernels: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
        bias: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        if not kernels:
            raise ValueError("number of Boolean kernels K must be >= 1, got 0")
        self.k = len(kernels)
        self.out_features, self.in_features = kernels[0][0].shape
        self.kernels = nn.Parameter(torch.stack([b for b, _, _ in kernels]).float().clone())
        self.s_out = nn.Parameter(torch.stack([o for _, o, _ in kernels]).float().clone())
        self.s_in = nn.Parameter(torch.stack([i for _, _, i in kernels]).float().clone())
        self.register_buffer("bias", bias)

    @classmethod
    def from_linear(cls, linear: nn.Linear, k: int) -> MBOKTrainLinear:
        return cls(svid(linear.weight, k), _bias(linear))

    def weight(self) -> torch.Tensor:
        """Ŵ ``[out, in]`` = Σ_k B_k ⊙ s_out^k s_in^kᵀ (differentiable in every B_k and scale)."""
        return (self.kernels * self.s_out[:, :, None] * self.s_in[:, None, :]).sum(0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, self.weight().to(x.dtype), self.bias)

    def to_boolean(self) -> BooleanLinear:
        return BooleanLinear(
            pack_bits(self.kernels.detach()),
            self.s_out.detach().clone(),
            self.s_in.detach().clone(),
            self.in_features,
            None if self.bias is None else self.bias.clone(),
        )

    def stored_bytes(self) -> int:
        return self.to_boolean().stored_bytes()


class _SignSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
        return torch.where(w >= 0, 1.0, -1.0).to(w.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
        return grad  # straight-through estimator


def sign_ste(w: torch.Tensor) -> torch.Tensor:
    """sign(w) (0 -> +1) forward, identity gradient backward."""
    return _SignSTE.apply(w)  # type: ignore[no-any-return]


class OneBitLinear(nn.Module):
    """OneBit-style layer: Ŵ = sign(W_latent) ⊙ g hᵀ, FP latent weights trained through an STE."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        ((_, g, h),) = svid(linear.weight, 1)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.latent = nn.Parameter(linear.weight.detach().float().clone())
        self.g = nn.Parameter(g.float().clone())
        self.h = nn.Parameter(h.float().clone())
        self.register_buffer("bias", _bias(linear))

    def weight(self) -> torch.Tensor:
        return sign_ste(self.latent) * self.g[:, None] * self.h[None, :]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, self.weight().to(x.dtype), self.bias)

    def to_boolean(self) -> BooleanLinear:
        """The deployed form: one packed sign kernel + (g, h), no latent weights."""
        signs = torch.where(self.latent.detach() >= 0, 1.0, -1.0)
        return BooleanLinear(
            pack_bits(signs[None]),
            self.g.detach()[None].clone(),
            self.h.detach()[None].clone(),
            self.in_features,
            None if self.bias is None else self.bias.clone(),
        )

    def stored_bytes(self) -> int:
        return self.to_boolean().stored_bytes()


def rtn_quantize(
    weight: torch.Tensor, bits: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Asymmetric min-max RTN per output row: (codes uint8 ``[out, in]`` in [0, 2^b - 1],
    scale ``[out]``, zero ``[out]``); Ŵ = (codes − zero) · scale."""
    if not isinstance(bits, int) or not 1 <= bits <= 8:
        raise ValueError(f"RTN bits must be an integer in 1..8, got {bits!r}")
    w = weight.detach().float()
    lo, hi = w.min(1).values.clamp(max=0), w.max(1).values.clamp(min=0)
    levels = 2**bits - 1
    scale = ((hi - lo) / levels).clamp(min=1e-8)
    zero = torch.round(-lo / scale)
    codes = torch.clamp(torch.round(w / scale[:, None]) + zero[:, None], 0, levels)
    return codes.to(torch.uint8), scale, zero


class RTNLinear(nn.Module):
    """RTN layer: ``bits`` packed bit-planes + fp16 scale and zero per row (dense cache)."""

    def __init__(
        self,
        planes: torch.Tensor,
        scale: torch.Tensor,
        zero: torch.Tensor,
        in_features: int,
        bias: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.register_buffer("planes", planes)  # [bits, out, ceil(in / 8)] uint8
        self.register_buffer("scale", scale.half())
        self.register_buffer("zero", zero.half())
        self.register_buffer("bias", bias)
        self._dense: torch.Tensor | None = None

    @classmethod
    def from_linear(cls, linear: nn.Linear, bits: int) -> RTNLinear:
        codes, scale, zero = rtn_quantize(linear.weight, bits)
        planes = torch.stack([pack_bits(((codes >> b) & 1).bool()) for b in range(bits)])
        return cls(planes, scale, zero, linear.in_features, _bias(linear))

    def dense_weight(self) -> torch.Tensor:
        bits = (unpack_bits(self.planes, self.in_features) + 1) / 2  # [bits, out, in] in {0, 1}
        powers = 2.0 ** torch.arange(len(self.planes), dtype=torch.float32, device=bits.device)
        codes = (bits * powers[:, None, None]).sum(0)
        return (codes - self.zero.float()[:, None]) * self.scale.float()[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._dense is None or self._dense.device != x.device:
            self._dense = self.dense_weight().to(x.device)
        return nn.functional.linear(x, self._dense.to(x.dtype), self.bias)

    def stored_bytes(self) -> int:
        tensors = [self.planes, self.scale, self.zero] + (
            [self.bias] if self.bias is not None else []
        )
        return sum(t.numel() * t.element_size() for t in tensors)


def _binarize_rows(w: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """α·sign(w) on the masked entries of each row, α = mean |w| over them (0 elsewhere)."""
    m = mask.float()
    alpha = (w.abs() * m).sum(1) / m.sum(1).clamp(min=1)
    return torch.where(w >= 0, 1.0, -1.0) * alpha[:, None] * m


def billm_binarize(
    weight: torch.Tensor,
    hessian: torch.Tensor,
    salient_fracs: tuple[float, ...] = (0.0, 0.02, 0.05, 0.1),
    breakpoints: int = 12,
    damp: float = 0.01,
) -> tuple[torch.Tensor, dict[str, float]]:
    """BiLLM-style binarisation of ``weight`` ``[out, in]`` given H = XᵀX ``[in, in]`` of
    calibration inputs. Returns (Ŵ ``[out, in]``, info with the salient column count, the
    break-point and the stored bits per weight under our accounting, see README).

    Salience of column j: Σ_i w_ij² / [H⁻¹]_jj² (BiLLM Eq. 4). Salient columns: residual
    binarisation Ŵ = α₁ sign(W) + α₂ sign(W − α₁ sign(W)). Others: |w| ≤ p and |w| > p binarised
    separately per row; p minimises the plain binarisation error (BiLLM's search), the salient
    count the H-weighted error tr(ΔW H ΔWᵀ).
    """
    w = weight.detach().float()
    out_f, in_f = w.shape
    h = hessian.float() + damp * hessian.diagonal().mean() * torch.eye(in_f, device=w.device)
    hinv_diag = torch.linalg.inv(h).diagonal().clamp(min=1e-12)
    order = torch.argsort((w**2).sum(0) / hinv_diag**2, descending=True)
    best: tuple[float, torch.Tensor, dict[str, float]] | None = None
    for frac in salient_fracs:
        n_sal = round(frac * in_f)
        sal = torch.zeros(in_f, dtype=torch.bool, device=w.device)
        sal[order[:n_sal]] = True
        sal_mask = sal[None, :].expand(out_f, in_f)
        first = _binarize_rows(w, sal_mask)
        sal_part = first + _binarize_rows(w - first, sal_mask)
        rest = w.abs()[~sal_mask]
        cands = (
            [0.0]
            if rest.numel() == 0
            else torch.quantile(
                rest[:: max(1, rest.numel() // 100_000)],
                torch.linspace(0.5, 0.98, breakpoints, device=w.device),
            ).tolist()
        )
        split: tuple[float, torch.Tensor, float] | None = None
        for p in cands:  # break-point by plain binarisation error (BiLLM's search)
            inner = ~sal_mask & (w.abs() <= p)
            approx = sal_part + _binarize_rows(w, inner) + _binarize_rows(w, ~sal_mask & ~inner)
            err = float(((w - approx) ** 2).sum())
            if split is None or err < split[0]:
                split = (err, approx, p)
        assert split is not None
        diff = w - split[1]
        err_h = float(((diff @ h) * diff).sum())  # salient count by H-weighted error
        if best is None or err_h < best[0]:
            scale_bits = 4 * out_f * 16 / (out_f * in_f)  # α₁, α₂ (salient), α of two groups
            bits = 1 + n_sal / in_f + (1 - n_sal / in_f) + 1 / out_f + scale_bits
            best = (
                err_h,
                split[1],
                {"salient_columns": float(n_sal), "breakpoint": split[2], "bits_per_weight": bits},
            )
    assert best is not None
    return best[1], best[2]
