from __future__ import annotations

import numpy as np
from gymnasium.utils.env_checker import check_env

from robotics_remac.env import (
    ChaseParams,
    PointMassChaseEnv,
    expert_action,
    observe,
    reset_batch,
    step_batch,
)


def test_gymnasium_env_passes_the_checker() -> None:
    env = PointMassChaseEnv()
    check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=0)
    assert obs.shape == (8,) and info["expert_action"].shape == (2,)
    obs, reward, _, _, info = env.step(np.zeros(2))
    assert obs.shape == (8,) and reward in (0.0, 1.0)


def _delayed_expert_success(delay: int, n: int = 400) -> float:
    params = ChaseParams()
    rng = np.random.default_rng(0)
    state = reset_batch(n, rng, params)
    history = [observe(state)] * (delay + 1)
    for _ in range(params.max_steps):
        step_batch(state, expert_action(history[-1 - delay], params), rng, params)
        history.append(observe(state))
    return float(state.success.mean())


def test_expert_succeeds_and_delay_hurts_it() -> None:
    on_time, late = _delayed_expert_success(0), _delayed_expert_success(4)
    assert on_time > 0.85
    assert late < on_time - 0.05


def test_target_motion_does_not_depend_on_actions() -> None:
    params = ChaseParams()
    a = reset_batch(5, np.random.default_rng(1), params)
    b = a.copy()
    ra, rb = np.random.default_rng(2), np.random.default_rng(2)
    for _ in range(10):
        step_batch(a, np.ones((5, 2)), ra, params)
        step_batch(b, -np.ones((5, 2)), rb, params)
    live = ~(a.done | b.done)
    np.testing.assert_allclose(a.q[live], b.q[live])
    assert not np.allclose(a.p, b.p)


def test_finished_episodes_are_frozen_and_actions_clipped() -> None:
    params = ChaseParams(max_steps=3, action_noise=0.0)
    state = reset_batch(4, np.random.default_rng(0), params)
    rng = np.random.default_rng(0)
    v0 = state.v.copy()
    step_batch(state, np.full((4, 2), 100.0), rng, params)
    np.testing.assert_allclose(state.v - v0, 0.05)  # |u| clipped to 1, dt 0.05
    for _ in range(5):
        step_batch(state, np.zeros((4, 2)), rng, params)
    assert state.done.all() and (state.t == 3).all()
