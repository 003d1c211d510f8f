"""The asynchronous-evaluation wrapper on gymnasium environments other than ours."""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from robotics_remac.env import PointMassChaseEnv
from robotics_remac.gym_async import AsyncChunkWrapper, chunker_policy, evaluate_async
from robotics_remac.latency import MeasuredDelay
from robotics_remac.rollout import make_chunker


class Recorder(gym.Env):
    """A 1-action env that records every action it is sent; ends after ``length`` steps."""

    def __init__(self, length: int = 100) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.action_space = gym.spaces.Box(-1000.0, 1000.0, (1,), np.float32)
        self.length, self.sent, self.t = length, [], 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> Any:
        self.sent.append(float(action[0]))
        self.t += 1
        done = self.t >= self.length
        return np.full(1, self.t, np.float32), 1.0, done, False, {"is_success": done}


def numbered_policy():  # type: ignore[no-untyped-def]
    """Chunk ``k`` of the episode is ``[100 k, 100 k + 1, ..., 100 k + 7]``."""
    calls = [0]

    def policy(obs: Any) -> np.ndarray:
        chunk = 100.0 * calls[0] + np.arange(8.0)
        calls[0] += 1
        return chunk[:, None]

    return policy


def test_wrapper_executes_the_committed_prefix_then_the_new_chunk() -> None:
    # H = 8, d = 2, e = 4, derived by hand from upstream's execute_chunk: the first chunk runs
    # with the world paused (0..3); then each boundary runs the 2 committed actions left from the
    # previous chunk, then the new chunk's actions 2..3
    env = Recorder()
    stats = evaluate_async(env, numbered_policy(), 1, horizon=8, delay=2, exec_horizon=4)
    assert env.sent[:12] == [0, 1, 2, 3, 4, 5, 102, 103, 104, 105, 202, 203]
    assert stats.lengths.tolist() == [100] and stats.returns.tolist() == [100.0]
    assert stats.success.tolist() == [1.0] and stats.mean_delay == 2
    # the jump where execution switches to the new chunk: 102 - 5 = 97 every time
    assert stats.boundary_jerk == pytest.approx(97.0)


def test_wrapper_info_and_stops_at_the_end_of_the_episode() -> None:
    env = AsyncChunkWrapper(Recorder(length=6), horizon=8, delay=1, exec_horizon=4)
    assert env.action_space.shape == (8, 1)
    obs, info = env.reset(seed=0)
    assert info["delay"] == 0 and info["prefix"].shape == (8, 1) and not info["prefix"].any()
    chunk = np.arange(8.0)[:, None]
    obs, reward, terminated, _, info = env.step(chunk)
    assert info["steps"] == 4 and reward == 4.0 and info["delay"] == 1
    np.testing.assert_array_equal(info["prefix"][:, 0], [4, 5, 6, 7, 0, 0, 0, 0])
    obs, reward, terminated, _, info = env.step(chunk + 10)
    assert terminated and info["steps"] == 2 and obs[0] == 6  # stopped at the episode's end
    np.testing.assert_array_equal(info["executed"][:, 0], [4, 11])
    with pytest.raises(ValueError, match=r"shape \(8, 1\), got \(4, 1\)"):
        env.step(np.zeros((4, 1)))


def test_runs_any_gymnasium_env_with_a_plain_policy() -> None:
    env = gym.make("Pendulum-v1")  # gymnasium's own classic-control task: 200 steps, truncated
    stats = evaluate_async(env, lambda obs: np.zeros((8, 1)), 2, horizon=8, delay=3)
    assert stats.lengths.tolist() == [200, 200]
    assert np.isfinite(stats.returns).all() and (stats.returns < 0).all()
    assert np.isnan(stats.success).all()  # Pendulum reports no success
    assert stats.mean_delay == 3


def test_remac_style_chunkers_run_through_the_wrapper() -> None:
    # the prefix-aware planner is a batched chunker; on our env, through the generic wrapper
    policy = chunker_policy(make_chunker("planner", None), exec_horizon=4)
    stats = evaluate_async(
        PointMassChaseEnv(), policy, 8, horizon=8, delay=2, exec_horizon=4, prefix_aware=True
    )
    assert stats.success_rate >= 0.5  # the planner succeeds ~0.86 at d = 2 (300 episodes)
    zero = evaluate_async(PointMassChaseEnv(), lambda o: np.zeros((8, 2)), 8, horizon=8, delay=2)
    assert zero.success_rate == 0.0


def test_measured_delay_in_the_wrapper_follows_a_planted_slow_policy() -> None:
    md = MeasuredDelay(control_period=0.004, max_delay=3)  # real clock, 4 ms control period

    def slow(obs: Any) -> np.ndarray:
        time.sleep(0.009)  # >= 9 ms: 3 periods
        return np.zeros((8, 1))

    stats = evaluate_async(Recorder(length=20), slow, 1, horizon=8, delay=md, exec_horizon=4)
    assert stats.mean_delay == 3 and stats.mean_latency_s >= 0.009
    fast_md = MeasuredDelay(control_period=10.0, max_delay=3)
    stats = evaluate_async(
        Recorder(length=20), lambda o: np.zeros((8, 1)), 1, horizon=8, delay=fast_md
    )
    assert stats.mean_delay == 1  # any positive latency is at least one control step
    with pytest.raises(ValueError, match="must satisfy"):
        AsyncChunkWrapper(Recorder(), horizon=8, delay=MeasuredDelay(0.01, 5), exec_horizon=4)
