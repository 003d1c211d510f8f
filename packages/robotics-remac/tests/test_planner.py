"""The prefix-aware planner (issue 25's ceiling baseline)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from robotics_remac.env import ChaseParams, observe, reset_batch, step_batch
from robotics_remac.planner import nominal_step, prefix_aware_plan, prefix_aware_planner
from robotics_remac.rollout import METHODS, make_chunker, rollout

# The nominal model is exact when the world has no randomness (no noise, no target random walk,
# no jumps) and nothing reaches a wall.
QUIET = ChaseParams(action_noise=0.0, target_accel_std=0.0, jump_prob=0.0)


def _interior_state(n: int, seed: int):  # type: ignore[no-untyped-def]
    state = reset_batch(n, np.random.default_rng(seed), QUIET)
    state.p *= 0.3  # well inside the arena: a few steps cannot reach a wall
    state.q *= 0.3
    state.w *= 0.5
    return state


def test_nominal_step_is_the_environment_without_randomness() -> None:
    state = _interior_state(16, 0)
    rng = np.random.default_rng(1)
    obs = observe(state).astype(np.float64)
    for _ in range(6):
        u = rng.uniform(-1.5, 1.5, size=(16, 2))  # beyond U_MAX too: both clip
        predicted = nominal_step(obs, u)
        step_batch(state, u, rng, QUIET)
        obs = observe(state).astype(np.float64)
        np.testing.assert_allclose(predicted, obs, atol=1e-6)


def test_plan_keeps_the_prefix_and_plans_from_where_the_prefix_leads() -> None:
    state = _interior_state(4, 2)
    obs = observe(state)
    prefix = np.random.default_rng(3).uniform(-1, 1, size=(4, 8, 2))
    plan = prefix_aware_plan(obs, prefix, 3, QUIET)
    assert plan.shape == (4, 8, 2)
    np.testing.assert_array_equal(plan[:, :3], prefix[:, :3])
    # after the 3 prefix actions really run, the planner's next action is the expert's there
    for j in range(3):
        step_batch(state, prefix[:, j], np.random.default_rng(0), QUIET)
    from robotics_remac.env import expert_action

    np.testing.assert_allclose(plan[:, 3], expert_action(observe(state), QUIET), atol=1e-5)
    # a planner that ignored the prefix would plan from o_t instead: a different action
    assert not np.allclose(plan[:, 3], prefix_aware_plan(obs, prefix, 0, QUIET)[:, 0], atol=1e-3)


def test_planner_is_a_method_and_a_ceiling_that_tolerates_delay() -> None:
    assert METHODS["planner"].policy == "" and METHODS["planner"].sampler == "planner"
    chunker = make_chunker("planner", None)
    out = chunker(torch.zeros(2, 8), torch.ones(2, 8, 2), 2, 4, torch.Generator())
    assert out.shape == (2, 8, 2) and torch.equal(out[:, :2], torch.ones(2, 2, 2))
    # in a world it models exactly, the delay costs it (almost) nothing, while the expert's plan
    # made from o_t and executed late (naive) loses; noise and jumps are what cost it in the task
    quiet = dataclasses.replace(QUIET, max_steps=120)
    planner4 = rollout(prefix_aware_planner(quiet), 200, 4, 8, 4, seed=5, params=quiet)
    planner0 = rollout(prefix_aware_planner(quiet), 200, 0, 8, 4, seed=5, params=quiet)
    assert planner4.success_rate >= planner0.success_rate - 0.02

    def unaware(obs, prefix, d, e, gen):  # type: ignore[no-untyped-def]
        return prefix_aware_planner(quiet)(obs, prefix, 0, e, gen)

    naive4 = rollout(unaware, 200, 4, 8, 4, seed=5, params=quiet)
    assert naive4.prefix_deviation > planner4.prefix_deviation
