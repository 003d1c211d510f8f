"""SCISOR denoisers: q_theta(delete position i | X_t, S) as plain ``nn.Module`` s.

Both denoisers map padded tokens (B, n), lengths (B,) and the number of remaining insertions
S (B,) to log-probabilities over positions (B, n) (``-inf`` on padding): a per-position logit from
a transformer encoder whose every layer is FiLM-modulated by an embedding of S (sinusoidal ->
MLP; the FiLM projections are zero-initialised so training starts from the unconditioned
encoder), then a softmax over positions (paper Sec. 3, the reverse-rate parameterisation).

* :class:`ScisorDenoiser`: a small ESM2-like encoder trained from scratch.
* :class:`EsmDenoiser`: an ESM2 backbone read from a local directory through transformers'
  ``EsmModel`` (the paper fine-tunes esm2_t12_35M_UR50D). transformers is imported lazily.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from bio_scisor.constants import (
    AMINO_ACIDS,
    ESM2_CLS,
    ESM2_EOS,
    ESM2_PAD,
    ESM2_TOKEN_IDS,
    PAD_INDEX,
    VOCAB_SIZE,
)
from bio_scisor.windows import DEFAULT_WINDOW

__all__ = [
    "EsmDenoiser",
    "FaesmConditioner",
    "FiLMConditioner",
    "ScisorDenoiser",
    "build_denoiser",
    "sinusoidal",
]


def sinusoidal(values: torch.Tensor, dim: int, max_period: float = 10_000.0) -> torch.Tensor:
    """Sinusoidal embedding of real ``values`` (B,) -> (B, dim) (transformer positions)."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=values.device) / half)
    angles = values.to(torch.float32)[:, None] * freqs[None, :]
    emb = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    return nn.functional.pad(emb, (0, dim - 2 * half))


