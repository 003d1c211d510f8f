"""Offline evaluation on a user's own LeRobot episodes (``robotics-remac eval --data DIR``; issue
38): how far each method's chunk is from the demonstration's actions under an inference delay,
without a simulator.

At every chunk boundary ``t = 0, e, 2e, ...`` of every episode (while ``t + H`` fits), the policy
sees the observation ``o_t`` and, as the committed prefix, the demonstration's own actions
``a_t..a_{t+d-1}`` (what a perfect previous chunk committed; zero-padded to ``[H, A]``); it is
told the delay ``d̂`` (``--assumed-delay``, default ``d``). The actions the asynchronous loop
executes from the new chunk are ``chunk[d:e]`` at once and ``chunk[e:e+d]`` as the next
boundary's committed prefix (``rollout.async_merge``, at a constant delay), i.e.
``chunk[d:d+e]`` (``e`` actions; ``d + e <= H``); their error is the mean over those steps of
the L2 distance to the demonstration's ``a_{t+d}..a_{t+d+e-1}``. Each
episode's boundaries are averaged and the interval is over episodes (the independent units).
The demonstration is one sample of the expert: the error measures agreement with it, not
success.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from robotics_remac.dataset_format import Episode

__all__ = ["boundary_batch", "offline_action_error", "offline_row", "run_offline"]


def boundary_batch(
    episodes: Sequence[Episode], horizon: int, exec_horizon: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The chunk boundaries of ``episodes``: observations ``[N, O]``, the demonstration's next
    ``horizon`` actions ``[N, H, A]`` and each boundary's episode position ``[N]`` (index into
    ``episodes``). An episode shorter than ``horizon`` has no boundary."""
    obs, acts, owner = [], [], []
    for i, ep in enumerate(episodes):
        for t in range(0, len(ep.actions) - horizon + 1, exec_horizon):
            obs.append(ep.states[t])
            acts.append(ep.actions[t : t + horizon])
            owner.append(i)
    if not obs:
        raise ValueError(f"no episode has the {horizon} frames one chunk needs")
    return np.stack(obs), np.stack(acts), np.asarray(owner)


@torch.no_grad()
def offline_action_error(
    chunker: Callable[..., torch.Tensor],
    batch: tuple[np.ndarray, np.ndarray, np.ndarray],
    delay: int,
    exec_horizon: int,
    assumed_delay: int | None = None,
    seed: int = 0,
    max_batch: int = 1024,
) -> np.ndarray:
    """Per-episode mean action error (module docstring) of ``chunker`` (a
    :func:`robotics_remac.rollout.make_chunker` chunker, ``(obs, prefix, d, e, gen) -> [B, H,
    A]``) at delay ``delay``; ``batch``: :func:`boundary_batch`. Returns ``[episodes with a
    boundary]`` in episode order."""
    obs, acts, owner = batch
    d, e = delay, exec_horizon
    d_hat = d if assumed_delay is None else assumed_delay
    gen = torch.Generator().manual_seed(seed)
    errors = []
    for lo in range(0, len(obs), max_batch):
        o = torch.from_numpy(obs[lo : lo + max_batch])
        a = torch.from_numpy(acts[lo : lo + max_batch])
        prefix = torch.zeros_like(a)
        prefix[:, :d] = a[:, :d]
        chunk = chunker(o, prefix, d_hat, e, gen)
        executed = slice(d, d + e)
        errors.append(
            torch.linalg.vector_norm(chunk[:, executed] - a[:, executed], dim=-1).mean(-1)
        )
    per_boundary = torch.cat(errors).numpy().astype(np.float64)
    keys = np.unique(owner)
    return np.asarray([per_boundary[owner == k].mean() for k in keys])


def offline_row(
    method: str, d: int, e: int, d_hat: int, per_episode: np.ndarray, seed: int
) -> dict[str, Any]:
    """One ``offline_results.csv`` row: the mean action error over episodes with its 95 %
    interval (bootstrap over episodes; a t-interval below 10 episodes; none for one episode)."""
    from iclr26_common.effects import mean_interval

    row: dict[str, Any] = {
        "method": method,
        "delay": d,
        "assumed_delay": d_hat,
        "exec_horizon": e,
        "action_error": float(per_episode.mean()),
        "error_low": "",
        "error_high": "",
        "episodes": len(per_episode),
    }
    if len(per_episode) > 1:
        interval = mean_interval(per_episode, seed=seed, units="episodes", binary=False)
        row["error_low"], row["error_high"] = interval.low, interval.high
    return row


def run_offline(ns: Any, methods: list[str], out: Any) -> int:
    """``eval --data DIR``: reads the episodes, loads the policies the methods need (their state
    and action widths must be the data's), evaluates every (method, delay) cell with progress and
    writes ``offline_results.csv`` into the checked output folder ``out``."""
    from iclr26_common.outputs import write_text
    from iclr26_common.progress import progress
    from robotics_remac.cli import _csv_text, _delay_cells, load_policies
    from robotics_remac.dataset_reader import read_lerobot_dataset
    from robotics_remac.rollout import METHODS, make_chunker

    episodes = read_lerobot_dataset(ns.data, fps=None)
    dims = {"obs_dim": episodes[0].states.shape[1], "action_dim": episodes[0].actions.shape[1]}

    def check(path: Any, policy: Any) -> Any:
        for key, need in dims.items():
            if policy.config[key] != need:
                raise ValueError(f"{path}: policy {key} {policy.config[key]}, {ns.data} has {need}")
        return policy

    _, policies = load_policies(ns, methods, check)
    horizon = next(iter(policies.values())).horizon
    cells = _delay_cells(ns, methods, horizon)
    batches: dict[int, Any] = {}
    rows = []
    with out:
        for method, d, e, d_hat in progress(cells, description="offline cells", quiet=ns.quiet):
            if e not in batches:
                batches[e] = boundary_batch(episodes, horizon, e)
            spec = METHODS[method]
            chunker = make_chunker(spec.sampler, policies[spec.policy])
            errors = offline_action_error(chunker, batches[e], d, e, d_hat, ns.seed)
            rows.append(offline_row(method, d, e, d_hat, errors, ns.seed))
        write_text(out.path / "offline_results.csv", _csv_text(rows))
    for row in rows:
        interval = (
            f"95 % [{row['error_low']:.4f}, {row['error_high']:.4f}]" if row["episodes"] > 1 else ""
        )
        print(
            f"{row['method']:12s} d={row['delay']} action error {row['action_error']:.4f} "
            f"{interval} over {row['episodes']} episode(s)"
        )
    print(f"wrote {out.path / 'offline_results.csv'}")
    return 0
