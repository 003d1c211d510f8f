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


# Tolerance of the low-rank merged layer against the unmerged split-LoRA forward: measured
# (2026-12-08, float32, before this test was written) at most 3.9e-7 on velocities of magnitude
# <= 0.76 at the official width (d = 1, 2, 4, batch 32) and 4.8e-7 on this file's LoRA policy with
# large updates (B ~ N(0, 0.3), mask_proj ~ N(0, 0.5), velocities <= 1.8, d = 1, 2, 4, 7); the
# stacked layer differs from the unmerged one by 4.8e-7 there too. atol 2e-6 with rtol 1e-6 is
# about 4x that float rounding and far below what a wrong correction moves (the LoRA update,
# and the prefix correction, each checked > 1e-2 below).
MERGE_ATOL, MERGE_RTOL = 2e-6, 1e-6


@pytest.mark.parametrize("delay", [1, 2, 4, 7])
def test_lowrank_merge_equals_the_unmerged_forward_on_prefix_and_generated_tokens(
    delay: int,
) -> None:
    from robotics_remac.model import LowRankSplitLinear, SplitLinear

    policy = _lora_policy()
    merged = merge_lora(policy, delay)
    layers = [m for m in merged.modules() if isinstance(m, LowRankSplitLinear)]
    assert len(layers) == 2 + 2 * len(policy.blocks)  # in/out projections, ch1/ch2 per block
    assert not any(isinstance(m, SplitLinear | LoRALinear) for m in merged.modules())
    gen = torch.Generator().manual_seed(delay)
    obs, x = torch.randn(5, 8, generator=gen), torch.randn(5, 8, 2, generator=gen)
    t = torch.rand(5, generator=gen)
    with torch.no_grad():
        want = policy(obs, x, t, delay_mask(delay, 8, 5))
        got = merged(obs, x, t)
        with lora_disabled(policy):
            backbone = policy(obs, x, t, delay_mask(delay, 8, 5))
        for layer in layers:  # the merged weights on every token, the prefix correction off
            layer.delay = 0
        uncorrected = merged(obs, x, t)
        for layer in layers:
            layer.delay = delay
    # the update matters on the generated tokens and the correction on the prefix tokens (a
    # merge that dropped either would fail below)
    assert (want - backbone)[:, delay:].abs().max() > 1e-2
    assert (want - uncorrected)[:, :delay].abs().max() > 1e-2
    for tokens in (slice(0, delay), slice(delay, None)):
        torch.testing.assert_close(
            got[:, tokens], want[:, tokens], atol=MERGE_ATOL, rtol=MERGE_RTOL
        )


def test_lowrank_layer_gives_the_base_weights_on_the_prefix_tokens() -> None:
    """One channel layer alone: base ``W x + b`` on tokens < d, the LoRA layer's output after."""
    from robotics_remac.model import LowRankSplitLinear

    torch.manual_seed(3)
    lora = LoRALinear(torch.nn.Linear(6, 5), "channel", horizon=8).eval()
    torch.nn.init.normal_(lora.lora_B, std=0.5)
    torch.nn.init.normal_(lora.mask_proj.weight, std=0.5)
    holder = torch.nn.Module()
    holder.layer = lora
    x = torch.randn(3, 8, 6)
    with torch.no_grad():
        dw = lora.scale * lora.lora_B @ lora.lora_A
        shift = lora.mask_proj(torch.ones(1))
        merged = torch.nn.Linear(6, 5)
        merged.weight.copy_(lora.base.weight + dw)
        merged.bias.copy_(lora.base.bias + dw @ shift)
        layer = LowRankSplitLinear(3, merged, lora.lora_A, lora.scale * lora.lora_B, dw @ shift)
        got = layer(x)
        base_out = x @ lora.base.weight.T + lora.base.bias  # the frozen layer, by hand
        unmerged = lora(x, delay_mask(3, 8, 3))
    torch.testing.assert_close(got[:, :3], base_out[:, :3], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(got[:, 3:], unmerged[:, 3:], atol=1e-6, rtol=1e-6)
    assert (unmerged[:, 3:] - base_out[:, 3:]).abs().max() > 1e-2


def test_stacked_merge_is_still_exact_and_the_split_kind_is_checked() -> None:
    policy = _lora_policy()
    obs, x, t = torch.randn(3, 8), torch.randn(3, 8, 2), torch.rand(3)
    with torch.no_grad():
        want = policy(obs, x, t, delay_mask(2, 8, 3))
        stacked = merge_lora(policy, 2, split="stacked")(obs, x, t)
        lowrank = merge_lora(policy, 2)(obs, x, t)
    torch.testing.assert_close(stacked, want, atol=MERGE_ATOL, rtol=MERGE_RTOL)
    torch.testing.assert_close(lowrank, stacked, atol=MERGE_ATOL, rtol=MERGE_RTOL)
    with pytest.raises(ValueError, match="split must be"):
        merge_lora(policy, 2, split="two")  # type: ignore[arg-type]
