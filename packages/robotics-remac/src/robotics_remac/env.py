"""A delay-sensitive control task: a 2-D point mass chasing a moving target.

State per episode (float64): agent position ``p`` (2), agent velocity ``v`` (2), target position
``q`` (2), target velocity ``w`` (2). Dynamics (double integrator, ``DT`` = 0.05 s, actions
clipped to ``|u_i| <= U_MAX``): ``v <- v + DT·u``, ``p <- p + DT·v``. The target's velocity is a
clipped random walk, it bounces off the arena walls and with probability ``JUMP_PROB`` per step it
jumps to a uniform random position, so a plan made ``d`` steps ago can be wrong. Success: the
agent is within ``SUCCESS_RADIUS`` of the target with relative speed below ``SUCCESS_SPEED``
before step ``MAX_STEPS``.

Everything is vectorised over a batch of episodes (numpy ``[B, ...]``); the gymnasium
:class:`PointMassChaseEnv` is the batch of one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

__all__ = [
    "ACTION_DIM",
    "DEFAULT_PARAMS",
    "DT",
    "OBS_DIM",
    "ChaseParams",
    "ChaseState",
    "PointMassChaseEnv",
    "expert_action",
    "observe",
    "reset_batch",
    "step_batch",
]

DT = 0.05
U_MAX = 1.0
OBS_DIM = 8
ACTION_DIM = 2
ARENA = 1.0


@dataclass(frozen=True)
class ChaseParams:
    """Task constants (fixed before any policy was trained)."""

    max_steps: int = 120
    success_radius: float = 0.08
    success_speed: float = 0.15
    target_speed_max: float = 0.3
    target_accel_std: float = 0.03  # std of the per-step velocity random-walk increment
    jump_prob: float = 0.02
    action_noise: float = 0.1  # Gaussian noise added to executed actions (upstream eval: 0.1)
    kp: float = 6.25  # expert PD gains (critically damped, omega = 2.5 rad/s)
    kd: float = 5.0


DEFAULT_PARAMS = ChaseParams()


@dataclass
class ChaseState:
    """Batched state: ``p, v, q, w`` float64 ``[B, 2]``, ``t`` int ``[B]``, ``done`` bool ``[B]``,
    ``success`` bool ``[B]``."""

    p: np.ndarray
    v: np.ndarray
    q: np.ndarray
    w: np.ndarray
    t: np.ndarray
    done: np.ndarray
    success: np.ndarray

    def copy(self) -> ChaseState:
        return ChaseState(*(np.array(x, copy=True) for x in self.__dict__.values()))


def reset_batch(
    n: int, rng: np.random.Generator, params: ChaseParams = DEFAULT_PARAMS
) -> ChaseState:
    """``n`` fresh episodes: agent at rest at a random position, target elsewhere."""
    p = rng.uniform(-0.8 * ARENA, 0.8 * ARENA, size=(n, 2))
    q = rng.uniform(-0.8 * ARENA, 0.8 * ARENA, size=(n, 2))
    w = rng.uniform(-params.target_speed_max, params.target_speed_max, size=(n, 2))
    zeros = np.zeros((n, 2))
    return ChaseState(
        p, zeros.copy(), q, w, np.zeros(n, dtype=np.int64), np.zeros(n, bool), np.zeros(n, bool)
    )


def observe(state: ChaseState) -> np.ndarray:
    """Observation float32 ``[B, 8]``: ``[q - p, w - v, v, w]`` (relative target, own velocity)."""
    return np.concatenate([state.q - state.p, state.w - state.v, state.v, state.w], axis=1).astype(
        np.float32
    )


def expert_action(obs: np.ndarray, params: ChaseParams = DEFAULT_PARAMS) -> np.ndarray:
    """Analytic PD expert ``u = clip(kp·(q - p) + kd·(w - v))``; ``obs`` ``[B, 8]`` -> ``[B, 2]``."""
    obs = np.asarray(obs, dtype=np.float64)
    u = params.kp * obs[:, 0:2] + params.kd * obs[:, 2:4]
    return np.clip(u, -U_MAX, U_MAX)


def step_batch(
    state: ChaseState,
    action: np.ndarray,
    rng: np.random.Generator,
    params: ChaseParams = DEFAULT_PARAMS,
    *,
    add_noise: bool = True,
) -> ChaseState:
    """Advances every unfinished episode by one step in place and returns ``state``.

    ``action`` ``[B, 2]`` (clipped to ``U_MAX`` after the execution noise). Finished episodes
    (success or time-out) are frozen. The random draws do not depend on the actions, so two
    methods rolled out from the same seed see the same target motion and jumps.
    """
    n = state.p.shape[0]
    noise = rng.normal(0.0, params.action_noise, size=(n, 2))
    accel = rng.normal(0.0, params.target_accel_std, size=(n, 2))
    jump = rng.random(n) < params.jump_prob
    jump_to = rng.uniform(-0.8 * ARENA, 0.8 * ARENA, size=(n, 2))
    u = np.asarray(action, dtype=np.float64) + (noise if add_noise else 0.0)
    u = np.clip(np.nan_to_num(u), -U_MAX, U_MAX)
    live = ~state.done
    lv = live[:, None]
    v = state.v + DT * u
    p = np.clip(state.p + DT * v, -ARENA, ARENA)
    w = np.clip(state.w + accel, -params.target_speed_max, params.target_speed_max)
    q = state.q + DT * w
    bounce = np.abs(q) > ARENA
    w = np.where(bounce, -w, w)
    q = np.clip(q, -ARENA, ARENA)
    q = np.where(jump[:, None], jump_to, q)
    state.p = np.where(lv, p, state.p)
    state.v = np.where(lv, v, state.v)
    state.q = np.where(lv, q, state.q)
    state.w = np.where(lv, w, state.w)
    state.t = state.t + live
    dist = np.linalg.norm(state.q - state.p, axis=1)
    rel_speed = np.linalg.norm(state.w - state.v, axis=1)
    hit = live & (dist < params.success_radius) & (rel_speed < params.success_speed)
    state.success = state.success | hit
    state.done = state.done | hit | (state.t >= params.max_steps)
    return state


class PointMassChaseEnv(gym.Env):
    """Gymnasium wrapper of one episode of the chase task (``Box`` observation and action).

    ``reward`` is 1 on the step that succeeds, else 0; ``terminated`` on success, ``truncated``
    at ``max_steps``. ``info["expert_action"]`` is the PD expert's action at the new state.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, params: ChaseParams | None = None) -> None:
        self.params = params or ChaseParams()
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
        self.action_space = gym.spaces.Box(-U_MAX, U_MAX, (ACTION_DIM,), np.float32)
        self._state: ChaseState | None = None
        self._rng = np.random.default_rng()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._state = reset_batch(1, self._rng, self.params)
        obs = observe(self._state)
        return obs[0], {"expert_action": expert_action(obs, self.params)[0]}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        action = np.asarray(action, dtype=np.float64).reshape(1, ACTION_DIM)
        step_batch(self._state, action, self._rng, self.params)
        obs = observe(self._state)
        success = bool(self._state.success[0])
        truncated = bool(self._state.done[0]) and not success
        info = {"expert_action": expert_action(obs, self.params)[0], "is_success": success}
        return obs[0], float(success), success, truncated, info
