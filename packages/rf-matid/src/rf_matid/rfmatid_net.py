"""The paper's own model, RF_MatID: frequency-aware embedding, a ConvNeXt branch and a Transformer
branch, fused (upstream ``model_zoo/RF_MatID.py``, config ``config_hub/freq_domain/all_classes/
freq_protocol_1/split_s1/mod0/RF_MatID/config.yaml``: ``d_model`` 128, ``drop_rate`` 0.2).

Input: the three-channel spectrum ``[B, 3, L]`` (upstream ``freq_data_type: three_channel``,
channels-last ``(B, L, 3)`` there): channel 0 the bin frequencies in GHz (the same for every
sample; upstream reads them from the first sample), channels 1-2 the whitened (Re, Im). With
d = ``d_model``, N = L bins::

    P      = PE((f - 4) / (43.5 - 4) * 2047)              [1, N, d]  sinusoidal, frequency positions
    E      = MLP_2->d/4->d/2->d(Re, Im) + P               [B, N, d]  (ReLU between the linears)
    S      = ConvNeXt(view_32x32(Linear_N->1024(E^T)))    [B, 384, 2, 2]  3 stages, 96/192/384 ch
    S'     = reshape(S^T) -> [B, 4*384/d, d]              (12 tokens for d = 128)
    T      = AvgPool_12(TransformerEncoder_3x(E))         [B, 12, d]  8 heads, FFN 256, post-norm
    logits = MLP_{d*(4*384/d+12)}->512->128->K(LayerNorm([S'; T]))

The ConvNeXt is the Hugging Face ``ConvNextModel(ConvNextConfig(num_channels=d, num_stages=3,
image_size=32))`` that upstream instantiates (patch 4 stem with LayerNorm; stages of 3, 3 and 9
blocks, 96/192/384 channels, stride 2 from the second stage; block = depthwise 7x7 conv,
LayerNorm, 4x pointwise MLP with GELU, layer scale 1e-6; no drop path), written here in plain
PyTorch with the same module names, so upstream's ``state_dict`` keys load as they are. Its
pooler LayerNorm (upstream replaces it with ``LayerNorm(384)``) only feeds ``pooler_output``,
which RF_MatID does not use: it is left out (768 parameters that receive no gradient; under DDP
they would stop training). Initialisation follows Hugging Face's ConvNeXt (normal(0, 0.02)
weights, zero biases) inside the ConvNeXt and PyTorch's defaults elsewhere, as upstream.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from rf_matid.spectrum_base import SpectrumClassifier

__all__ = ["ConvNeXt", "RFMatIDNet"]

CONVNEXT_WIDTHS = (96, 192, 384)  # Hugging Face ConvNextConfig hidden_sizes, first 3 stages
CONVNEXT_DEPTHS = (3, 3, 9)
CONVNEXT_IMAGE = 32  # upstream maps the N bins to a 32 x 32 "image" (Linear N -> 1024)
POOLED_TOKENS = 12  # upstream AdaptiveAvgPool1d(12) over the Transformer's tokens
BAND_GHZ = (4.0, 43.5)  # upstream PositionalEncoding(min_freq, max_freq); max_len 2048


class _ChannelsFirstLayerNorm(nn.LayerNorm):
    """LayerNorm over the channels of ``[B, C, H, W]`` (Hugging Face ``ConvNextLayerNorm``
    with ``data_format="channels_first"``), eps 1e-6."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class _ConvNeXtBlock(nn.Module):
    """``x + gamma * Linear(GELU(Linear(LN(dwconv7x7(x)))))`` on ``[B, C, H, W]``."""

    def __init__(self, dim: int, layer_scale: float = 1e-6) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.layernorm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.layer_scale_parameter = nn.Parameter(layer_scale * torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pwconv2(F.gelu(self.pwconv1(self.layernorm(y))))
        return x + (self.layer_scale_parameter * y).permute(0, 3, 1, 2)


class _ConvNeXtStage(nn.Module):
    """Optional downsampling (channels-first LayerNorm + 2x2 stride-2 conv), then blocks."""

    def __init__(self, in_ch: int, out_ch: int, depth: int, stride: int) -> None:
        super().__init__()
        self.downsampling_layer = nn.ModuleList()
        if in_ch != out_ch or stride > 1:
            self.downsampling_layer.extend(
                [
                    _ChannelsFirstLayerNorm(in_ch, eps=1e-6),
                    nn.Conv2d(in_ch, out_ch, kernel_size=stride, stride=stride),
                ]
            )
        self.layers = nn.ModuleList(_ConvNeXtBlock(out_ch) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in (*self.downsampling_layer, *self.layers):
            x = layer(x)
        return x


class _Embeddings(nn.Module):
    """Patch-4 stem: Conv2d(C, 96, 4, stride 4) + channels-first LayerNorm."""

    def __init__(self, in_ch: int, width: int, patch: int = 4) -> None:
        super().__init__()
        self.patch_embeddings = nn.Conv2d(in_ch, width, kernel_size=patch, stride=patch)
        self.layernorm = _ChannelsFirstLayerNorm(width, eps=1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layernorm(self.patch_embeddings(x))


class _Encoder(nn.Module):
    def __init__(self, widths: tuple[int, ...], depths: tuple[int, ...]) -> None:
        super().__init__()
        self.stages = nn.ModuleList(
            _ConvNeXtStage(widths[max(i - 1, 0)], widths[i], depths[i], 2 if i > 0 else 1)
            for i in range(len(widths))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for stage in self.stages:
            x = stage(x)
        return x


class ConvNeXt(nn.Module):
    """Hugging Face ``ConvNextModel``'s ``last_hidden_state`` for ``num_stages=3``:
    ``[B, in_ch, H, W]`` -> ``[B, 384, H/16, W/16]`` (module docstring)."""

    def __init__(
        self,
        in_ch: int,
        widths: tuple[int, ...] = CONVNEXT_WIDTHS,
        depths: tuple[int, ...] = CONVNEXT_DEPTHS,
    ) -> None:
        super().__init__()
        self.embeddings = _Embeddings(in_ch, widths[0])
        self.encoder = _Encoder(widths, depths)
        self.apply(_hf_init)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.embeddings(x))


def _hf_init(module: nn.Module) -> None:
    """Hugging Face ConvNeXt initialisation: normal(0, 0.02) weights and zero biases for convs
    and linears, LayerNorm (1, 0); layer scale keeps its 1e-6."""
    if isinstance(module, nn.Conv2d | nn.Linear):
        nn.init.normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class _PositionalEncoding(nn.Module):
    """Sinusoidal encoding of the bin *frequencies*: position = (f - 4) / 39.5 * 2047 (GHz),
    even columns sin(position * w_i), odd cos, w_i = 10000^(-2i/d). ``[N]`` -> ``[1, N, d]``."""

    def __init__(self, d_model: int, max_len: int = 2048) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        div = torch.exp(torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model))
        self.register_buffer("div_term", div)  # persistent, as upstream (a state_dict key)

    def forward(self, freq_ghz: torch.Tensor) -> torch.Tensor:
        low, high = BAND_GHZ
        position = ((freq_ghz - low) / (high - low) * (self.max_len - 1)).unsqueeze(1)
        encoding = torch.zeros(len(freq_ghz), self.d_model, device=freq_ghz.device)
        encoding[:, 0::2] = torch.sin(position * self.div_term)
        encoding[:, 1::2] = torch.cos(position * self.div_term)
        return encoding.unsqueeze(0)


class _LinearProjection(nn.Module):
    """(Re, Im) of each bin -> d: Linear(2, d/4), ReLU, Linear(d/4, d/2), ReLU, Linear(d/2, d)."""

    def __init__(self, d_model: int, in_features: int = 2) -> None:
        super().__init__()
        self.linear_projector = nn.Sequential(
            nn.Linear(in_features, d_model // 4),
            nn.ReLU(),
            nn.Linear(d_model // 4, d_model // 2),
            nn.ReLU(),
            nn.Linear(d_model // 2, d_model),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_projector(x)


class _SpatialFeatureExtractor(nn.Module):
    """``[B, N, d]`` -> Linear over bins to 1024 -> ``[B, d, 32, 32]`` -> ConvNeXt ->
    ``[B, 384, 4]``."""

    def __init__(self, seq_len: int, d_model: int) -> None:
        super().__init__()
        self.convnext = ConvNeXt(d_model)
        self.mapping = nn.Linear(seq_len, CONVNEXT_IMAGE * CONVNEXT_IMAGE)
        self.d_model = d_model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.mapping(x.permute(0, 2, 1))
        x = x.reshape(x.shape[0], self.d_model, CONVNEXT_IMAGE, CONVNEXT_IMAGE)
        out = self.convnext(x)
        return out.reshape(out.shape[0], out.shape[1], -1)


class RFMatIDNet(SpectrumClassifier):
    """The paper's RF_MatID (module docstring): ``[B, 3, L]`` (f in GHz, whitened Re, Im) ->
    logits ``[B, num_classes]``. Built for one ``seq_len`` (the protocol's bin count).

    Args:
        in_channels: must be 3 (the data module's ``freq_data_type: three_channel``).
        d_model: embedding width; 384 must be divisible by it and it by 8 (the heads), as
            upstream's fused-token count ``(384 // d) * 4 + 12`` assumes.
        drop_rate: dropout of the Transformer layers (upstream config 0.2).
    """

    def __init__(
        self,
        in_channels: int = 3,
        num_classes: int = 16,
        seq_len: int = 2048,
        d_model: int = 128,
        drop_rate: float = 0.2,
        num_heads: int = 8,
        num_layers: int = 3,
        dim_feedforward: int = 256,
    ) -> None:
        super().__init__()
        if in_channels != 3:
            raise ValueError(
                f"rf_matid takes the three-channel input (frequency in GHz, Re, Im), got "
                f"in_channels={in_channels}; set the data module's freq_data_type: three_channel"
            )
        width = CONVNEXT_WIDTHS[-1]
        if d_model % num_heads or width % d_model or d_model % 4:
            raise ValueError(
                f"rf_matid d_model ({d_model}) must divide {width} and be divisible by num_heads "
                f"({num_heads}) and by 4"
            )
        self.in_channels = in_channels
        self.seq_len = seq_len
        self.d_model = d_model
        self.positional_encoding = _PositionalEncoding(d_model)
        self.linear_projection = _LinearProjection(d_model)
        self.spatial_feature_extractor = _SpatialFeatureExtractor(seq_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model=d_model,
            nhead=num_heads,
            dim_feedforward=dim_feedforward,
            dropout=drop_rate,
            batch_first=True,
        )
        self.transformer_encoder = nn.TransformerEncoder(
            layer, num_layers=num_layers, enable_nested_tensor=False
        )
        self.pool = nn.AdaptiveAvgPool1d(POOLED_TOKENS)
        self.norm = nn.LayerNorm(d_model)
        tokens = (width // d_model) * 4 + POOLED_TOKENS
        self.cls_head = nn.Sequential(
            nn.Linear(d_model * tokens, 512),
            nn.ReLU(),
            nn.Linear(512, 128),
            nn.ReLU(),
            nn.Linear(128, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x)
        if x.shape[-1] != self.seq_len:
            raise ValueError(
                f"rf_matid was built for seq_len={self.seq_len} bins; got input length "
                f"{x.shape[-1]} (build it with the cropped protocol length)"
            )
        batch = x.shape[0]
        feature = self.positional_encoding(x[0, 0]) + self.linear_projection(
            x[:, 1:].transpose(1, 2)
        )  # [B, N, d]
        spatial = self.spatial_feature_extractor(feature).permute(0, 2, 1)  # [B, 4, 384]
        spatial = spatial.reshape(batch, -1, self.d_model)  # [B, 4 * 384 / d, d]
        temporal = self.transformer_encoder(feature)  # [B, N, d]
        temporal = self.pool(temporal.permute(0, 2, 1)).permute(0, 2, 1)  # [B, 12, d]
        fused = self.norm(torch.cat([spatial, temporal], dim=1))
        return self.cls_head(fused.reshape(batch, -1))
