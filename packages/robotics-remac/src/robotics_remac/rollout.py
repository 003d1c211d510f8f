"""Batched asynchronous execution of chunk policies (upstream ``eval_flow.py``) and the methods.

At each chunk boundary the policy sees ``o_t`` and needs ``d`` steps (the inference delay) to
produce a new chunk; meanwhile the first ``d`` actions left from the previous chunk run. The
executed actions are ``old[:d]`` then ``new[d:e]`` (``e`` = execution horizon,
``max(1, d) <= e <= H - d``), and the next ``old`` is ``new[e:]`` padded with zeros. ``sync``
pauses the world during inference (executes ``new[:e]``); ``te`` is ACT's temporal ensembling.
All episodes of a cell run as one batch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from robotics_remac.env import (
    DEFAULT_PARAMS,
    ChaseParams,
    expert_action,
    observe,
    reset_batch,
    step_batch,
)
from robotics_remac.latency import MeasuredDelay
from robotics_remac.model import FlowPolicy
from robotics_remac.sampling import (
    bid_sample,
    euler_sample,
    prefix_preserved_sample,
    rtc_sample,
    training_time_rtc_sample,
)

__all__ = [
    "METHODS",
    "Chunker",
    "MethodSpec",
    "async_merge",
    "check_delay",
    "default_exec_horizon",
    "loop_latency",
    "make_chunker",
    "paired_difference_ci",
    "rollout",
    "wilson_interval",
]

# chunker(obs [B, O], prefix [B, H, A], assumed delay d, execution horizon e, generator) -> chunk
Chunker = Callable[[torch.Tensor, torch.Tensor, int, int, torch.Generator], torch.Tensor]
TE_DECAY = 0.01  # ACT temporal ensembling: weight exp(-0.01·i), i = 0 the oldest prediction


@dataclass(frozen=True)
class MethodSpec:
    """``policy``: which trained policy (key; "" = none, the planner); ``sampler``: how a chunk is
    drawn; ``execution``: "async", "sync" or "te"."""

    policy: str
    sampler: str
    execution: str = "async"
    label: str = ""


METHODS: dict[str, MethodSpec] = {
    "sync": MethodSpec("base", "euler", "sync", "synchronous (world paused)"),
    "naive": MethodSpec("base", "euler", "async", "naive async"),
    "te": MethodSpec("base", "euler", "te", "temporal ensembling (ACT)"),
    "bid": MethodSpec("base", "bid", "async", "bidirectional decoding (backward, 16 samples)"),
    "rtc": MethodSpec("base", "rtc", "async", "RTC (ΠGDM guidance, β=5)"),
    "ttrtc": MethodSpec("training_time_rtc", "ttrtc", "async", "training-time RTC"),
    "lora_only": MethodSpec("lora_only", "euler", "async", "LoRA-only finetune"),
    "remac": MethodSpec("remac", "prefix_zeros", "async", "REMAC (prefix-preserved)"),
    "remac_noise": MethodSpec("remac", "prefix_noise", "async", "REMAC (noise start)"),
    "remac_remainder": MethodSpec(
        "remac", "prefix_remainder", "async", "REMAC (start from the remainder, as upstream)"
    ),
    "planner": MethodSpec("", "planner", "async", "prefix-aware planner (ceiling, knows dynamics)"),
}


def default_exec_horizon(delay: int) -> int:
    """``e = max(1, d)``: a new chunk is requested as soon as the previous one finished."""
    return max(1, delay)


def check_delay(delay: int, exec_horizon: int, horizon: int) -> None:
    """Raises ``ValueError`` unless ``0 <= d < H`` and ``max(1, d) <= e <= H - d``."""
    if not 0 <= delay < horizon:
        raise ValueError(f"delay d={delay} must satisfy 0 <= d < H={horizon}")
    if not max(1, delay) <= exec_horizon <= horizon - delay:
        raise ValueError(
            f"execution horizon e={exec_horizon} must satisfy max(1, d) <= e <= H - d "
            f"(d={delay}, H={horizon})"
        )


def make_chunker(
    sampler: str,
    policy: FlowPolicy | None,
    steps: int = 5,
    bid_samples: int = 16,
    beta: float = 5.0,
) -> Chunker:
    """The chunk sampler ``sampler`` of :data:`METHODS` bound to ``policy`` (``planner``: the
    model-based :func:`robotics_remac.planner.prefix_aware_planner`, no policy)."""
    if sampler == "planner":
        from robotics_remac.planner import prefix_aware_planner

        return prefix_aware_planner()

    def chunk(obs, prefix, d, e, gen):  # type: ignore[no-untyped-def]
        if sampler == "euler":
            return euler_sample(policy, obs, steps, gen)
        if sampler in ("prefix_zeros", "prefix_noise", "prefix_remainder"):
            start = sampler.removeprefix("prefix_")
            merged = getattr(policy, "merged_delay", None)
            return prefix_preserved_sample(
                policy, obs, prefix, d, steps, start, gen, use_mask=merged is None
            )
        if sampler == "rtc":
            return rtc_sample(policy, obs, prefix, d, e, steps, beta, gen)
        if sampler == "bid":
            return bid_sample(policy, obs, prefix, d, e, bid_samples, steps, gen)
        if sampler == "ttrtc":
            return training_time_rtc_sample(policy, obs, prefix, d, steps, gen)
        raise ValueError(f"unknown sampler {sampler!r}")

    return chunk


def async_merge(
    old: torch.Tensor, new: torch.Tensor, delay: int, exec_horizon: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk boundary of the asynchronous loop (upstream ``eval_flow.py``,
    ``execute_chunk``): the executed actions ``cat(old[:, :d], new[:, d:e])`` ``[B, e, A]`` and
    the next committed chunk ``cat(new[:, e:], 0)`` ``[B, H, A]`` (zero-padded)."""
    execute = torch.cat([old[:, :delay], new[:, delay:exec_horizon]], dim=1)
    pad = torch.zeros(new.shape[0], exec_horizon, new.shape[2], dtype=new.dtype)
    return execute, torch.cat([new[:, exec_horizon:], pad.to(new.device)], dim=1)


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a success rate."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def paired_difference_ci(
    a: np.ndarray, b: np.ndarray, z: float = 1.96
) -> tuple[float, float, float]:
    """Mean of the paired per-episode differences ``a_i - b_i`` (``a``, ``b`` ``[n]`` successes of
    two methods on the *same* episodes) with its 95 % interval ``mean ± z·sd/√n`` (normal
    approximation, sample sd): ``(mean, low, high)``."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or len(a) < 2:
        raise ValueError(
            f"need two equal-length 1-D samples of >= 2 episodes, got {a.shape}, {b.shape}"
        )
    diff = a - b
    mean = float(diff.mean())
    half = z * float(diff.std(ddof=1)) / math.sqrt(len(diff))
    return mean, mean - half, mean + half


@dataclass
class RolloutStats:
    """Per-cell results: success per episode, mean deviation of the actions executed in the first
    ``max(1, d)`` steps after each boundary from the expert's action at the current state, and the
    mean jump ``‖a_switch - a_prev‖`` where execution switches to the new chunk.
    ``chunk_latency_s``: per boundary of the loop (not the first, world-paused chunk), the wall
    time from reading the observation to the committed next chunk (observe, chunker, merge)."""

    success: np.ndarray
    prefix_deviation: float
    boundary_jerk: float
    steps: float
    extra: dict[str, float] = field(default_factory=dict)
    chunk_latency_s: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def success_rate(self) -> float:
        return float(self.success.mean())

    def row(self) -> dict[str, float]:
        lo, hi = wilson_interval(int(self.success.sum()), len(self.success))
        return {
            "success": self.success_rate,
            "ci_low": lo,
            "ci_high": hi,
            "episodes": len(self.success),
            "prefix_deviation": self.prefix_deviation,
            "boundary_jerk": self.boundary_jerk,
            "mean_steps": self.steps,
        }


def _te_action(chunks: list[tuple[int, int, torch.Tensor]], s: int) -> torch.Tensor:
    """Temporal ensemble at step ``s`` over chunks ``(t0, available_from, chunk)`` (oldest first)."""
    preds = [c[:, s - t0] for t0, avail, c in chunks if avail <= s < t0 + c.shape[1]]
    w = torch.tensor([math.exp(-TE_DECAY * i) for i in range(len(preds))])
    stacked = torch.stack(preds, 0)
    return (w[:, None, None] * stacked).sum(0) / w.sum()


@torch.no_grad()
def rollout(
    chunker: Chunker,
    n_episodes: int,
    delay: int | MeasuredDelay,
    horizon: int,
    exec_horizon: int | None = None,
    execution: str = "async",
    assumed_delay: int | None = None,
    seed: int = 0,
    params: ChaseParams = DEFAULT_PARAMS,
    progress: Callable[[int], None] | None = None,
) -> RolloutStats:
    """Runs ``n_episodes`` episodes at once under inference delay ``delay``.

    ``assumed_delay`` (default ``delay``) is the delay the chunker is told (a misestimated delay
    when different); the executed prefix always has the true ``delay`` actions. With a
    :class:`~robotics_remac.latency.MeasuredDelay` as ``delay`` the delay is measured online:
    each boundary's true delay is ``ceil(latency / control_period)`` of its own chunk (capped),
    the chunker is told ``delay.assumed()``; ``extra`` then holds ``mean_delay``,
    ``mean_assumed_delay``, ``underestimated`` (fraction of boundaries told too short a delay)
    and ``capped`` (fraction whose latency exceeded the cap).
    """
    online = delay if isinstance(delay, MeasuredDelay) else None
    if online is not None:
        if assumed_delay is not None:
            raise ValueError("assumed_delay is measured online with a MeasuredDelay; pass None")
        cap = online.max_delay
        e = default_exec_horizon(cap) if exec_horizon is None else exec_horizon
        check_delay(cap, e, horizon)
        delay, d_hat, clock = cap, online.assumed(), online.clock
    else:
        e = default_exec_horizon(delay) if exec_horizon is None else exec_horizon
        check_delay(delay, e, horizon)
        d_hat, clock = delay if assumed_delay is None else assumed_delay, time.perf_counter
    check_delay(d_hat, max(1, min(e, horizon - d_hat)), horizon)
    if execution not in ("async", "sync", "te"):
        raise ValueError(f"execution must be async, sync or te, got {execution!r}")
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    state = reset_batch(n_episodes, rng, params)
    obs = torch.from_numpy(observe(state))
    t_first = clock()
    old = chunker(obs, torch.zeros(n_episodes, horizon, 2), 0, e, gen)  # first chunk: sync
    if online is not None:
        online.record(clock() - t_first)
    latencies: list[float] = []
    told: list[int] = []
    true_delays: list[int] = []
    capped_before = online.capped if online is not None else 0
    te_chunks: list[tuple[int, int, torch.Tensor]] = [(0, 0, old)]
    prev: np.ndarray | None = None
    dev_sum = jerk_sum = 0.0
    dev_n = jerk_n = 0
    t = 0
    while t < params.max_steps and not state.done.all():
        t_obs = clock()
        if online is not None:
            d_hat = online.assumed()
        obs = torch.from_numpy(observe(state))
        new = chunker(obs, old, d_hat, e, gen)
        if online is not None:
            delay = online.record(clock() - t_obs)
            told.append(d_hat)
            true_delays.append(delay)
        execute, next_old = async_merge(old, new, delay, e)
        latencies.append(clock() - t_obs)
        switch = 0 if execution == "sync" else delay % e  # where the source chunk changes
        if execution == "sync":
            execute = new[:, :e]
        if execution == "te":
            te_chunks = [c for c in te_chunks if c[0] + horizon > t] + [(t, t + delay, new)]
        for i in range(e):
            live = ~state.done
            a = (_te_action(te_chunks, t + i) if execution == "te" else execute[:, i]).numpy()
            if live.any() and i < max(1, delay):
                expert = expert_action(observe(state), params)
                dev_sum += float(np.linalg.norm(a - expert, axis=1)[live].sum())
                dev_n += int(live.sum())
            if prev is not None and i == switch and live.any():
                jerk_sum += float(np.linalg.norm(a - prev, axis=1)[live].sum())
                jerk_n += int(live.sum())
            step_batch(state, a, rng, params)
            prev = a
        t += e
        old = next_old
        if progress is not None:
            progress(e)
    extra: dict[str, float] = {}
    if online is not None and told:
        extra = {
            "mean_delay": float(np.mean(true_delays)),
            "mean_assumed_delay": float(np.mean(told)),
            "underestimated": float(np.mean(np.less(told, true_delays))),
            "capped": (online.capped - capped_before) / len(told),
        }
    return RolloutStats(
        success=state.success.copy(),
        prefix_deviation=dev_sum / max(dev_n, 1),
        boundary_jerk=jerk_sum / max(jerk_n, 1),
        steps=float(state.t.mean()),
        extra=extra,
        chunk_latency_s=np.asarray(latencies),
    )


def loop_latency(
    chunkers: dict[str, Callable],
    batches: Sequence[int],
    min_chunks: int,
    delay: int,
    horizon: int,
    exec_horizon: int,
    seed: int = 0,
) -> dict[str, dict[int, np.ndarray]]:
    """Per-chunk latencies (seconds) of each chunker inside :func:`rollout`, as the asynchronous
    loop sees them (observation read to committed next chunk, ``RolloutStats.chunk_latency_s``),
    alternating whole rollouts between the chunkers so machine load hits them alike.

    For each batch size ``B`` rollouts of ``B`` episodes (round ``r`` uses episode seed
    ``seed + r`` for every chunker) alternate between the chunkers until each has at least
    ``min_chunks`` boundaries. Returns ``{name: {B: latencies [n >= min_chunks]}}``.
    """
    if min_chunks < 1 or not batches:
        raise ValueError("need min_chunks >= 1 and at least one batch size")
    out: dict[str, dict[int, np.ndarray]] = {name: {} for name in chunkers}
    for batch in batches:
        got: dict[str, list[float]] = {name: [] for name in chunkers}
        r = 0
        while min(len(v) for v in got.values()) < min_chunks:
            for name, chunker in chunkers.items():
                if len(got[name]) < min_chunks:
                    stats = rollout(chunker, batch, delay, horizon, exec_horizon, seed=seed + r)
                    got[name].extend(stats.chunk_latency_s.tolist())
            r += 1
        for name in chunkers:
            out[name][batch] = np.asarray(got[name])
    return out
