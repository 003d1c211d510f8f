"""Chunk samplers, checked against expectations derived independently of the implementation:
planted velocity fields whose Euler integral is known in closed form, and RTC's weights worked
out by hand from Black et al. (2025), Eq. 5, and the ΠGDM guidance weight."""

from __future__ import annotations

import pytest
import torch

from robotics_remac.model import FlowPolicy, add_lora
from robotics_remac.sampling import (
    euler_sample,
    prefix_preserved_sample,
    rtc_guidance_weight,
    rtc_prefix_weights,
    rtc_sample,
    training_time_rtc_sample,
)

H, A, B = 8, 2, 3


class ConstantVelocity(torch.nn.Module):
    """A planted policy: velocity ``value`` everywhere (so ``steps`` Euler steps of size
    ``1/steps`` from ``x0`` end at exactly ``x0 + value``); records each call's ``t`` and mask."""

    horizon, action_dim = H, A

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value
        self.calls: list[tuple[torch.Tensor, torch.Tensor | None]] = []

    def forward(self, obs, x, t, mask=None):  # type: ignore[no-untyped-def]
        self.calls.append((t.clone(), None if mask is None else mask.clone()))
        return torch.full_like(x, self.value) + 0 * x  # 0 * x keeps x in RTC's autograd graph


def _noise(seed: int) -> torch.Tensor:
    return torch.randn((B, H, A), generator=torch.Generator().manual_seed(seed))


@pytest.fixture
def policy() -> FlowPolicy:
    torch.manual_seed(0)
    return FlowPolicy(channels=16, hidden=32, token_hidden=8).eval()


def test_euler_integrates_a_constant_field_exactly() -> None:
    stub = ConstantVelocity(0.7)
    out = euler_sample(stub, torch.zeros(B, 8), steps=5, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(out, _noise(1) + 0.7)
    times = torch.stack([t for t, _ in stub.calls])  # [steps, B]
    torch.testing.assert_close(times, torch.tensor([[k / 5] * B for k in range(5)]))


def test_euler_is_reproducible_for_a_seed(policy: FlowPolicy) -> None:
    obs = torch.randn(B, 8)
    a = euler_sample(policy, obs, generator=torch.Generator().manual_seed(1))
    b = euler_sample(policy, obs, generator=torch.Generator().manual_seed(1))
    c = euler_sample(policy, obs, generator=torch.Generator().manual_seed(2))
    assert a.shape == (B, H, A)
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a, c)


@pytest.mark.parametrize("delay", [0, 3])
def test_prefix_preserved_planted_field(delay: int) -> None:
    """Zero start: the ``d`` committed actions stay the prefix, the tail integrates from 0 to
    exactly the velocity; the network sees the mask ``1[τ >= d]`` at every step."""
    stub = ConstantVelocity(-0.4)
    prefix = _noise(5)
    out = prefix_preserved_sample(stub, torch.zeros(B, 8), prefix, delay, steps=4)
    torch.testing.assert_close(out[:, :delay], prefix[:, :delay])
    torch.testing.assert_close(out[:, delay:], torch.full((B, H - delay, A), -0.4))
    expected_mask = torch.tensor([[0.0] * delay + [1.0] * (H - delay)] * B)
    assert len(stub.calls) == 4
    for _, mask in stub.calls:
        torch.testing.assert_close(mask, expected_mask)


def test_prefix_preserved_noise_start_and_merged_policy() -> None:
    stub = ConstantVelocity(0.25)
    prefix = _noise(5)
    gen = torch.Generator().manual_seed(9)
    out = prefix_preserved_sample(
        stub, torch.zeros(B, 8), prefix, 2, start="noise", generator=gen, use_mask=False
    )
    torch.testing.assert_close(out[:, :2], prefix[:, :2])
    torch.testing.assert_close(out[:, 2:], _noise(9)[:, 2:] + 0.25)
    assert all(mask is None for _, mask in stub.calls)  # a merged policy gets no mask


