"""The flow-matching action-chunk policy (MLP-Mixer with AdaLN) and REMAC's masked LoRA.

Shapes: observation ``obs`` float ``[B, obs_dim]``; noisy chunk ``x`` float ``[B, H, action_dim]``;
flow time ``t`` float ``[B]`` (one time per chunk) or ``[B, H]`` (one per action, used by
training-time RTC); REMAC mask ``mask`` float ``[B, H]`` with ``m[τ] = 1[τ >= d]`` (1 = to be
generated, 0 = committed prefix). The velocity ``v = policy(obs, x, t, mask)`` has ``x``'s shape;
flow matching uses ``x_t = (1 - t)·noise + t·A`` and target ``u = A - noise`` (paper Eq. 1-2).

LoRA (``LoRALinear``, paper Sec. 3.2): ``y = W x + b + g(m) ⊙ (α/r)·B A drop(x + P m)``, with a
learned ``mask_proj`` ``P`` and the gate ``g(m)`` = the mask of the output token (channel-mixing
and projection layers act per token; the second token-mixing layer's outputs are tokens; the first
token-mixing layer's outputs are hidden features, so its gate is 1). :func:`merge_lora` folds the
update into the weights for one fixed delay ``d``, exactly (channel layers: the merged weights on
every token, the rank-``r`` update subtracted again on the ``d`` prefix tokens).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import torch
from torch import nn
from torch.nn import functional as F

__all__ = [
    "FlowPolicy",
    "LoRALinear",
    "LowRankSplitLinear",
    "SplitLinear",
    "add_lora",
    "delay_mask",
    "lora_disabled",
    "lora_parameters",
    "merge_lora",
]

LoRAKind = Literal["channel", "token_in", "token_out"]


def delay_mask(delay: torch.Tensor | int, horizon: int, batch: int | None = None) -> torch.Tensor:
    """Prefix mask ``m[τ] = 1[τ >= d]`` float ``[B, H]`` for delays ``d`` int ``[B]`` (or one int)."""
    tau = torch.arange(horizon)
    if isinstance(delay, int):
        return (tau >= delay).float().expand(batch or 1, horizon).clone()
    return (tau[None, :] >= delay.to(torch.long)[:, None]).float()


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding of flow time ``t`` ``[...]`` in [0, 1] -> ``[..., dim]``."""
    half = dim // 2
    steps = torch.arange(half, dtype=torch.float32, device=t.device)
    freqs = torch.exp(-math.log(10000.0) * steps / half)
    args = 1000.0 * t[..., None].float() * freqs
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a (masked) low-rank update; see the module docstring."""

    def __init__(
        self,
        base: nn.Linear,
        kind: LoRAKind,
        horizon: int,
        rank: int = 4,
        alpha: float = 8.0,
        dropout: float = 0.1,
        use_mask: bool = True,
    ) -> None:
        super().__init__()
        self.base, self.kind, self.rank, self.use_mask = base, kind, rank, use_mask
        self.scale = alpha / rank
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.dropout = nn.Dropout(dropout)
        self.mask_proj = None
        if use_mask:
            self.mask_proj = nn.Linear(1 if kind == "channel" else horizon, base.in_features)
            nn.init.normal_(self.mask_proj.weight, std=0.02)
            nn.init.zeros_(self.mask_proj.bias)
        self.enabled = True

    def mask_shift(self, mask: torch.Tensor) -> torch.Tensor:
        """``P m``: ``[B, H, in]`` (channel layers) or ``[B, 1, in]`` (token layers)."""
        assert self.mask_proj is not None
        if self.kind == "channel":
            return self.mask_proj(mask[..., None])
        return self.mask_proj(mask)[:, None, :]

    def delta_weight(self) -> torch.Tensor:
        """``(α/r)·B A`` float ``[out, in]``."""
        return self.scale * self.lora_B @ self.lora_A

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        y = self.base(x)
        if not self.enabled:
            return y
        masked = self.use_mask and mask is not None
        inp = x + self.mask_shift(mask) if masked else x
        update = F.linear(F.linear(self.dropout(inp), self.lora_A), self.lora_B) * self.scale
        if masked and self.kind == "channel":
            update = update * mask[..., None]
        elif masked and self.kind == "token_out":
            update = update * mask[:, None, :]
        return y + update


class SplitLinear(nn.Module):
    """Merged per-token linear for one delay: ``prefix`` weights on tokens ``< d``, ``rest`` on the
    others, computed as **one** matmul over the stacked weights ``[W_prefix; W_rest]`` (``[2·out,
    in]``) and a per-token select, as one merged ``nn.Linear`` is one kernel (before issue 38: two
    matmuls on the token slices and a concatenation). Twice the layer's multiply-adds: since the
    review of issue 38 :func:`merge_lora` builds :class:`LowRankSplitLinear` unless asked for
    ``split="stacked"`` (kept for the benchmark's comparison).

    Input ``[B, H, in]`` (tokens on dim 1) -> ``[B, H, out]``.
    """

    def __init__(self, delay: int, prefix: nn.Linear, rest: nn.Linear) -> None:
        super().__init__()
        self.delay, self.out_features = delay, rest.out_features
        self.weight = nn.Parameter(torch.cat([prefix.weight, rest.weight]), requires_grad=False)
        self.bias = nn.Parameter(torch.cat([prefix.bias, rest.bias]), requires_grad=False)
        self.register_buffer("is_prefix", torch.zeros(0, dtype=torch.bool), persistent=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        h, out = x.shape[1], self.out_features
        if self.is_prefix.shape != (h, 1):  # [H, 1]: True on the d prefix tokens (built once)
            self.is_prefix = (torch.arange(h, device=x.device) < self.delay)[:, None]
        y = F.linear(x, self.weight, self.bias)  # [B, H, 2·out]: both weights, one matmul
        return torch.where(self.is_prefix, y[..., :out], y[..., out:])


class LowRankSplitLinear(nn.Module):
    """Merged per-token linear for one delay, the layer :func:`merge_lora` builds (since the
    review of issue 38): the merged weights ``W + ΔW``, ``b + ΔW·P(1)`` on **every** token (one
    ``nn.Linear``-sized matmul), then the rank-``r`` LoRA update subtracted again on the ``d``
    prefix tokens only: ``y[:, :d] -= (α/r)·B (A x[:, :d]) + ΔW·P(1)``, which leaves ``W x + b``
    there. Exact like :class:`SplitLinear` (equal up to float rounding) at ``in·out + d·r·(in +
    out)`` multiply-adds per chunk row instead of the stacked layer's ``2·H·in·out``.

    Input ``[B, H, in]`` (tokens on dim 1) -> ``[B, H, out]``.
    """

    def __init__(
        self,
        delay: int,
        merged: nn.Linear,
        down: torch.Tensor,
        up: torch.Tensor,
        bias_delta: torch.Tensor,
    ) -> None:
        super().__init__()
        self.delay, self.out_features = delay, merged.out_features
        self.weight = nn.Parameter(merged.weight.detach().clone(), requires_grad=False)
        self.bias = nn.Parameter(merged.bias.detach().clone(), requires_grad=False)
        # the prefix correction: ``up @ down`` = ΔW (rank r), ``bias_delta`` = ΔW·P(1)
        self.down = nn.Parameter(down.detach().clone(), requires_grad=False)  # [r, in]
        self.up = nn.Parameter(up.detach().clone(), requires_grad=False)  # [out, r]
        self.bias_delta = nn.Parameter(bias_delta.detach().clone(), requires_grad=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        y = F.linear(x, self.weight, self.bias)  # [B, H, out]: the merged layer on every token
        if self.delay > 0:
            prefix = x[:, : self.delay]
            y[:, : self.delay] -= F.linear(F.linear(prefix, self.down), self.up, self.bias_delta)
        return y


def _call(layer: nn.Module, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if isinstance(layer, LoRALinear | SplitLinear | LowRankSplitLinear):
        return layer(x, mask)
    return layer(x)


class MixerBlock(nn.Module):
    """Token mixing then channel mixing, each pre-normed and modulated by AdaLN (shift, scale,
    gate from the conditioning ``c`` ``[B, 1 or H, C]``)."""

    def __init__(self, horizon: int, channels: int, hidden: int, token_hidden: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(channels, elementwise_affine=False)
        self.tok1 = nn.Linear(horizon, token_hidden)
        self.tok2 = nn.Linear(token_hidden, horizon)
        self.norm2 = nn.LayerNorm(channels, elementwise_affine=False)
        self.ch1 = nn.Linear(channels, hidden)
        self.ch2 = nn.Linear(hidden, channels)
        self.ada = nn.Linear(channels, 6 * channels)
        nn.init.zeros_(self.ada.weight)
        nn.init.zeros_(self.ada.bias)

    def forward(self, x: torch.Tensor, c: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        s1, k1, g1, s2, k2, g2 = self.ada(F.silu(c)).chunk(6, dim=-1)
        h = (self.norm1(x) * (1 + k1) + s1).transpose(1, 2)  # [B, C, H]
        h = _call(self.tok2, F.gelu(_call(self.tok1, h, mask)), mask).transpose(1, 2)
        x = x + g1 * h
        h = self.norm2(x) * (1 + k2) + s2
        h = _call(self.ch2, F.gelu(_call(self.ch1, h, mask)), mask)
        return x + g2 * h


class FlowPolicy(nn.Module):
    """Flow-matching action-chunk policy: ``v = f(obs, x_t, t)`` (paper Sec. 3.1, upstream
    ``model.py``: MLP-Mixer with AdaLN time conditioning; upstream sizes 256/512/64, 4 layers)."""

    def __init__(
        self,
        obs_dim: int = 8,
        action_dim: int = 2,
        horizon: int = 8,
        channels: int = 64,
        hidden: int = 128,
        token_hidden: int = 32,
        depth: int = 2,
    ) -> None:
        super().__init__()
        self.config = {
            "obs_dim": obs_dim,
            "action_dim": action_dim,
            "horizon": horizon,
            "channels": channels,
            "hidden": hidden,
            "token_hidden": token_hidden,
            "depth": depth,
        }
        self.horizon, self.action_dim, self.channels = horizon, action_dim, channels
        self.in_proj = nn.Linear(action_dim, channels)
        self.pos = nn.Parameter(torch.randn(horizon, channels) * 0.02)
        self.time_mlp = nn.Sequential(
            nn.Linear(channels, channels), nn.SiLU(), nn.Linear(channels, channels)
        )
        self.obs_mlp = nn.Sequential(
            nn.Linear(obs_dim, channels), nn.SiLU(), nn.Linear(channels, channels)
        )
        self.blocks = nn.ModuleList(
            MixerBlock(horizon, channels, hidden, token_hidden) for _ in range(depth)
        )
        self.norm_out = nn.LayerNorm(channels, elementwise_affine=False)
        self.ada_out = nn.Linear(channels, 2 * channels)
        nn.init.zeros_(self.ada_out.weight)
        nn.init.zeros_(self.ada_out.bias)
        self.out_proj = nn.Linear(channels, action_dim)

    def forward(
        self,
        obs: torch.Tensor,
        x: torch.Tensor,
        t: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Velocity ``[B, H, A]`` for ``obs`` ``[B, O]``, ``x`` ``[B, H, A]``, ``t`` ``[B]`` or
        ``[B, H]``, optional REMAC ``mask`` ``[B, H]``."""
        if t.dim() == 0:
            t = t.expand(x.shape[0])
        temb = self.time_mlp(timestep_embedding(t, self.channels))
        if temb.dim() == 2:
            temb = temb[:, None, :]
        c = temb + self.obs_mlp(obs)[:, None, :]
        h = _call(self.in_proj, x, mask) + self.pos
        for block in self.blocks:
            h = block(h, c, mask)
        shift, scale = self.ada_out(F.silu(c)).chunk(2, dim=-1)
        h = self.norm_out(h) * (1 + scale) + shift
        return _call(self.out_proj, h, mask)


def _lora_targets(policy: FlowPolicy) -> Iterator[tuple[nn.Module, str, LoRAKind]]:
    yield policy, "in_proj", "channel"
    yield policy, "out_proj", "channel"
    for block in policy.blocks:
        yield block, "tok1", "token_in"
        yield block, "tok2", "token_out"
        yield block, "ch1", "channel"
        yield block, "ch2", "channel"


def add_lora(
    policy: FlowPolicy,
    rank: int = 4,
    alpha: float = 8.0,
    dropout: float = 0.1,
    use_mask: bool = True,
) -> FlowPolicy:
    """Freezes ``policy`` and wraps every mixer linear in :class:`LoRALinear` (in place)."""
    for p in policy.parameters():
        p.requires_grad_(False)
    for parent, name, kind in _lora_targets(policy):
        base = getattr(parent, name)
        if isinstance(base, LoRALinear):
            raise ValueError("policy already has LoRA layers")
        setattr(
            parent, name, LoRALinear(base, kind, policy.horizon, rank, alpha, dropout, use_mask)
        )
    policy.lora_config = {"rank": rank, "alpha": alpha, "dropout": dropout, "use_mask": use_mask}
    return policy


def lora_parameters(policy: nn.Module) -> list[nn.Parameter]:
    """The trainable LoRA parameters (``lora_A``, ``lora_B``, ``mask_proj``)."""
    return [p for n, p in policy.named_parameters() if "lora_" in n or "mask_proj" in n]


@contextmanager
def lora_disabled(policy: nn.Module) -> Iterator[None]:
    """Runs the frozen backbone alone (LoRA off) inside the block."""
    layers = [m for m in policy.modules() if isinstance(m, LoRALinear)]
    states = [m.enabled for m in layers]
    for m in layers:
        m.enabled = False
    try:
        yield
    finally:
        for m, s in zip(layers, states, strict=True):
            m.enabled = s


def _linear(weight: torch.Tensor, bias: torch.Tensor) -> nn.Linear:
    lin = nn.Linear(weight.shape[1], weight.shape[0])
    lin.weight.data.copy_(weight)
    lin.bias.data.copy_(bias)
    return lin


SplitKind = Literal["lowrank", "stacked"]


@torch.no_grad()
def merge_lora(policy: FlowPolicy, delay: int = 0, split: SplitKind = "lowrank") -> FlowPolicy:
    """A copy of ``policy`` with every :class:`LoRALinear` folded into plain layers for delay ``d``.

    Exact for the fixed mask ``m = 1[τ >= d]`` (dropout off): channel layers compute the base
    weights on the ``d`` prefix tokens and ``W + (α/r)BA``, bias ``b + (α/r)BA·P(1)``, on the rest
    (a plain ``nn.Linear`` when ``d = 0``); token layers become one ``nn.Linear`` with the update
    on the generated rows. Without the mask (LoRA-only) every layer becomes ``W + (α/r)BA``. Call
    the merged policy with ``mask=None``.

    ``split`` picks the channel layers' form for ``d > 0``: ``"lowrank"`` (default, since the
    review of issue 38; what claim (d) times) is :class:`LowRankSplitLinear`, the merged layer on
    every token and the rank-``r`` update subtracted on the prefix tokens; ``"stacked"`` is
    :class:`SplitLinear`, one matmul over ``[W; W + ΔW]`` (twice the layer's multiply-adds).
    """
    if split not in ("lowrank", "stacked"):
        raise ValueError(f"split must be 'lowrank' or 'stacked', got {split!r}")
    merged = copy.deepcopy(policy).eval()
    horizon = policy.horizon
    m = (torch.arange(horizon) >= delay).float()
    for parent, name, _ in _lora_targets(merged):
        layer = getattr(parent, name)
        if not isinstance(layer, LoRALinear):
            continue
        w, b = layer.base.weight, layer.base.bias
        dw = layer.delta_weight()
        if not layer.use_mask:
            setattr(parent, name, _linear(w + dw, b))
            continue
        if layer.kind == "channel":
            shift = layer.mask_proj(torch.ones(1))  # P(1), [in]
            rest = _linear(w + dw, b + dw @ shift)
            if delay == 0:
                setattr(parent, name, rest)
            elif split == "stacked":
                setattr(parent, name, SplitLinear(delay, _linear(w, b), rest))
            else:
                up = layer.scale * layer.lora_B
                split_layer = LowRankSplitLinear(delay, rest, layer.lora_A, up, dw @ shift)
                setattr(parent, name, split_layer)
        elif layer.kind == "token_in":
            shift = layer.mask_proj(m)  # [in]
            setattr(parent, name, _linear(w + dw, b + dw @ shift))
        else:  # token_out: rows are output tokens, gated by m
            shift = layer.mask_proj(m)
            setattr(parent, name, _linear(w + m[:, None] * dw, b + m * (dw @ shift)))
    merged.merged_delay = delay
    return merged
