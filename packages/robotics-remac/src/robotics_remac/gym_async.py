"""Asynchronous evaluation of any chunking policy on any gymnasium environment.

:class:`AsyncChunkWrapper` turns a gymnasium ``Env`` with a 1-D ``Box`` action space ``[A]`` into
one whose action is a whole chunk ``[H, A]`` and whose ``step`` is one chunk boundary of the
asynchronous loop (upstream ``eval_flow.py``, :func:`robotics_remac.rollout.async_merge`): the
first chunk after ``reset`` runs with the world paused (``new[:e]``), every later one executes the
``d`` committed actions ``old[:d]`` that ran while it was computed, then ``new[d:e]``; the next
committed chunk is ``new[e:]`` zero-padded. ``info`` carries what a chunking policy needs for the
next call: ``prefix`` (the committed chunk ``[H, A]``) and ``delay`` (the delay to assume).

The delay is fixed (an ``int``) or measured online (:class:`robotics_remac.latency.MeasuredDelay`):
then the wrapper times each chunk from the observation it returned to the chunk it receives
(the policy's inference as the loop sees it) and executes ``d = min(cap, ceil(latency /
control_period))`` committed actions. :func:`evaluate_async` runs episodes with a plain policy
(``obs -> chunk``) or a prefix-aware one (``(obs, prefix, delay) -> chunk``, e.g. REMAC through
:func:`chunker_policy`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from robotics_remac.latency import MeasuredDelay
from robotics_remac.rollout import Chunker, async_merge, check_delay, default_exec_horizon

__all__ = ["AsyncChunkWrapper", "AsyncEvalStats", "chunker_policy", "evaluate_async"]


class AsyncChunkWrapper(gym.Wrapper):
    """Chunk-level asynchronous execution of ``env`` (see the module docstring).

    ``step(chunk)`` returns the observation after the executed actions, the summed reward,
    ``terminated``/``truncated`` of the last executed step (execution stops there) and ``info``:
    the inner env's last ``info`` plus ``prefix`` ``[H, A]``, ``delay`` (to assume next),
    ``executed_delay`` (``d`` of this boundary), ``latency_s`` (measured observation → chunk),
    ``executed`` ``[n, A]`` (the actions sent) and ``steps`` (``n``).
    """

    def __init__(
        self,
        env: gym.Env,
        horizon: int,
        delay: int | MeasuredDelay = 0,
        exec_horizon: int | None = None,
    ) -> None:
        super().__init__(env)
        space = env.action_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"need a 1-D Box action space, got {space}")
        self.online = delay if isinstance(delay, MeasuredDelay) else None
        cap = self.online.max_delay if self.online is not None else int(delay)
        self.exec_horizon = default_exec_horizon(cap) if exec_horizon is None else exec_horizon
        check_delay(cap, self.exec_horizon, horizon)
        self.horizon, self.fixed_delay = horizon, cap
        self.clock = self.online.clock if self.online is not None else time.perf_counter
        self.action_space = gym.spaces.Box(
            np.broadcast_to(space.low, (horizon, *space.shape)).copy(),
            np.broadcast_to(space.high, (horizon, *space.shape)).copy(),
            dtype=space.dtype,
        )
        self._old: np.ndarray | None = None
        self._t_obs = 0.0

    def _told(self) -> int:
        return self.online.assumed() if self.online is not None else self.fixed_delay

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._old = None  # the first chunk is computed with the world paused
        info = {**info, "prefix": np.zeros(self.action_space.shape), "delay": 0}
        self._t_obs = self.clock()
        return obs, info

    def step(self, chunk: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        latency = self.clock() - self._t_obs
        chunk = np.asarray(chunk, dtype=np.float64)
        if chunk.shape != self.action_space.shape:
            raise ValueError(
                f"a chunk must have shape {self.action_space.shape}, got {chunk.shape}"
            )
        e = self.exec_horizon
        if self._old is None:  # first chunk of the episode: world paused
            if self.online is not None:
                self.online.record(latency)
            d, execute = 0, chunk[:e]
            committed = np.concatenate([chunk[e:], np.zeros((e, chunk.shape[1]))])
        else:
            d = self.online.record(latency) if self.online is not None else self.fixed_delay
            merged, nxt = async_merge(
                torch.from_numpy(self._old[None]), torch.from_numpy(chunk[None]), d, e
            )
            execute, committed = merged[0].numpy(), nxt[0].numpy()
        total, n = 0.0, 0
        obs, terminated, truncated, info = None, False, False, {}
        for action in execute:
            obs, reward, terminated, truncated, info = self.env.step(
                action.astype(self.env.action_space.dtype)
            )
            total += float(reward)
            n += 1
            if terminated or truncated:
                break
        self._old = committed
        info = {
            **info,
            "prefix": committed,
            "delay": self._told(),
            "executed_delay": d,
            "latency_s": latency,
            "executed": execute[:n],
            "steps": n,
        }
        self._t_obs = self.clock()
        return obs, total, terminated, truncated, info


@dataclass
class AsyncEvalStats:
    """Per episode: ``returns``, ``lengths`` (env steps), ``success`` (``info["is_success"]`` of
    the last step; NaN where the env does not report it); over all boundaries after the first:
    ``mean_delay`` (executed ``d``), ``mean_latency_s`` and ``boundary_jerk`` (mean
    ``‖a_switch - a_prev‖`` where execution switches from the committed prefix to the new chunk)."""

    returns: np.ndarray
    lengths: np.ndarray
    success: np.ndarray
    mean_delay: float
    mean_latency_s: float
    boundary_jerk: float

    @property
    def success_rate(self) -> float:
        return float(np.nanmean(self.success)) if np.isfinite(self.success).any() else math.nan


def chunker_policy(chunker: Chunker, exec_horizon: int, seed: int = 0) -> Callable:
    """A prefix-aware single-environment policy ``(obs [O], prefix [H, A], d) -> chunk [H, A]``
    (numpy) from one of :func:`robotics_remac.rollout.make_chunker`'s batched chunkers."""
    gen = torch.Generator().manual_seed(seed)

    def policy(obs: Any, prefix: np.ndarray, delay: int) -> np.ndarray:
        o = torch.as_tensor(np.asarray(obs, dtype=np.float32))[None]
        p = torch.as_tensor(np.asarray(prefix, dtype=np.float32))[None]
        with torch.no_grad():
            return chunker(o, p, delay, exec_horizon, gen)[0].numpy()

    return policy