@pytest.mark.parametrize("start", ["zeros", "noise"])
def test_prefix_preserved_keeps_the_prefix_of_a_lora_policy(policy: FlowPolicy, start: str) -> None:
    remac = add_lora(policy).eval()
    prefix = torch.randn(2, 8, 2)
    out = prefix_preserved_sample(remac, torch.randn(2, 8), prefix, 3, start=start)
    torch.testing.assert_close(out[:, :3], prefix[:, :3])
    assert not torch.allclose(out[:, 3:], prefix[:, 3:])


def test_training_time_rtc_gives_the_prefix_flow_time_one() -> None:
    stub = ConstantVelocity(0.5)
    prefix = _noise(5)
    gen = torch.Generator().manual_seed(3)
    out = training_time_rtc_sample(stub, torch.zeros(B, 8), prefix, 2, steps=5, generator=gen)
    torch.testing.assert_close(out[:, :2], prefix[:, :2])
    torch.testing.assert_close(out[:, 2:], _noise(3)[:, 2:] + 0.5)
    for k, (t, _) in enumerate(stub.calls):  # per-token flow time [B, H]
        assert t.shape == (B, H)
        assert t[:, :2].eq(1.0).all() and t[:, 2:].eq(k / 5).all()


def test_rtc_prefix_weights_by_hand() -> None:
    """H = 8, d = 2, s = 3: frozen on τ < 2, decaying on 2 <= τ < H - s = 5 with
    c = (5 - τ) / 4 and W = c (e^c - 1) / (e - 1), zero from τ = 5."""
    w = rtc_prefix_weights(8, 2, 3)
    expected = [1.0, 1.0, 0.487551, 0.188770, 0.041324, 0.0, 0.0, 0.0]
    assert w.tolist() == pytest.approx(expected, abs=1e-6)
    # no soft region when the frozen actions reach the end of the overlap (d = H - s)
    assert rtc_prefix_weights(8, 4, 4).tolist() == [1.0] * 4 + [0.0] * 4


def test_rtc_guidance_weight_by_hand() -> None:
    # min(((1-t)/t) (t² + (1-t)²) / (1-t)², β)
    assert rtc_guidance_weight(0.5) == pytest.approx(2.0)  # 1 * 0.5 / 0.25
    assert rtc_guidance_weight(0.8) == pytest.approx(4.25)  # 0.25 * 0.68 / 0.04
    assert rtc_guidance_weight(0.1, beta=100.0) == pytest.approx(82 / 9)  # 9 * 0.82 / 0.81
    assert rtc_guidance_weight(0.1) == 5.0  # clipped at β
    assert rtc_guidance_weight(0.0) == 5.0 and rtc_guidance_weight(1.0) == 0.0


def test_rtc_planted_zero_field_inpaints_the_frozen_prefix() -> None:
    """With zero velocity, x̂₁ = x and the guidance step at t = 0 is β·dt·W·(Y - x) = W·(Y - x)
    (β = 5, dt = 1/5): frozen actions land on the prefix at once and stay; actions with W = 0
    keep their noise; those in between only move towards the prefix."""
    prefix = _noise(5)
    gen = torch.Generator().manual_seed(4)
    out = rtc_sample(ConstantVelocity(0.0), torch.zeros(B, 8), prefix, 2, 3, generator=gen)
    start = _noise(4)
    torch.testing.assert_close(out[:, :2], prefix[:, :2])
    torch.testing.assert_close(out[:, 5:], start[:, 5:])
    soft = slice(2, 5)
    assert ((out[:, soft] - prefix[:, soft]).abs() < (start[:, soft] - prefix[:, soft]).abs()).all()


def test_rtc_pulls_the_chunk_towards_the_prefix(policy: FlowPolicy) -> None:
    obs = torch.randn(8, 8)
    prefix = torch.full((8, 8, 2), 0.7)
    free = euler_sample(policy, obs, generator=torch.Generator().manual_seed(0))
    guided = rtc_sample(policy, obs, prefix, 3, 3, generator=torch.Generator().manual_seed(0))

    def err(c: torch.Tensor) -> torch.Tensor:
        return (c[:, :3] - prefix[:, :3]).abs().mean()

    assert err(guided) < err(free)