class FiLMConditioner(nn.Module):
    """S -> per-layer (scale, shift): sinusoidal(S) -> MLP -> zero-initialised linear per layer."""

    def __init__(self, width: int, n_layers: int, cond_dim: int = 64) -> None:
        super().__init__()
        self.cond_dim = cond_dim
        self.mlp = nn.Sequential(
            nn.Linear(cond_dim, cond_dim), nn.SiLU(), nn.Linear(cond_dim, cond_dim), nn.SiLU()
        )
        self.films = nn.ModuleList(nn.Linear(cond_dim, 2 * width) for _ in range(n_layers))
        for film in self.films:
            nn.init.zeros_(film.weight)
            nn.init.zeros_(film.bias)

    def forward(self, s: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(B,) -> per layer ((B, 1, width) scale, (B, 1, width) shift)."""
        c = self.mlp(sinusoidal(s, self.cond_dim))
        return [tuple(f(c)[:, None, :].chunk(2, dim=-1)) for f in self.films]  # type: ignore[misc]


class FaesmConditioner(nn.Module):
    """Upstream's S conditioning (``TimestepEmbedderNew`` + ``film_layers`` of its FAESM encoder),
    so that released checkpoints load (:mod:`bio_scisor.official`).

    S (B,) -> Fourier features [cos(S f_k), sin(S f_k)] with f_k = 2 * 3.14159 *
    exp(-log(10^4) (k - K/3) / K), k < K = freq_dim / 2 (upstream's frequencies, its 3.14159
    included) -> Linear(freq_dim, cond_dim) -> SiLU -> Linear(cond_dim, cond_dim) -> SiLU ->
    per layer Linear(cond_dim, 2 width) -> (scale, shift), each (B, 1, width).
    """

    def __init__(
        self, width: int, n_layers: int, cond_dim: int = 128, freq_dim: int = 1280
    ) -> None:
        super().__init__()
        self.freq_dim = freq_dim
        self.mlp = nn.Sequential(
            nn.Linear(freq_dim, cond_dim), nn.SiLU(), nn.Linear(cond_dim, cond_dim)
        )
        self.films = nn.ModuleList(nn.Linear(cond_dim, 2 * width) for _ in range(n_layers))

    def features(self, s: torch.Tensor) -> torch.Tensor:
        half = self.freq_dim // 2
        k = torch.arange(half, dtype=torch.float32, device=s.device)
        freqs = 2 * 3.14159 * torch.exp(-math.log(10_000.0) * (k - half / 3) / half)
        angles = s.to(torch.float32)[:, None] * freqs[None, :]
        emb = torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)
        return nn.functional.pad(emb, (0, self.freq_dim - 2 * half))

    def forward(self, s: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        c = nn.functional.silu(self.mlp(self.features(s)))
        return [tuple(f(c)[:, None, :].chunk(2, dim=-1)) for f in self.films]  # type: ignore[misc]


def _positions_log_softmax(logits: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    valid = torch.arange(logits.shape[1], device=logits.device)[None, :] < lengths[:, None]
    return torch.log_softmax(logits.masked_fill(~valid, -math.inf), dim=1)


class ScisorDenoiser(nn.Module):
    """Small pre-LayerNorm transformer encoder with FiLM on S in every layer.

    forward(tokens (B, n) int64, lengths (B,), s (B,)) -> log q(i | X_t, S) (B, n).
    """

    def __init__(
        self,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        d_ff: int = 128,
        dropout: float = 0.0,
        cond_dim: int = 64,
        window_size: int | None = DEFAULT_WINDOW,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.window_size = window_size
        self.embed = nn.Embedding(VOCAB_SIZE, d_model, padding_idx=PAD_INDEX)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                d_model, n_heads, d_ff, dropout, batch_first=True, norm_first=True
            )
            for _ in range(n_layers)
        )
        self.film = FiLMConditioner(d_model, n_layers, cond_dim)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 1)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        pos = sinusoidal(torch.arange(n, device=tokens.device), self.d_model)
        h = self.embed(tokens) + pos[None]
        pad = torch.arange(n, device=tokens.device)[None, :] >= lengths[:, None]
        for layer, (scale, shift) in zip(self.layers, self.film(s), strict=True):
            h = layer(h, src_key_padding_mask=pad)
            h = h * (1.0 + scale) + shift
        return _positions_log_softmax(self.head(self.norm(h)).squeeze(-1), lengths)


class EsmDenoiser(nn.Module):
    """ESM2 backbone (local ``EsmModel`` directory, never downloaded) + FiLM + position head.

    FiLM modulates the output of every ESM layer through forward hooks (before the final
    ``emb_layer_norm_after``, as upstream's FAESM encoder). Tokens are mapped to the ESM2 alphabet
    and wrapped in <cls> ... <eos>; the head reads the residue positions only. ``config`` (an
    ``EsmConfig``) builds a randomly initialised backbone instead of reading ``backbone_path``;
    ``conditioner="faesm"`` uses upstream's S embedding (:class:`FaesmConditioner`), the default
    ``"mlp"`` ours (:class:`FiLMConditioner`).
    """

    def __init__(
        self,
        backbone_path: str | Path | None = None,
        cond_dim: int = 64,
        window_size: int | None = DEFAULT_WINDOW,
        *,
        config: object | None = None,
        conditioner: str = "mlp",
    ) -> None:
        super().__init__()
        from transformers import EsmModel

        self.window_size = window_size
        if config is not None:
            self.backbone = EsmModel(config, add_pooling_layer=False)
        else:
            path = Path(str(backbone_path))
            if backbone_path is None or not (path / "config.json").is_file():
                raise FileNotFoundError(f"{path}: no EsmModel directory (config.json missing)")
            self.backbone = EsmModel.from_pretrained(
                str(path), local_files_only=True, add_pooling_layer=False
            )
        width = self.backbone.config.hidden_size
        layers = self.backbone.encoder.layer
        if conditioner == "mlp":
            self.film: nn.Module = FiLMConditioner(width, len(layers), cond_dim)
        elif conditioner == "faesm":
            self.film = FaesmConditioner(width, len(layers), cond_dim)
        else:
            raise ValueError(f"conditioner must be 'mlp' or 'faesm', got {conditioner!r}")
        self.head = nn.Linear(width, 1)
        lut = torch.full((VOCAB_SIZE,), ESM2_PAD, dtype=torch.long)
        for i, a in enumerate(AMINO_ACIDS):
            lut[i] = ESM2_TOKEN_IDS[a]
        self.register_buffer("lut", lut, persistent=False)
        self._films: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        for index, layer in enumerate(layers):
            layer.register_forward_hook(self._hook(index))

    def _hook(self, index: int):  # type: ignore[no-untyped-def]
        def hook(module, inputs, output):  # type: ignore[no-untyped-def]
            if self._films is None:
                return output
            scale, shift = self._films[index]
            if isinstance(output, tuple):
                return (output[0] * (1.0 + scale) + shift, *output[1:])
            return output * (1.0 + scale) + shift

        return hook

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        bsz, n = tokens.shape
        ids = torch.full((bsz, n + 2), ESM2_PAD, dtype=torch.long, device=tokens.device)
        ids[:, 0] = ESM2_CLS
        ids[:, 1 : n + 1] = self.lut[tokens]
        ids[torch.arange(bsz, device=tokens.device), lengths + 1] = ESM2_EOS
        self._films = self.film(s)
        try:
            hidden = self.backbone(input_ids=ids, attention_mask=(ids != ESM2_PAD).long())
        finally:
            self._films = None
        logits = self.head(hidden.last_hidden_state[:, 1 : n + 1]).squeeze(-1)
        return _positions_log_softmax(logits, lengths)


def build_denoiser(
    backbone: str = "scratch", esm_path: str | None = None, **kwargs: int | float | None
) -> nn.Module:
    """``backbone="scratch"`` -> :class:`ScisorDenoiser` (kwargs), ``"esm"`` -> EsmDenoiser.

    ``window_size`` (default 2048, as upstream; ``None`` never windows) is read by
    :func:`bio_scisor.windows.denoiser_log_q` wherever the denoiser is applied.
    """
    if backbone == "scratch":
        return ScisorDenoiser(**kwargs)  # type: ignore[arg-type]
    if backbone == "esm":
        if not esm_path:
            raise ValueError("backbone='esm' needs esm_path (a local EsmModel directory)")
        window = kwargs.get("window_size", DEFAULT_WINDOW)
        return EsmDenoiser(
            esm_path,
            cond_dim=int(kwargs.get("cond_dim", 64)),
            window_size=None if window is None else int(window),
        )
    raise ValueError(f"unknown backbone {backbone!r}; expected 'scratch' or 'esm'")
