"""The paper's RF_MatID model: layout and three-channel input.

Its numbers against the official model are in test_reference_rfmatid.py; its shipped config
(`fit --config rf_matid`, then test, predict and predict-files) runs in test_cli.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rf_matid.data import RFMatIDDataModule, frequency_channel
from rf_matid.model import INPUT_FORMATS, MODELS, build_model, count_parameters
from rf_matid.rfmatid_net import RFMatIDNet

SMALL = {"d_model": 8, "num_heads": 8, "num_layers": 1, "dim_feedforward": 16}


def three_channel_input(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 3, length, generator=generator)
    x[:, 0] = torch.linspace(4.0, 43.5, length)
    return x


def _block(dim: int) -> int:
    """One ConvNeXt block: depthwise 7x7 (+bias), LayerNorm, 4x MLP, layer scale."""
    return 49 * dim + dim + 2 * dim + (dim * 4 * dim + 4 * dim) + (4 * dim * dim + dim) + dim


def expected_parameters(d: int, n: int, classes: int, ffn: int = 256, layers: int = 3) -> int:
    """RF_MatID's parameter count written out from the paper's/upstream's layout."""
    projection = (2 * (d // 4) + d // 4) + ((d // 4) * (d // 2) + d // 2) + ((d // 2) * d + d)
    mapping = n * 1024 + 1024
    convnext = (d * 96 * 16 + 96) + 2 * 96 + 3 * _block(96)
    convnext += 2 * 96 + (96 * 192 * 4 + 192) + 3 * _block(192)
    convnext += 2 * 192 + (192 * 384 * 4 + 384) + 9 * _block(384)
    encoder = layers * ((3 * d * d + 3 * d) + (d * d + d) + (d * ffn + ffn) + (ffn * d + d) + 4 * d)
    tokens = (384 // d) * 4 + 12
    head = (d * tokens * 512 + 512) + (512 * 128 + 128) + (128 * classes + classes)
    return projection + mapping + convnext + encoder + 2 * d + head


def test_registered_as_the_papers_model_with_its_recipe() -> None:
    from rf_matid.model import UPSTREAM_TRAINING

    assert MODELS["rf_matid"] is RFMatIDNet and INPUT_FORMATS["rf_matid"] == "three_channel"
    assert UPSTREAM_TRAINING["rf_matid"] == {
        "lr": 1e-3,
        "weight_decay": 1e-3,
        "scheduler": "onecycle",
        "batch_size": 32,
        "epochs": 60,
    }


def test_parameter_count_matches_the_layout() -> None:
    model = build_model("rf_matid")  # defaults: d_model 128, 16 classes, 2048 bins
    assert count_parameters(model) == expected_parameters(128, 2048, 16) == 16_687_504
    small = RFMatIDNet(num_classes=5, seq_len=700, **SMALL)
    assert count_parameters(small) == expected_parameters(8, 700, 5, ffn=16, layers=1)


@pytest.mark.parametrize("length", [700, 938, 2048])
def test_logits_for_protocol_lengths(length: int) -> None:
    model = RFMatIDNet(num_classes=16, seq_len=length, **SMALL).eval()
    with torch.no_grad():
        logits = model(three_channel_input(3, length))
    assert logits.shape == (3, 16) and torch.isfinite(logits).all()


def test_gradients_reach_every_parameter() -> None:
    torch.manual_seed(0)
    model = RFMatIDNet(num_classes=4, seq_len=256, **SMALL).train()
    loss = torch.nn.functional.cross_entropy(
        model(three_channel_input(4, 256)), torch.tensor([0, 1, 2, 3])
    )
    loss.backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
        assert param.grad.abs().sum() > 0, name  # no dead parameter (DDP needs every one)


def test_the_frequency_channel_is_read_not_ignored() -> None:
    """Positions come from the bin frequencies (upstream reads x[0, :, 0])."""
    model = RFMatIDNet(num_classes=4, seq_len=128, **SMALL).eval()
    x = three_channel_input(2, 128)
    shifted = x.clone()
    shifted[:, 0] += 1.0
    with torch.no_grad():
        assert not torch.allclose(model(x), model(shifted))


def test_bad_configurations_and_inputs_are_named() -> None:
    with pytest.raises(ValueError, match="three_channel"):
        RFMatIDNet(in_channels=2)
    with pytest.raises(ValueError, match="d_model"):
        RFMatIDNet(d_model=100)
    model = RFMatIDNet(num_classes=4, seq_len=128, **SMALL)
    with pytest.raises(ValueError, match=r"\[B, 3, L\]"):
        model(torch.randn(2, 2, 128))
    with pytest.raises(ValueError, match="seq_len=128"):
        model(three_channel_input(2, 100))


def test_three_channel_data_module(tiny_dataset: Path) -> None:
    """freq_data_type three_channel: [B, 3, L] with the frequency row (GHz) in front of the
    dual-channel whitened spectrum."""
    dual = RFMatIDDataModule(str(tiny_dataset), protocol="P4", batch_size=4)
    three = RFMatIDDataModule(
        str(tiny_dataset), protocol="P4", batch_size=4, freq_data_type="three_channel"
    )
    assert (dual.in_channels, three.in_channels) == (2, 3) and three.seq_len == 938
    a = next(iter(dual.test_dataloader()))["x"]
    b = next(iter(three.test_dataloader()))["x"]
    assert b.shape == (4, 3, 938)
    torch.testing.assert_close(b[:, 1:], a)
    from rf_matid.protocols import protocol_mask

    axis = np.asarray(three._load().axis)
    expected = frequency_channel(axis[protocol_mask(axis, "P4")])
    for row in b[:, 0]:
        np.testing.assert_array_equal(row.numpy(), expected)
    assert 5.7 < float(b[0, 0, 0]) < 5.9 and float(b[0, 0, -1]) <= 42.5
    with pytest.raises(ValueError, match="freq_data_type"):
        RFMatIDDataModule(str(tiny_dataset), freq_data_type="complex")
