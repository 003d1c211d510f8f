from __future__ import annotations

import pytest
import torch

from robotics_remac.model import (
    FlowPolicy,
    LoRALinear,
    add_lora,
    delay_mask,
    lora_disabled,
    lora_parameters,
    merge_lora,
)


@pytest.mark.parametrize(
    ("horizon", "channels", "depth", "batch"), [(8, 16, 1, 3), (8, 32, 2, 1), (6, 24, 3, 5)]
)
def test_velocity_shape(horizon: int, channels: int, depth: int, batch: int) -> None:
    policy = FlowPolicy(
        horizon=horizon, channels=channels, hidden=2 * channels, token_hidden=8, depth=depth
    )
    x = torch.randn(batch, horizon, 2)
    assert policy(torch.randn(batch, 8), x, torch.rand(batch)).shape == x.shape
    assert policy(torch.randn(batch, 8), x, torch.rand(batch, horizon)).shape == x.shape


def test_delay_mask() -> None:
    m = delay_mask(torch.tensor([0, 2, 4]), 6)
    assert m.tolist() == [[1] * 6, [0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1]]
    assert delay_mask(3, 5, batch=2).shape == (2, 5)


def _lora_policy(use_mask: bool = True) -> FlowPolicy:
    torch.manual_seed(0)
    policy = add_lora(FlowPolicy(channels=16, hidden=32, token_hidden=8), use_mask=use_mask)
    for layer in policy.modules():
        if isinstance(layer, LoRALinear):
            torch.nn.init.normal_(layer.lora_B, std=0.3)
            if layer.mask_proj is not None:
                torch.nn.init.normal_(layer.mask_proj.weight, std=0.5)
    return policy.eval()


def test_lora_freezes_the_base_and_starts_at_zero() -> None:
    base = FlowPolicy(channels=16, hidden=32, token_hidden=8).eval()
    obs, x, t = torch.randn(4, 8), torch.randn(4, 8, 2), torch.rand(4)
    ref = base(obs, x, t)
    policy = add_lora(base)
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable == {
        n for n, p in policy.named_parameters() if "lora_" in n or "mask_proj" in n
    }
    assert len(lora_parameters(policy)) == len(trainable) > 0
    torch.testing.assert_close(policy(obs, x, t, delay_mask(2, 8, 4)), ref)


def test_lora_disabled_gives_the_backbone() -> None:
    policy = _lora_policy()
    obs, x, t, m = torch.randn(4, 8), torch.randn(4, 8, 2), torch.rand(4), delay_mask(2, 8, 4)
    with_lora = policy(obs, x, t, m)
    with lora_disabled(policy):
        base = policy(obs, x, t, m)
    assert not torch.allclose(with_lora, base)
    for layer in policy.modules():
        if isinstance(layer, LoRALinear):
            layer.enabled = False
    torch.testing.assert_close(policy(obs, x, t, m), base)


def test_channel_update_is_gated_by_the_mask() -> None:
    layer = LoRALinear(torch.nn.Linear(4, 3), "channel", horizon=5).eval()
    torch.nn.init.normal_(layer.lora_B)
    x = torch.randn(2, 5, 4)
    m = delay_mask(2, 5, 2)
    diff = layer(x, m) - layer.base(x)
    assert torch.all(diff[:, :2] == 0) and torch.all(diff[:, 2:].abs().sum(-1) > 0)


@pytest.mark.parametrize("delay", [0, 1, 2, 4])
@pytest.mark.parametrize("use_mask", [True, False])
def test_merge_is_exact(delay: int, use_mask: bool) -> None:
    policy = _lora_policy(use_mask)
    merged = merge_lora(policy, delay)
    assert not any(isinstance(m, LoRALinear) for m in merged.modules())
    obs, x, t = torch.randn(3, 8), torch.randn(3, 8, 2), torch.rand(3)
    mask = delay_mask(delay, 8, 3) if use_mask else None
    torch.testing.assert_close(merged(obs, x, t), policy(obs, x, t, mask), atol=1e-5, rtol=1e-5)
