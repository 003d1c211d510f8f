"""Tests for rf_matid.model: shapes over protocol lengths, gradients, whitening, fidelity."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rf_matid.model
from rf_matid.model import (
    MLP,
    MODELS,
    BiLSTM,
    MaterialIDCNN,
    ResNet1D,
    Transformer1D,
    build_model,
    complex_whiten,
    count_parameters,
)

PROTOCOL_LENGTHS = (700, 938, 1348, 1883, 2048)  # P2, P4, P3, P5, P1 bins on the 2048 grid
NUM_CLASSES = 16

# Narrow variants so the table runs in seconds; the shape logic does not depend on width.
SMALL = {
    "material_id": {"base_channels": 4},
    "resnet1d": {"blocks": (1, 1, 1, 1), "base_width": 4},
    "bilstm": {"hidden_size": 8, "num_layers": 2},
    "transformer1d": {"embed_dim": 8, "num_heads": 2, "num_layers": 1, "dim_feedforward": 16},
    "mlp": {"expansion": 1},
}
SHAPE_CASES = [(name, length) for name in SMALL for length in PROTOCOL_LENGTHS] + [
    ("transformer1d_patch", length) for length in PROTOCOL_LENGTHS
]


def _close(actual, expected, atol: float = 1e-6, rtol: float = 1e-6) -> None:
    # np.testing: torch.testing.assert_close costs ~3 s of imports on first use
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), atol=atol, rtol=rtol)


def _small(name: str, seq_len: int = 2048) -> torch.nn.Module:
    if name == "transformer1d_patch":
        return build_model(
            "transformer1d", seq_len=seq_len, patch_size=16, **SMALL["transformer1d"]
        )
    return build_model(name, seq_len=seq_len, **SMALL[name])


@pytest.mark.parametrize(("name", "length"), SHAPE_CASES)
def test_logits_shape_for_every_protocol_length(name: str, length: int) -> None:
    # Only the MLP is rebuilt per length; the others are built for 2048 and fed cropped spectra.
    model = _small(name, seq_len=length if name == "mlp" else 2048).eval()
    with torch.no_grad():
        for batch in (1, 3):
            logits = model(torch.randn(batch, 2, length))
            assert logits.shape == (batch, NUM_CLASSES)
            assert torch.isfinite(logits).all()


def test_transformer_accepts_longer_than_seq_len() -> None:
    model = _small("transformer1d", seq_len=64).eval()
    with torch.no_grad():
        assert model(torch.randn(2, 2, 100)).shape == (2, NUM_CLASSES)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_default_hyperparameters_at_full_band(name: str) -> None:
    model = build_model(name).eval()
    x = torch.randn(2, model.in_channels, 2048)
    if name == "rf_matid":  # three channels: frequency (GHz), Re, Im
        assert model.in_channels == 3
        x[:, 0] = torch.linspace(4.0, 43.5, 2048)
    with torch.no_grad():
        assert model(x).shape == (2, NUM_CLASSES)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_gradients_reach_every_parameter(name: str) -> None:
    torch.manual_seed(0)
    model = _small(name, seq_len=128).train()
    loss = torch.nn.functional.cross_entropy(
        model(torch.randn(4, 2, 128)), torch.tensor([0, 1, 2, 3])
    )
    loss.backward()
    for param_name, param in model.named_parameters():
        assert param.grad is not None, param_name
        assert torch.isfinite(param.grad).all(), param_name
    first = next(model.parameters())
    assert first.grad.abs().sum() > 0


@pytest.mark.parametrize("name", sorted(SMALL))
def test_seeded_construction_is_deterministic(name: str) -> None:
    x = torch.randn(2, 2, 128)

    def logits(seed: int) -> torch.Tensor:
        torch.manual_seed(seed)
        with torch.no_grad():
            return _small(name, seq_len=128).eval()(x)

    assert torch.equal(logits(1), logits(1))
    assert not torch.equal(logits(1), logits(2))


def _resnet_parameters(blocks, base_width, in_channels=2, num_classes=16) -> int:
    """ResNet bottleneck parameter count written out layer by layer (conv, BN, shortcut)."""
    total = in_channels * base_width * 7 + 2 * base_width
    channels = base_width
    for stage, num_blocks in enumerate(blocks):
        width = base_width * 2**stage
        for block in range(num_blocks):
            out = 4 * width
            total += channels * width + 2 * width + 3 * width * width + 2 * width
            total += width * out + 2 * out
            if block == 0 and (stage > 0 or channels != out):
                total += channels * out + 2 * out
            channels = out
    return total + channels * num_classes + num_classes


def test_parameter_counts_match_upstream_layouts() -> None:
    # Counts of the upstream layouts at their config.yaml defaults, written out independently.
    material_id = (
        (2 * 32 * 7 + 32 * 64 * 5 + 64 * 128 * 5 + 128 * 256 * 3 + 4 * 256 * 256 * 3)
        + 2 * (32 + 64 + 128 + 256 + 4 * 256)
        + 256 * 16
        + 16
    )

    def lstm_layer(n_in: int, h: int) -> int:  # two directions, 4 gates, two bias vectors
        return 2 * (4 * h * (n_in + h) + 2 * 4 * h)

    bilstm = lstm_layer(2, 128) + lstm_layer(256, 128) + 256 * 16
    encoder_layer = (3 * 64 * 64 + 3 * 64) + (64 * 64 + 64) + (64 * 256 + 256) + (256 * 64 + 64)
    transformer = (2 * 64 + 64) + 4 * (encoder_layer + 4 * 64) + 64 * 16 + 16
    mlp = (4096 * 8192 + 8192) + (8192 * 4096 + 4096) + 4096 * 16
    assert count_parameters(MaterialIDCNN()) == material_id == 943_504
    assert count_parameters(BiLSTM()) == bilstm == 534_528
    assert count_parameters(Transformer1D()) == transformer == 201_168
    assert count_parameters(MLP()) == mlp == 67_186_688
    assert count_parameters(ResNet1D()) == _resnet_parameters((3, 4, 6, 3), 64)
    assert count_parameters(ResNet1D(blocks=(1, 2), base_width=8)) == _resnet_parameters((1, 2), 8)


def test_mlp_flattens_channels_last_like_upstream() -> None:
    # Upstream flattens (L, 2) rows: input j of the first layer is bin j // 2, channel j % 2.
    model = MLP(seq_len=3, expansion=1)
    x = torch.zeros(1, 2, 3)
    x[0, 1, 2] = 1.0  # imaginary part of bin 2 -> flat index 5
    first, second = model.fc[0], model.fc[2]
    with torch.no_grad():
        hidden = torch.relu(second(torch.relu(first.weight[:, 5] + first.bias)))
        _close(model(x)[0], model.classifier(hidden), atol=1e-6)


def test_transformer_attention_dropout_is_separate() -> None:
    upstream = Transformer1D(num_layers=2)
    fused = Transformer1D(num_layers=2, attention_dropout=0.0)
    assert [layer.self_attn.dropout for layer in upstream.encoder.layers] == [0.1, 0.1]
    assert [layer.self_attn.dropout for layer in fused.encoder.layers] == [0.0, 0.0]
    assert all(layer.dropout1.p == 0.1 for layer in fused.encoder.layers)


def test_bad_inputs_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="seq_len=2048"):
        MLP()(torch.randn(1, 2, 700))
    with pytest.raises(ValueError, match=r"\[B, 2, L\]"):
        MaterialIDCNN()(torch.randn(1, 700, 2))
    with pytest.raises(ValueError, match="real input"):
        BiLSTM()(torch.randn(1, 2, 10, dtype=torch.complex64))
    with pytest.raises(ValueError, match="unknown model"):
        build_model("resnet50")
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        build_model("mlp", hidden=3)
    with pytest.raises(ValueError, match="divisible by num_heads"):
        Transformer1D(embed_dim=30, num_heads=4)


def test_model_module_imports_without_lightning() -> None:
    # Static check of model.py, the package __init__ and any rf_matid module they import
    # (a subprocess import would cost seconds).
    package = Path(rf_matid.model.__file__).parent
    forbidden = {"lightning", "pytorch_lightning", "torchmetrics"}
    pending, seen = ["model", "__init__"], set()
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        for node in ast.walk(ast.parse((package / f"{module}.py").read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = "rf_matid." if node.level else ""
                names = [base + (node.module or alias.name) for alias in node.names]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in forbidden, (module, name)
                if name.startswith("rf_matid.") and (package / f"{name.split('.')[1]}.py").exists():
                    pending.append(name.split(".")[1])


# ---- complex_whiten -------------------------------------------------------------------------


def _reference_whiten(sample: np.ndarray) -> np.ndarray:
    """Upstream formula on one complex sample: ZCA with np.cov (unbiased), channels-last -> [2, F]."""
    pair = np.stack([sample.real, sample.imag]).astype(np.float64)
    centered = pair - pair.mean(axis=1, keepdims=True)
    eigvals, eigvecs = np.linalg.eigh(np.cov(pair))
    return eigvecs @ np.diag(eigvals**-0.5) @ eigvecs.T @ centered


@st.composite
def correlated_spectra(draw) -> np.ndarray:
    batch = draw(st.integers(1, 4))
    bins = draw(st.integers(16, 300))
    seed = draw(st.integers(0, 2**31 - 1))
    scale = draw(st.floats(1e-4, 1e3))
    offset = complex(draw(st.floats(-10, 10)), draw(st.floats(-10, 10)))
    mixing = draw(st.floats(-0.95, 0.95))  # correlation between Re and Im
    rng = np.random.default_rng(seed)
    re = rng.standard_normal((batch, bins))
    im = mixing * re + math.sqrt(1 - mixing**2) * rng.standard_normal((batch, bins))
    return (scale * (re + 1j * 0.3 * im) + offset).astype(np.complex64)


@settings(max_examples=40, deadline=None)
@given(correlated_spectra())
def test_whitening_gives_zero_mean_identity_covariance(x: np.ndarray) -> None:
    whitened = complex_whiten(x)
    assert whitened.dtype == torch.float32 and whitened.shape == (x.shape[0], 2, x.shape[1])
    out = whitened.double()
    zeros = torch.zeros(x.shape[0], 2, dtype=torch.float64)
    _close(out.mean(-1), zeros, atol=1e-5, rtol=0)
    centered = out - out.mean(-1, keepdim=True)
    cov = centered @ centered.transpose(-1, -2) / (x.shape[1] - 1)
    eye = torch.eye(2, dtype=torch.float64).expand_as(cov)
    _close(cov, eye, atol=1e-4, rtol=0)
    for i, sample in enumerate(x):
        np.testing.assert_allclose(out[i].numpy(), _reference_whiten(sample), atol=1e-4, rtol=1e-4)


@settings(max_examples=25, deadline=None)
@given(correlated_spectra(), st.floats(0.1, 10.0), st.floats(-math.pi, math.pi))
def test_whitening_is_rotation_equivariant(x: np.ndarray, gain: float, phase: float) -> None:
    # whiten(a·x + b) = e^{jφ} whiten(x) for a = gain·e^{jφ}: ZCA commutes with rotations.
    x = x.astype(np.complex128)
    rotated = complex_whiten(gain * np.exp(1j * phase) * x + 3 - 2j)
    base = complex_whiten(x).double()
    expected = torch.complex(base[:, 0], base[:, 1]) * np.exp(1j * phase)
    _close(rotated[:, 0], expected.real.float(), atol=1e-5, rtol=0)
    _close(rotated[:, 1], expected.imag.float(), atol=1e-5, rtol=0)


def test_whitening_layouts_and_batch_independence() -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 64)) + 1j * rng.standard_normal((3, 64))).astype(np.complex64)
    from_complex = complex_whiten(torch.from_numpy(x))
    from_real = complex_whiten(np.stack([x.real, x.imag], axis=1))
    _close(from_complex, from_real)
    _close(complex_whiten(x[1]), from_complex[1])


def test_whitening_singular_covariance_stays_finite() -> None:
    constant = np.full((2, 33), 0.1 + 0.3j, dtype=np.complex64)  # mean has round-off
    assert complex_whiten(constant).abs().max() < 1e-5
    read_only = np.lib.stride_tricks.as_strided(constant)
    read_only.flags.writeable = False
    assert complex_whiten(read_only).shape == (2, 2, 33)
    real_only = np.linspace(-1, 1, 32).astype(np.complex64)[None]
    out = complex_whiten(real_only)
    assert torch.isfinite(out).all()
    _close(out[0, 1], torch.zeros(32), atol=1e-6, rtol=0)
    _close(out[0, 0].std(), torch.tensor(1.0), atol=1e-5, rtol=0)


def test_whitening_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match=r"\[\.\.\., 2, F\]"):
        complex_whiten(torch.randn(4, 3, 10))
    with pytest.raises(ValueError, match="at least 2"):
        complex_whiten(torch.ones(2, 1, dtype=torch.complex64))
