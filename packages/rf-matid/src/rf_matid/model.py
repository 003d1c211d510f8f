"""The RF-MatID models: the 1-D baselines, the paper's RF_MatID, and the per-sample complex
whitening they consume.

Architectures follow upstream ``model_zoo/{Material_ID,ResNet50,BiLSTM,transformer1d,MLP}.py``
with the defaults of ``config_hub/freq_domain/all_classes/freq_protocol_1/split_s1/mod0/<Model>/
config.yaml``; RF_MatID (``model_zoo/RF_MatID.py``) lives in :mod:`rf_matid.rfmatid_net`. Every
baseline maps a channels-first spectrum ``[B, C=2, L]`` (real, imaginary after
:func:`complex_whiten`) to logits ``[B, num_classes]`` for any length ``L`` (protocol crops give
700..2048 bins); the MLP and RF_MatID are built for one ``seq_len``, and RF_MatID takes three
channels (frequency in GHz, Re, Im; :data:`INPUT_FORMATS`).

Upstream feeds channels-last ``(B, L, 2)``: MaterialID1D permutes and ResNet50 transposes to
channels-first, BiLSTM and Transformer1D consume channels-last, the MLP flattens ``(L, 2)``
interleaved. Here every model takes channels-first and does the matching transposition itself.

This module does not import Lightning.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from rf_matid.rfmatid_net import RFMatIDNet
from rf_matid.spectrum_base import SpectrumClassifier

__all__ = [
    "INPUT_FORMATS",
    "MLP",
    "MODELS",
    "UPSTREAM_TRAINING",
    "BiLSTM",
    "MaterialIDCNN",
    "RFMatIDNet",
    "ResNet1D",
    "Transformer1D",
    "build_model",
    "complex_whiten",
    "count_parameters",
    "sinusoidal_positions",
]


def complex_whiten(x: torch.Tensor | np.ndarray, eps: float = 1e-6) -> torch.Tensor:
    """Per-sample complex (ZCA) whitening, upstream ``RFMatID_Freq_Dataset.standardize_complex_whiten``.

    Treats the F bins of one sample as F draws of the 2-vector (Re, Im): subtracts their mean and
    multiplies by ``C^{-1/2} = V diag(λ^{-1/2}) V^T`` of their covariance ``C`` (unbiased, ``/(F-1)``
    as upstream), so each sample has zero mean and identity 2x2 covariance.

    Upstream divides by ``sqrt(λ)`` unguarded, which gives inf/NaN when ``C`` is singular (a
    constant or purely real spectrum). Here eigenvalues are floored at ``eps · λ_max`` and at
    ``1e-20 · mean |x|^2``, so a degenerate direction stays finite (≈0) instead; the covariance
    is then the identity only in the non-degenerate directions. Computed in float64.

    Args:
        x: complex ``[..., F]`` or real ``[..., 2, F]`` (Re, Im on the second-to-last axis).
        eps: relative eigenvalue floor.

    Returns:
        float32 ``[..., 2, F]``, channels-first (upstream returns channels-last ``(F, 2)``).
    """
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        x = np.array(x)  # read-only memmaps: torch.as_tensor would warn about sharing them
    tensor = torch.as_tensor(x)
    if tensor.is_complex():
        pair = torch.stack((tensor.real, tensor.imag), dim=-2)
    elif tensor.ndim >= 2 and tensor.shape[-2] == 2:
        pair = tensor
    else:
        raise ValueError(
            "complex_whiten expects a complex tensor [..., F] or a real tensor [..., 2, F]; "
            f"got dtype {tensor.dtype} with shape {tuple(tensor.shape)}"
        )
    num_bins = pair.shape[-1]
    if num_bins < 2:
        raise ValueError(f"complex_whiten needs at least 2 frequency bins, got {num_bins}")
    pair = pair.to(torch.float64)
    centered = pair - pair.mean(dim=-1, keepdim=True)
    covariance = centered @ centered.transpose(-1, -2) / (num_bins - 1)
    eigvals, eigvecs = torch.linalg.eigh(covariance)
    # Floors: relative to the largest eigenvalue, and 1e-20 · E|x|^2, far below any variance a
    # float32 input can resolve (~1e-15 · E|x|^2) but above float64 round-off of the mean.
    power = pair.square().sum(dim=-2).mean(dim=-1, keepdim=True)
    floor = torch.maximum(eps * eigvals[..., -1:], 1e-20 * power)
    floor = floor.clamp_min(torch.finfo(torch.float64).tiny)
    inv_sqrt = eigvals.clamp_min(floor).rsqrt()
    whitening = eigvecs @ torch.diag_embed(inv_sqrt) @ eigvecs.transpose(-1, -2)
    return (whitening @ centered).to(torch.float32)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


class MaskDropout(nn.Dropout):
    """Element-wise inverted dropout with ``nn.Dropout``'s distribution and state (none): in
    training each element is kept with probability ``1 - p`` and scaled by ``1 / (1 - p)``.
    ``x``: any shape -> the same shape.

    On the CPU the keep mask is ``torch.rand_like(x) >= p`` instead of ``bernoulli_``:
    PyTorch's CPU ``bernoulli_`` draws one element at a time (about 3x slower than
    ``rand_like``) and was 18 % of a MaterialID CNN training step (BENCHMARKS.md, issue 39).
    The distribution is the same, the draws differ. On other devices it is ``nn.Dropout``
    (PyTorch's fused kernel)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or x.device.type != "cpu":
            return super().forward(x)
        if self.p == 1.0:
            return x * 0.0
        # the scaled keep mask built in place in the uniform draws' buffer (1/(1-p) where kept,
        # 0 elsewhere): the values of `(rand_like(x) >= p).to(x.dtype) * (1/(1-p))` without
        # the bool tensor and two more full-size passes
        mask = torch.rand_like(x).ge_(self.p).mul_(1.0 / (1.0 - self.p))
        return x * mask


class _ConvBNReLU(nn.Sequential):
    """Conv1d (no bias) -> BatchNorm -> ReLU -> Dropout, upstream ``ConvBNReLU1D`` (the
    dropout is :class:`MaskDropout`, ``nn.Dropout``'s distribution drawn faster on the CPU)."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int, dropout: float) -> None:
        super().__init__(
            nn.Conv1d(in_ch, out_ch, kernel, stride=stride, padding=(kernel - 1) // 2, bias=False),
            nn.BatchNorm1d(out_ch),
            nn.ReLU(inplace=True),
            MaskDropout(dropout),
        )


class MaterialIDCNN(SpectrumClassifier):
    """Material-ID 1-D CNN, upstream ``MaterialID1D``.

    5 strided conv blocks (kernels 7,5,5,3,3, stride 2, widths b,2b,4b,8b,8b) then a 3-block
    conv classifier head (kernel 3, width 8b), global average pooling over length and a linear
    layer. ``x``: ``[B, in_channels, L]`` -> logits ``[B, num_classes]``.
    """

    def __init__(
        self,
        in_channels: int = 2,
        num_classes: int = 16,
        seq_len: int = 2048,
        base_channels: int = 32,
        dropout: float = 0.2,
    ) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.seq_len = seq_len  # unused: any length works; kept for a uniform constructor
        b = base_channels
        widths = (in_channels, b, 2 * b, 4 * b, 8 * b, 8 * b)
        kernels = (7, 5, 5, 3, 3)
        self.features = nn.Sequential(
            *(
                _ConvBNReLU(widths[i], widths[i + 1], kernels[i], 2, dropout)
                for i in range(len(kernels))
            )
        )
        self.head = nn.Sequential(*(_ConvBNReLU(8 * b, 8 * b, 3, 1, dropout) for _ in range(3)))
        self.fc = nn.Linear(8 * b, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x)
        z = self.head(self.features(x))
        return self.fc(z.mean(dim=-1))


class _Bottleneck1D(nn.Module):
    """ResNet bottleneck (1x1 -> 3 (strided) -> 1x1, expansion 4), upstream ``Bottleneck1D``."""

    expansion = 4

    def __init__(self, in_ch: int, width: int, stride: int) -> None:
        super().__init__()
        out_ch = width * self.expansion
        self.body = nn.Sequential(
            nn.Conv1d(in_ch, width, 1, bias=False),
            nn.BatchNorm1d(width),
            nn.ReLU(inplace=True),
            nn.Conv1d(width, width, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm1d(width),
            nn.ReLU(inplace=True),
            nn.Conv1d(width, out_ch, 1, bias=False),
            nn.BatchNorm1d(out_ch),
        )
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(
                nn.Conv1d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm1d(out_ch)
            )
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


class ResNet1D(SpectrumClassifier):
    """1-D bottleneck ResNet, upstream ``ResNet50`` / ``resnet50_1d`` (defaults: ResNet-50).

    Stem: conv7/2 -> BN -> ReLU -> maxpool3/2 (upstream omits the ReLU, see ``stem_relu``); then
    stages of ``blocks[i]`` bottlenecks of width ``base_width · 2^i`` (stride 2 from the second
    stage on), global average pooling and a linear layer.
    ``x``: ``[B, in_channels, L]`` -> logits ``[B, num_classes]``.
    """

    def __init__(
        self,
        in_channels: int = 2,
        num_classes: int = 16,
        seq_len: int = 2048,
        blocks: Sequence[int] = (3, 4, 6, 3),
        base_width: int = 64,
        stem_relu: bool = True,
    ) -> None:
        super().__init__()
        if len(blocks) == 0 or any(n < 1 for n in blocks):
            raise ValueError(
                f"ResNet1D blocks must be a non-empty list of positive ints, got {blocks}"
            )
        self.in_channels = in_channels
        self.seq_len = seq_len  # unused: any length works; kept for a uniform constructor
        stem: list[nn.Module] = [
            nn.Conv1d(in_channels, base_width, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm1d(base_width),
        ]
        if stem_relu:
            stem.append(nn.ReLU(inplace=True))
        stem.append(nn.MaxPool1d(3, stride=2, padding=1))
        self.stem = nn.Sequential(*stem)
        stages: list[nn.Module] = []
        channels = base_width
        for stage, num_blocks in enumerate(blocks):
            width = base_width * 2**stage
            layers = []
            for block in range(num_blocks):
                stride = 2 if stage > 0 and block == 0 else 1
                layers.append(_Bottleneck1D(channels, width, stride))
                channels = width * _Bottleneck1D.expansion
            stages.append(nn.Sequential(*layers))
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x)
        z = self.stages(self.stem(x))
        return self.fc(z.mean(dim=-1))


class BiLSTM(SpectrumClassifier):
    """Bidirectional LSTM over frequency bins, upstream ``BiLSTM``.

    Each bin's (Re, Im) is one time step; the last layer's final forward and backward hidden
    states are concatenated and mapped by a bias-free linear layer.
    ``x``: ``[B, in_channels, L]`` -> logits ``[B, num_classes]``.
    """

    def __init__(
        self,
        in_channels: int = 2,
        num_classes: int = 16,
        seq_len: int = 2048,
        hidden_size: int = 128,
        num_layers: int = 2,
    ) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.seq_len = seq_len  # unused: any length works; kept for a uniform constructor
        self.lstm = nn.LSTM(
            in_channels, hidden_size, num_layers, batch_first=True, bidirectional=True
        )
        self.classifier = nn.Linear(2 * hidden_size, num_classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x)
        _, (h_n, _) = self.lstm(x.transpose(1, 2))  # h_n: [num_layers * 2, B, H]
        return self.classifier(torch.cat((h_n[-2], h_n[-1]), dim=1))


def sinusoidal_positions(length: int, dim: int) -> torch.Tensor:
    """Sinusoidal positional encoding ``[length, dim]`` (Vaswani et al. 2017), as upstream
    ``PositionalEncoding``: even columns ``sin(p·ω_i)``, odd columns ``cos(p·ω_i)``,
    ``ω_i = 10000^{-2i/dim}``."""
    if dim % 2:
        raise ValueError(f"sinusoidal positional encoding needs an even dimension, got {dim}")
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.empty(length, dim)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)
    return table


class Transformer1D(SpectrumClassifier):
    """Transformer encoder over frequency bins, upstream ``Transformer1D``.

    Linear embedding of each token (a bin's (Re, Im), or ``patch_size`` consecutive bins),
    sinusoidal positions, ``num_layers`` post-norm encoder layers (ReLU feed-forward,
    ``nn.TransformerEncoderLayer`` defaults as upstream), mean over tokens and a linear layer.
    ``patch_size=1`` is upstream; a length not divisible by ``patch_size`` is zero-padded on the
    right. ``attention_dropout`` (None: ``dropout``, as upstream) sets the attention-weight dropout
    alone; on CPU any value > 0 makes PyTorch materialise the ``L x L`` attention matrices
    (~0.9 GB and ~20x the time per sample at L=2048 in training), 0 keeps the fused kernel.
    ``x``: ``[B, in_channels, L]`` -> logits ``[B, num_classes]``.
    """

    def __init__(
        self,
        in_channels: int = 2,
        num_classes: int = 16,
        seq_len: int = 2048,
        embed_dim: int = 64,
        num_heads: int = 4,
        num_layers: int = 4,
        dim_feedforward: int = 256,
        dropout: float = 0.1,
        patch_size: int = 1,
        attention_dropout: float | None = None,
    ) -> None:
        super().__init__()
        if embed_dim % 2 or embed_dim % num_heads:
            raise ValueError(
                f"Transformer1D embed_dim ({embed_dim}) must be even and divisible by num_heads "
                f"({num_heads})"
            )
        if patch_size < 1:
            raise ValueError(f"Transformer1D patch_size must be >= 1, got {patch_size}")
        self.in_channels = in_channels
        self.seq_len = seq_len
        self.embed_dim = embed_dim
        self.patch_size = patch_size
        self.input_proj = nn.Linear(in_channels * patch_size, embed_dim)
        num_tokens = math.ceil(seq_len / patch_size)
        self.register_buffer(
            "positions", sinusoidal_positions(num_tokens, embed_dim), persistent=False
        )
        layer = nn.TransformerEncoderLayer(
            d_model=embed_dim,
            nhead=num_heads,
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            batch_first=True,
        )
        if attention_dropout is not None:
            # MultiheadAttention passes this float to scaled_dot_product_attention as dropout_p
            layer.self_attn.dropout = attention_dropout
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x)
        pad = (-x.shape[-1]) % self.patch_size
        if pad:
            x = nn.functional.pad(x, (0, pad))
        batch, channels, length = x.shape
        # [B, C, T·P] -> [B, T, P·C]; for P=1 this is upstream's channels-last (B, L, C).
        tokens = x.reshape(batch, channels, length // self.patch_size, self.patch_size)
        tokens = tokens.permute(0, 2, 3, 1).reshape(batch, length // self.patch_size, -1)
        num_tokens = tokens.shape[1]
        positions = self.positions
        if num_tokens > positions.shape[0]:
            positions = sinusoidal_positions(num_tokens, self.embed_dim).to(tokens.device)
        z = self.input_proj(tokens) + positions[:num_tokens].to(tokens.dtype)
        return self.classifier(self.encoder(z).mean(dim=1))


class MLP(SpectrumClassifier):
    """Two-hidden-layer perceptron on the flattened spectrum, upstream ``MLP``.

    ``D = in_channels · seq_len`` inputs -> ``expansion·D`` -> ReLU -> ``D`` -> ReLU -> bias-free
    linear to classes. Flattening follows upstream's channels-last ``(L, C)`` order
    (Re0, Im0, Re1, ...). Needs ``L == seq_len``. ``x``: ``[B, in_channels, L]`` -> ``[B, K]``.
    """

    def __init__(
        self,
        in_channels: int = 2,
        num_classes: int = 16,
        seq_len: int = 2048,
        expansion: int = 2,
    ) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.seq_len = seq_len
        input_dim = in_channels * seq_len
        hidden_dim = input_dim * expansion
        self.fc = nn.Sequential(
            nn.Linear(input_dim, hidden_dim),
            nn.ReLU(),
            nn.Linear(hidden_dim, input_dim),
            nn.ReLU(),
        )
        self.classifier = nn.Linear(input_dim, num_classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x)
        if x.shape[-1] != self.seq_len:
            raise ValueError(
                f"MLP was built for seq_len={self.seq_len} bins; got input length {x.shape[-1]} "
                "(build it with the cropped protocol length)"
            )
        return self.classifier(self.fc(x.transpose(1, 2).reshape(x.shape[0], -1)))


MODELS: dict[str, type[nn.Module]] = {
    "rf_matid": RFMatIDNet,
    "material_id": MaterialIDCNN,
    "resnet1d": ResNet1D,
    "bilstm": BiLSTM,
    "transformer1d": Transformer1D,
    "mlp": MLP,
}

# Input each model takes from the data module (its ``freq_data_type``): the whitened (Re, Im)
# pair, or upstream's three channels (frequency in GHz, Re, Im) for the paper's RF_MatID.
INPUT_FORMATS: dict[str, str] = {name: "dual_channel" for name in MODELS} | {
    "rf_matid": "three_channel"
}

# Upstream training recipe per baseline, from config_hub/freq_domain/all_classes/
# freq_protocol_1/split_s1/mod0/<Model>/config.yaml (all: AdamW, CrossEntropyLoss, 60 epochs).
# "lr" is RFMatIDClassifier's lr: the OneCycle peak (upstream max_lr 1e-3) or StepLR's initial
# rate. Upstream's AdamW lr next to OneCycle (1e-4; 3e-4 for MaterialID) is overwritten by
# torch's OneCycleLR and so is inert; it is not carried over.
UPSTREAM_TRAINING: dict[str, dict[str, Any]] = {
    "rf_matid": {
        "lr": 1e-3,
        "weight_decay": 1e-3,
        "scheduler": "onecycle",
        "batch_size": 32,
        "epochs": 60,
    },
    "material_id": {
        "lr": 1e-3,
        "weight_decay": 1e-2,
        "scheduler": "onecycle",
        "batch_size": 32,
        "epochs": 60,
    },
    "resnet1d": {
        "lr": 1e-3,
        "weight_decay": 1e-2,
        "scheduler": "step",
        "step_size": 30,
        "gamma": 0.3,
        "batch_size": 16,
        "epochs": 60,
    },
    "bilstm": {
        "lr": 1e-3,
        "weight_decay": 1e-2,
        "scheduler": "onecycle",
        "batch_size": 32,
        "epochs": 60,
    },
    "transformer1d": {
        "lr": 1e-3,
        "weight_decay": 1e-2,
        "scheduler": "onecycle",
        "batch_size": 32,
        "epochs": 60,
    },
    "mlp": {
        "lr": 1e-3,
        "weight_decay": 1e-2,
        "scheduler": "onecycle",
        "batch_size": 32,
        "epochs": 60,
    },
}


def build_model(
    name: str,
    in_channels: int | None = None,
    num_classes: int = 16,
    seq_len: int = 2048,
    **kwargs: Any,
) -> nn.Module:
    """Instantiate ``MODELS[name]`` with architecture hyperparameters ``kwargs``.

    ``in_channels`` defaults to the model's input format (:data:`INPUT_FORMATS`): 3 for
    ``rf_matid`` (frequency, Re, Im), else 2.
    """
    try:
        cls = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}") from None
    if in_channels is None:
        in_channels = 3 if INPUT_FORMATS[name] == "three_channel" else 2
    accepted = set(inspect.signature(cls).parameters) - {"in_channels", "num_classes", "seq_len"}
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise ValueError(
            f"unknown hyperparameter(s) {unknown} for model {name!r}; accepted: {sorted(accepted)}"
        )
    return cls(in_channels=in_channels, num_classes=num_classes, seq_len=seq_len, **kwargs)
