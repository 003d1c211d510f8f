"""Chunk samplers: plain Euler, REMAC prefix-preserved, RTC guidance, BID, training-time RTC.

All take ``obs`` float ``[B, O]`` and return a chunk float ``[B, H, A]``; those that continue a
previous chunk take ``prefix`` ``[B, H, A]`` (the previous chunk's remaining actions shifted to
the front; its first ``d`` entries are the actions executed while this chunk is computed) and the
delay ``d`` (an int, the same for the batch). Flow time runs from 0 (noise) to 1 (data) in
``steps`` Euler steps (upstream: 5). Chunks are computed on ``obs``'s device; noise is drawn from
the (CPU) ``generator`` and moved there, so a seed gives the same noise on every device.
"""

from __future__ import annotations

import math

import torch

from robotics_remac.model import FlowPolicy, delay_mask

__all__ = [
    "bid_sample",
    "euler_sample",
    "prefix_preserved_sample",
    "rtc_guidance_weight",
    "rtc_prefix_weights",
    "rtc_sample",
    "training_time_rtc_sample",
]


def _noise(
    shape: tuple[int, ...], generator: torch.Generator | None, device: torch.device
) -> torch.Tensor:
    return torch.randn(shape, generator=generator).to(device)


@torch.no_grad()
def euler_sample(
    policy: FlowPolicy,
    obs: torch.Tensor,
    steps: int = 5,
    generator: torch.Generator | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """``x_0 ~ N(0, I)``, ``x <- x + v/steps`` (paper Eq. 3 integrated with Euler)."""
    b = obs.shape[0]
    x = _noise((b, policy.horizon, policy.action_dim), generator, obs.device)
    dt = 1.0 / steps
    for k in range(steps):
        t = torch.full((b,), k * dt, device=obs.device)
        x = x + dt * policy(obs, x, t, mask)
    return x


@torch.no_grad()
def prefix_preserved_sample(
    policy: FlowPolicy,
    obs: torch.Tensor,
    prefix: torch.Tensor,
    delay: int,
    steps: int = 5,
    start: str = "zeros",
    generator: torch.Generator | None = None,
    use_mask: bool = True,
) -> torch.Tensor:
    """REMAC sampling (paper Sec. 3.3): ``x <- m ⊙ (x + dt·v) + (1 - m) ⊙ prefix``.

    ``start="zeros"``: the initial state is the prefix in front and zeros in the tail (not
    upstream's); ``start="remainder"``: the whole ``prefix`` (the previous chunk's remainder, zero
    padded), as upstream ``model_async_lora.LoRAFlowPolicy.action``; ``start="noise"``: Gaussian
    noise in the tail. ``use_mask=False`` calls the policy without the
    mask (a merged policy has the mask folded in).
    """
    b, h, a = prefix.shape
    m = delay_mask(delay, h, b).to(prefix.device)[..., None]
    if start not in ("zeros", "remainder", "noise"):
        raise ValueError(f"start must be zeros, remainder or noise, got {start!r}")
    if start == "remainder":
        x = prefix.clone()
    else:
        tail = (
            torch.zeros_like(prefix)
            if start == "zeros"
            else _noise((b, h, a), generator, prefix.device)
        )
        x = m * tail + (1 - m) * prefix
    net_mask = m[..., 0] if use_mask else None
    dt = 1.0 / steps
    for k in range(steps):
        t = torch.full((b,), k * dt, device=prefix.device)
        x = m * (x + dt * policy(obs, x, t, net_mask)) + (1 - m) * prefix
    return x


def rtc_prefix_weights(horizon: int, delay: int, exec_horizon: int) -> torch.Tensor:
    """RTC's soft mask ``W`` ``[H]`` (Black et al. 2025, Eq. 5): 1 on the ``d`` frozen actions,
    exponentially decaying over the rest of the overlap ``[d, H - s)``, 0 after it."""
    w = torch.zeros(horizon)
    w[:delay] = 1.0
    end = horizon - exec_horizon
    for i in range(delay, end):
        c = (end - i) / (end - delay + 1)
        w[i] = c * (math.exp(c) - 1) / (math.e - 1)
    return w


def rtc_guidance_weight(t: float, beta: float = 5.0) -> float:
    """ΠGDM guidance weight ``min(((1-t)/t)·(t² + (1-t)²)/(1-t)², β)`` (``β`` at ``t = 0``)."""
    if t <= 0.0:
        return beta
    if t >= 1.0:
        return 0.0
    return min((1 - t) / t * (t * t + (1 - t) ** 2) / (1 - t) ** 2, beta)


def rtc_sample(
    policy: FlowPolicy,
    obs: torch.Tensor,
    prefix: torch.Tensor,
    delay: int,
    exec_horizon: int,
    steps: int = 5,
    beta: float = 5.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Real-time chunking by inpainting (RTC): ``v <- v + w(t)·J^T (W ⊙ (Y - x̂_1))`` with
    ``x̂_1 = x + (1 - t)·v`` and the vector-Jacobian product through the policy."""
    b, h, a = prefix.shape
    weights = rtc_prefix_weights(h, delay, exec_horizon).to(prefix.device)[None, :, None]
    x = _noise((b, h, a), generator, prefix.device)
    dt = 1.0 / steps
    for k in range(steps):
        tk = k * dt
        t = torch.full((b,), tk, device=prefix.device)
        with torch.enable_grad():
            xg = x.detach().requires_grad_(True)
            v = policy(obs, xg, t)
            x1 = xg + (1 - tk) * v
            err = (prefix - x1) * weights
            (correction,) = torch.autograd.grad(x1, xg, err)
        x = (x + dt * (v.detach() + rtc_guidance_weight(tk, beta) * correction)).detach()
    return x


@torch.no_grad()
def bid_sample(
    policy: FlowPolicy,
    obs: torch.Tensor,
    prefix: torch.Tensor,
    delay: int,
    exec_horizon: int,
    samples: int = 16,
    steps: int = 5,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Bidirectional decoding, backward criterion only: ``samples`` chunks per observation, keep
    the one with the least ``Σ_τ W_τ ‖a_τ - â_τ‖₂`` to the previous chunk ``â`` (per-step plain,
    not squared, L2 over the action dimension, as upstream ``bid_action``'s
    ``jnp.linalg.norm(..., axis=-1)``; weights ``W`` of :func:`rtc_prefix_weights`)."""
    b, h, a = prefix.shape
    rep = obs.repeat_interleave(samples, dim=0)
    cand = euler_sample(policy, rep, steps, generator).view(b, samples, h, a)
    weights = rtc_prefix_weights(h, delay, exec_horizon).to(prefix.device)[None, None, :]
    loss = ((cand - prefix[:, None]).norm(dim=-1) * weights).sum(-1)  # [B, samples]
    best = loss.argmin(dim=1)
    return cand[torch.arange(b, device=prefix.device), best]


@torch.no_grad()
def training_time_rtc_sample(
    policy: FlowPolicy,
    obs: torch.Tensor,
    prefix: torch.Tensor,
    delay: int,
    steps: int = 5,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Training-time RTC (arXiv 2512.05964): the prefix is given clean with flow time 1 per token,
    the rest is integrated from noise."""
    b, h, a = prefix.shape
    m = delay_mask(delay, h, b).to(prefix.device)
    x = m[..., None] * _noise((b, h, a), generator, prefix.device) + (1 - m[..., None]) * prefix
    dt = 1.0 / steps
    for k in range(steps):
        t = m * (k * dt) + (1 - m)
        v = policy(obs, x, t)
        x = m[..., None] * (x + dt * v) + (1 - m[..., None]) * prefix
    return x
