"""The prefix-aware planner: a model-based ceiling baseline for asynchronous chunking (issue 25).

It knows the task's nominal dynamics, which no learned policy does. At a chunk boundary it sees
``o_t`` and the committed prefix ``old[:d]`` (the actions that will run while "inference" takes
``d`` steps), predicts the observation ``ô_{t+d}`` by rolling the prefix through the nominal model,
and fills the rest of the chunk with the PD expert rolled out open loop from ``ô_{t+d}``:

    chunk[:, :d] = prefix[:, :d],   chunk[:, d + j] = expert(ô_{t+d+j}),  j = 0..H-d-1.

Nominal model (:func:`nominal_step`, in observation space ``[q - p, w - v, v, w]``): the double
integrator with the action clipped to ``|u_i| <= U_MAX``, ``v' = v + DT·u``, the target moving at
constant velocity ``w`` (no random walk, jumps, wall bounces or action noise; no arena clipping):
``(q - p)' = (q - p) + DT·(w - v')``. A plan made from ``o_t`` is therefore still wrong where the
target jumps or the noise pushes the agent; what it removes is the inconsistency between the
committed prefix and the new chunk, which is what REMAC learns to handle.
"""

from __future__ import annotations

import numpy as np
import torch

from robotics_remac.env import DEFAULT_PARAMS, DT, U_MAX, ChaseParams, expert_action

__all__ = ["expert_plan", "nominal_step", "prefix_aware_plan", "prefix_aware_planner"]


def nominal_step(obs: np.ndarray, action: np.ndarray) -> np.ndarray:
    """One nominal step of observations ``[B, 8]`` under actions ``[B, 2]`` (module docstring)."""
    obs = np.asarray(obs, dtype=np.float64)
    u = np.clip(np.asarray(action, dtype=np.float64), -U_MAX, U_MAX)
    v = obs[:, 4:6] + DT * u
    w = obs[:, 6:8]
    rel = obs[:, 0:2] + DT * (w - v)
    return np.concatenate([rel, w - v, v, w], axis=1)


def expert_plan(obs: np.ndarray, steps: int, params: ChaseParams = DEFAULT_PARAMS) -> np.ndarray:
    """The PD expert rolled out open loop in the nominal model: ``[B, steps, 2]``."""
    o = np.asarray(obs, dtype=np.float64)
    plan = np.zeros((len(o), steps, 2))
    for j in range(steps):
        plan[:, j] = expert_action(o, params)
        o = nominal_step(o, plan[:, j])
    return plan


def prefix_aware_plan(
    obs: np.ndarray, prefix: np.ndarray, delay: int, params: ChaseParams = DEFAULT_PARAMS
) -> np.ndarray:
    """``[B, H, 2]``: the committed ``prefix[:, :d]``, then the expert plan from ``ô_{t+d}``."""
    prefix = np.asarray(prefix, dtype=np.float64)
    o = np.asarray(obs, dtype=np.float64)
    for j in range(delay):
        o = nominal_step(o, prefix[:, j])
    horizon = prefix.shape[1]
    return np.concatenate([prefix[:, :delay], expert_plan(o, horizon - delay, params)], axis=1)


def prefix_aware_planner(params: ChaseParams = DEFAULT_PARAMS):  # type: ignore[no-untyped-def]
    """A rollout chunker (``robotics_remac.rollout.Chunker``) for :func:`prefix_aware_plan`; it
    uses the delay it is told, so a misestimated delay misleads it too."""

    def chunk(obs, prefix, d, e, gen):  # type: ignore[no-untyped-def]
        plan = prefix_aware_plan(obs.cpu().numpy(), prefix.cpu().numpy(), d, params)
        return torch.from_numpy(plan).to(prefix.dtype)

    return chunk
