from __future__ import annotations

import math

import pytest
import torch

from robotics_remac.model import FlowPolicy, add_lora
from robotics_remac.sampling import (
    bid_sample,
    euler_sample,
    prefix_preserved_sample,
    rtc_guidance_weight,
    rtc_prefix_weights,
    rtc_sample,
    training_time_rtc_sample,
)


@pytest.fixture
def policy() -> FlowPolicy:
    torch.manual_seed(0)
    return FlowPolicy(channels=16, hidden=32, token_hidden=8).eval()


def test_euler_shape_and_seed(policy: FlowPolicy) -> None:
    obs = torch.randn(3, 8)
    a = euler_sample(policy, obs, generator=torch.Generator().manual_seed(1))
    b = euler_sample(policy, obs, generator=torch.Generator().manual_seed(1))
    assert a.shape == (3, 8, 2)
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("start", ["zeros", "noise"])
def test_prefix_preserved_keeps_the_prefix(policy: FlowPolicy, start: str) -> None:
    remac = add_lora(policy).eval()
    prefix = torch.randn(2, 8, 2)
    out = prefix_preserved_sample(remac, torch.randn(2, 8), prefix, 3, start=start)
    torch.testing.assert_close(out[:, :3], prefix[:, :3])
    assert not torch.allclose(out[:, 3:], prefix[:, 3:])


def test_training_time_rtc_keeps_the_prefix(policy: FlowPolicy) -> None:
    prefix = torch.randn(2, 8, 2)
    out = training_time_rtc_sample(policy, torch.randn(2, 8), prefix, 2)
    torch.testing.assert_close(out[:, :2], prefix[:, :2])


def test_rtc_weights_and_guidance_weight() -> None:
    w = rtc_prefix_weights(8, 2, 3)
    assert w[:2].tolist() == [1.0, 1.0] and w[5:].tolist() == [0.0] * 3
    assert 0 < w[4] < w[3] < w[2] < 1
    assert rtc_guidance_weight(0.0) == 5.0 and rtc_guidance_weight(1.0) == 0.0
    t = 0.8
    assert rtc_guidance_weight(t, 100.0) == pytest.approx(
        (1 - t) / t * (t**2 + (1 - t) ** 2) / (1 - t) ** 2
    )
    assert math.isclose(rtc_guidance_weight(0.1), 5.0)


def test_rtc_pulls_the_chunk_towards_the_prefix(policy: FlowPolicy) -> None:
    obs = torch.randn(8, 8)
    prefix = torch.full((8, 8, 2), 0.7)
    free = euler_sample(policy, obs, generator=torch.Generator().manual_seed(0))
    guided = rtc_sample(policy, obs, prefix, 3, 3, generator=torch.Generator().manual_seed(0))
    err = lambda c: (c[:, :3] - prefix[:, :3]).abs().mean()  # noqa: E731
    assert err(guided) < err(free)


def test_bid_picks_the_candidate_closest_to_the_prefix(policy: FlowPolicy) -> None:
    obs = torch.randn(2, 8)
    gen = torch.Generator().manual_seed(0)
    cand = euler_sample(policy, obs.repeat_interleave(16, 0), generator=gen).view(2, 16, 8, 2)
    prefix = cand[:, 5].clone()
    out = bid_sample(policy, obs, prefix, 2, 2, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(out, prefix)