@pytest.mark.parametrize(
    "sampler", ["euler", "prefix_zeros", "prefix_noise", "rtc", "bid", "ttrtc"]
)
def test_every_sampler_computes_on_the_policys_device(sampler: str) -> None:
    """Noise, flow times, masks and RTC weights follow ``obs``/``prefix``: on the shape-only
    "meta" device a stray CPU tensor raises, as it would on a GPU."""
    from robotics_remac.rollout import make_chunker

    meta = torch.device("meta")
    policy = FlowPolicy(channels=16, hidden=32, token_hidden=8)
    if sampler.startswith("prefix"):
        policy = add_lora(policy)
    obs, prefix = torch.zeros(B, 8, device=meta), torch.zeros(B, H, A, device=meta)
    chunk = make_chunker(sampler, policy.eval().to(meta))(
        obs, prefix, 2, 2, torch.Generator().manual_seed(0)
    )
    assert chunk.device == meta and chunk.shape == (B, H, A)


def test_bid_keeps_each_observations_own_nearest_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted candidates instead of the network's: the candidate sampler fills each returned
    chunk with its observation's value plus a distinct per-row offset, so every candidate says
    which observation it was drawn for. BID must return, for each observation, the one of *its
    own* candidates nearest the prefix (constant chunks: nearest in value, whatever the weights).
    The expected pick is found from the planted rows, not with BID's ranking formula."""
    import robotics_remac.sampling as sampling

    drawn: list[torch.Tensor] = []

    def planted(policy, obs, steps=5, generator=None, mask=None):  # type: ignore[no-untyped-def]
        rows = obs.shape[0]
        values = obs[:, 0] + 0.01 * torch.arange(rows, dtype=obs.dtype)
        drawn.append(values)
        return values[:, None, None].expand(rows, H, A).clone()

    monkeypatch.setattr(sampling, "euler_sample", planted)
    obs = torch.zeros(2, 8)
    obs[1, 0] = 100.0
    prefix = torch.stack([torch.full((H, A), 0.043), torch.full((H, A), 100.021)])
    out = sampling.bid_sample(None, obs, prefix, 2, 2, samples=4)  # type: ignore[arg-type]
    (values,) = drawn
    assert values.shape == (8,)  # 4 candidates per observation
    for i in range(2):
        own = values[(values - obs[i, 0]).abs() < 1.0]  # the candidates drawn for observation i
        assert len(own) == 4
        best = own[(own - prefix[i, 0, 0]).abs().argmin()]
        torch.testing.assert_close(out[i], torch.full((H, A), best.item()))


def test_bid_ranks_by_plain_not_squared_l2(monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream ``bid_action`` sums per-step plain L2 norms. Candidate 0 misses the prefix by 2 at
    one step (plain 2.0, squared 4.0), candidate 1 by 1.2 at two steps (plain 2.4, squared 2.88):
    plain L2 keeps candidate 0, squared L2 would keep candidate 1."""
    import robotics_remac.sampling as sampling

    prefix = torch.zeros(1, H, A)
    cand = torch.zeros(1, 2, H, A)
    cand[0, 0, 0, 0] = 2.0
    cand[0, 1, 0, 1] = 1.2
    cand[0, 1, 1, 0] = 1.2
    weights = rtc_prefix_weights(H, 2, 2)
    assert weights[0] == weights[1] == 1.0  # both misses sit on the frozen (weight 1) steps
    monkeypatch.setattr(sampling, "euler_sample", lambda *args, **kwargs: cand.view(2, H, A))
    out = sampling.bid_sample(None, torch.zeros(1, 8), prefix, 2, 2, samples=2)  # type: ignore[arg-type]
    torch.testing.assert_close(out, cand[:, 0])