def evaluate_async(
    env: gym.Env,
    policy: Callable,
    episodes: int,
    horizon: int,
    delay: int | MeasuredDelay = 0,
    exec_horizon: int | None = None,
    prefix_aware: bool = False,
    seed: int = 0,
) -> AsyncEvalStats:
    """Runs ``episodes`` episodes (reset seeds ``seed + i``) of ``env`` under
    :class:`AsyncChunkWrapper`; ``policy(obs)`` or, with ``prefix_aware``,
    ``policy(obs, prefix, delay)`` returns a chunk ``[H, A]``."""
    wrapper = AsyncChunkWrapper(env, horizon, delay, exec_horizon)
    returns, lengths, success = [], [], []
    delays, latencies, jerks = [], [], []
    for i in range(episodes):
        obs, info = wrapper.reset(seed=seed + i)
        ret, length, prev, done, first = 0.0, 0, None, False, True
        while not done:
            if prefix_aware:
                chunk = policy(obs, info["prefix"], info["delay"])
            else:
                chunk = policy(obs)
            obs, reward, terminated, truncated, info = wrapper.step(chunk)
            ret, length, done = ret + reward, length + info["steps"], terminated or truncated
            executed, d = info["executed"], info["executed_delay"]
            if not first:
                delays.append(d)
                latencies.append(info["latency_s"])
                before = (executed[d - 1] if d > 0 else prev) if d < len(executed) else None
                if before is not None:
                    jerks.append(float(np.linalg.norm(executed[d] - before)))
            prev, first = executed[-1] if len(executed) else prev, False
        returns.append(ret)
        lengths.append(length)
        success.append(float(info["is_success"]) if "is_success" in info else math.nan)
    return AsyncEvalStats(
        returns=np.asarray(returns),
        lengths=np.asarray(lengths),
        success=np.asarray(success),
        mean_delay=float(np.mean(delays)) if delays else math.nan,
        mean_latency_s=float(np.mean(latencies)) if latencies else math.nan,
        boundary_jerk=float(np.mean(jerks)) if jerks else math.nan,
    )
