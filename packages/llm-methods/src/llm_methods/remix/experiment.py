"""Experiment ``llm-methods.remix``: accuracy vs number of rollouts, on-policy GRPO vs ReMix.

A tiny Llama pretrained here on the task format (``pretrain.TaskModelSpec``: 2 x 64, BPE 400,
400 supervised steps on generated add/sub word problems with operands 2-20) is RL-finetuned on a
fixed pool of generated problems with the exact-match reward, by GRPO (on-policy, mu = 1) and by
ReMix (p = 0.4, m = 2, N = 2, KL-Convex, reincarnation), same lr, beta, group size and prompts
per iteration, for several seeds. Every ``eval_every`` iterations: greedy exact-match accuracy
on the pool and the mean sampled response length. Rollouts = completions sampled for training.

Claims and thresholds, fixed here before any run:

  (a) ReMix reaches the fixed accuracy TARGET with <= CLAIM_A_MAX_ROLLOUT_FRACTION of the
      rollouts GRPO needs to reach it: per seed, rollouts(ReMix reaches TARGET) / rollouts(GRPO
      reaches TARGET), the whole 95 % t-interval over seeds at or below the threshold;
  (b) ReMix's final accuracy is not lower than GRPO's by more than CLAIM_B_MAX_DROP: per seed
      acc(ReMix) − acc(GRPO) (same seed, same pool), the whole 95 % t-interval over seeds at or
      above −CLAIM_B_MAX_DROP.

Issue 41 (fixed before any run with it): TARGET is a fixed accuracy, not GRPO's final value
(which moved with GRPO's own end point): 0.70, the issue-27 pilot's GRPO final seed mean (0.713,
5 seeds, 64 iterations) rounded down; runs are 3.5x longer (224 iterations; 64 ran in 133 s on
idle cores) so GRPO has passed its rise. A seed in which ReMix never reaches TARGET counts at
its lower bound, ReMix's total rollouts / GRPO's rollouts to TARGET (ReMix samples at least
(1 − p) of GRPO's rollouts, so that bound is above ½ and the seed counts against the claim).

Preconditions (positive controls, fixed with the criteria; a failed one makes the claim
inconclusive): GRPO learned (final seed-mean pool accuracy >= start + MIN_GRPO_GAIN); for (a),
GRPO reached TARGET in every seed and ReMix trained on replayed groups (off-policy group slots
> 0 in every seed).

Issue 27 reading (recorded before the rerun): before reincarnation ReMix samples fresh rollouts
only for the ``P - round(p P)`` prompts whose slots are not replay groups (earlier versions
sampled all P and discarded the replaced groups, so ReMix paid GRPO's rollouts), and T and the
lambda(t) schedule count gradient steps.
"""

from __future__ import annotations

import copy
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common import Claim, Experiment, Precondition, Result, seed_everything
from iclr26_common.effects import t_effect

__all__ = ["EXPERIMENT", "SCALE", "claims", "run", "run_curve", "settings"]

PAPER = (
    "Squeeze the Soaked Sponge: Efficient Off-policy Reinforcement Finetuning for Large "
    "Language Model (ReMix, arXiv 2507.06892)"
)
CLAIM_A_MAX_ROLLOUT_FRACTION = 0.5
CLAIM_B_MAX_DROP = 0.02
MIN_GRPO_GAIN = 0.02  # precondition: the on-policy baseline learned something
TARGET = 0.70  # (a)'s fixed accuracy (issue 41; see the module doc)
POOL_SEED, HELDOUT_SEED, N_HELDOUT = 7, 99, 128
# paper step constants (T = 100, lambda from t = 50 every 10) scaled by SCALE for our iterations
SCALE = 0.24
# chosen on GRPO alone (seeds 10, 11, not the experiment's): GRPO's final pool accuracy 0.633 at
# 1e-4 vs 0.562 at 3e-4; ReMix takes the same value
LR = 1e-4


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"seeds": [0, 1, 2], "iterations": 8, "eval_every": 4, "pool": 32}
    return {"seeds": [0, 1, 2, 3, 4], "iterations": 224, "eval_every": 8, "pool": 64}


def rl_config(algo: str) -> Any:
    from llm_methods.remix.model import RLConfig

    return RLConfig(
        algo=algo,
        group_size=8,
        prompts_per_step=8,
        max_new_tokens=16,
        lr=LR,
        beta=0.04,
        p_off=0.4,
        utd=2,
        n_past=2,
        reincarnate_at=round(100 * SCALE),
        lam_start=round(50 * SCALE),
        lam_every=max(1, round(10 * SCALE)),
    )


def run_curve(
    model: Any,
    tok: Any,
    algo: str,
    pool: list,
    seed: int,
    iterations: int,
    eval_every: int,
    heldout: list | None = None,
) -> dict[str, Any]:
    """Train a copy of ``model`` with ``algo`` on ``pool``; the learning curve and final eval."""
    import torch

    from llm_methods.remix.data import make_reward_fn
    from llm_methods.remix.runner import RLRunner

    seed_everything(seed)
    policy = copy.deepcopy(model).train()
    cfg = rl_config(algo)
    runner = RLRunner(policy, tok, cfg, make_reward_fn(["exact_match"]), seed=seed)
    opt = torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=0.0)
    rng = random.Random(seed)
    order: list = []
    curve = {"rollouts": [0], "accuracy": [runner.evaluate(pool)["accuracy"]]}
    start = time.perf_counter()
    for k in range(iterations):
        if len(order) < cfg.prompts_per_step:
            order += rng.sample(pool, len(pool))
        batch, order = order[: cfg.prompts_per_step], order[cfg.prompts_per_step :]
        runner.step(batch, opt)
        if (k + 1) % eval_every == 0 or k + 1 == iterations:
            curve["rollouts"].append(runner.rollouts)
            curve["accuracy"].append(runner.evaluate(pool)["accuracy"])
    wall = time.perf_counter() - start
    out = {
        "curve": curve,
        "lengths": [h["length"] for h in runner.history],
        "off_policy_groups": int(sum(h["off_policy_groups"] for h in runner.history)),
        "zero_std_frac": float(np.mean([h["zero_std_frac"] for h in runner.history])),
        "rewards": [h["reward"] for h in runner.history],
        "rollouts": runner.rollouts,
        "grad_steps": runner.grad_steps,
        "wall_s": wall,
    }
    if heldout:
        out["heldout"] = runner.evaluate(heldout)["accuracy"]
    return out


def rollouts_to_reach(rollouts: list[int], acc: np.ndarray, target: float) -> float:
    """The first rollout count > 0 at which the (seed-mean) accuracy reaches ``target``; inf if
    never (the untrained start does not count)."""
    for r, a in zip(rollouts, acc, strict=True):
        if r > 0 and a >= target - 1e-9:
            return float(r)
    return float("inf")


def _finite_or_none(value: float) -> float | None:
    """``value``, or None for inf (never reached; JSON has no inf)."""
    return None if value == float("inf") else value


def claims(m: dict[str, Any]) -> list[Claim]:
    """Claims (a) and (b) with their preconditions, judged from measured numbers only (pure).

    ``m``: ``grpo_start`` (seed-mean pool accuracy before training), ``grpo_final`` /
    ``remix_final`` (final pool accuracy per seed, the same seeds in the same order),
    ``grpo_reach`` / ``remix_reach`` (per seed, the first rollout count at which that run's pool
    accuracy reached :data:`TARGET`; None: never), ``remix_rollouts`` (ReMix's rollouts per run,
    per seed), ``remix_off_policy_groups`` (replayed group slots per seed)."""
    grpo_final = np.asarray(m["grpo_final"], float)
    remix_final = np.asarray(m["remix_final"], float)
    grpo_learned = Precondition(
        "GRPO learned",
        f"GRPO final seed-mean pool accuracy - start >= {MIN_GRPO_GAIN}",
        {"grpo_final": round(float(grpo_final.mean()), 4), "start": round(m["grpo_start"], 4)},
        float(grpo_final.mean()) - m["grpo_start"] >= MIN_GRPO_GAIN,
    )
    grpo_reach = list(m["grpo_reach"])
    reached = Precondition(
        "GRPO reached the target",
        f"GRPO's pool accuracy reached {TARGET} in every seed",
        {"grpo_rollouts_to_target": grpo_reach},
        bool(grpo_reach) and all(r is not None for r in grpo_reach),
    )
    off = list(m["remix_off_policy_groups"])
    replay_used = Precondition(
        "ReMix trained on replayed groups",
        "off-policy group slots > 0 in every seed",
        {"off_policy_groups_per_seed": off},
        bool(off) and min(off) > 0,
    )
    fractions, censored = [], 0
    for g, r, total in zip(grpo_reach, m["remix_reach"], m["remix_rollouts"], strict=True):
        if g is None:  # GRPO never reached it: the control fails; 1.0 keeps the effect defined
            fractions.append(1.0)
        elif r is None:  # ReMix never reached it: its lower bound
            fractions.append(total / g)
            censored += 1
        else:
            fractions.append(r / g)
    return [
        Claim.test(
            text=f"ReMix reaches a fixed accuracy ({TARGET}) with at most half of the rollouts "
            "GRPO needs to reach it.",
            effect=t_effect(
                fractions,
                name=f"rollouts(ReMix to {TARGET}) / rollouts(GRPO to {TARGET})",
                threshold=CLAIM_A_MAX_ROLLOUT_FRACTION,
                direction="<=",
                units="seeds",
                binary=False,
            ),
            preconditions=[grpo_learned, reached, replay_used],
            measured={
                "fraction_per_seed": [round(x, 4) for x in fractions],
                "remix_rollouts_to_target": list(m["remix_reach"]),
                "grpo_rollouts_to_target": grpo_reach,
                "seeds_where_remix_never_reached": censored,
            },
        ),
        Claim.test(
            text="ReMix's final accuracy is not lower than GRPO's by more than 2 points.",
            effect=t_effect(
                100 * (remix_final - grpo_final),
                name="acc(ReMix) - acc(GRPO), final",
                unit="pts",
                threshold=-100 * CLAIM_B_MAX_DROP,
                direction=">=",
                units="seeds (ReMix - GRPO on the same seed and pool)",
                binary=False,
            ),
            preconditions=[grpo_learned],
            measured={
                "remix_final": [round(float(x), 4) for x in remix_final],
                "grpo_final": [round(float(x), 4) for x in grpo_final],
            },
        ),
    ]


def run(quick: bool, out_dir: Path) -> Result:
    from iclr26_common.device import choose_device
    from llm_methods.lm import load_lm
    from llm_methods.lm.threads import one_thread
    from llm_methods.remix.data import records_to_problems, synth_problems
    from llm_methods.remix.pretrain import TaskModelSpec, ensure_task_model

    cfg = settings(quick)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    spec = TaskModelSpec()
    results: dict[str, list[dict[str, Any]]] = {"grpo": [], "remix": []}
    with one_thread():
        lm = load_lm(str(ensure_task_model(spec)), choose_device(), "float32")
        pretrain_s = time.perf_counter() - start
        pool = records_to_problems(synth_problems(cfg["pool"], POOL_SEED, spec.max_value))
        heldout = records_to_problems(synth_problems(N_HELDOUT, HELDOUT_SEED, spec.max_value))
        for seed in cfg["seeds"]:
            for algo in results:
                results[algo].append(
                    run_curve(
                        lm.model,
                        lm.tokenizer,
                        algo,
                        pool,
                        seed,
                        cfg["iterations"],
                        cfg["eval_every"],
                        heldout,
                    )
                )
    x = results["grpo"][0]["curve"]["rollouts"]
    acc = {a: np.array([r["curve"]["accuracy"] for r in rs]) for a, rs in results.items()}
    mean = {a: v.mean(0) for a, v in acc.items()}
    final = {a: float(mean[a][-1]) for a in results}
    total = float(x[-1])
    to_reach = {
        a: rollouts_to_reach(results[a][0]["curve"]["rollouts"], mean[a], TARGET) for a in results
    }
    reached = {a: _finite_or_none(v) for a, v in to_reach.items()}  # JSON-safe
    per_seed_reach = {
        a: [
            _finite_or_none(
                rollouts_to_reach(
                    r["curve"]["rollouts"], np.asarray(r["curve"]["accuracy"]), TARGET
                )
            )
            for r in rs
        ]
        for a, rs in results.items()
    }
    lengths = {a: np.array([r["lengths"] for r in rs]).mean(0) for a, rs in results.items()}
    xs = {a: results[a][0]["curve"]["rollouts"] for a in results}  # the same in every seed
    _plot(out_dir / "remix_accuracy_vs_rollouts.png", xs, acc, "greedy accuracy (pool)")
    _plot_lengths(out_dir / "remix_response_length.png", lengths, cfg["iterations"])
    per_seed_final = {a: [round(float(v[-1]), 4) for v in acc[a]] for a in results}
    heldout_acc = {
        a: round(float(np.mean([r["heldout"] for r in rs])), 4) for a, rs in results.items()
    }
    initial = float(acc["grpo"][:, 0].mean())
    off_groups = [r["off_policy_groups"] for r in results["remix"]]
    claims_ = claims(
        {
            "grpo_start": initial,
            "grpo_final": [float(v[-1]) for v in acc["grpo"]],
            "remix_final": [float(v[-1]) for v in acc["remix"]],
            "grpo_reach": per_seed_reach["grpo"],
            "remix_reach": per_seed_reach["remix"],
            "remix_rollouts": [int(r["rollouts"]) for r in results["remix"]],
            "remix_off_policy_groups": off_groups,
        }
    )
    start_len = {a: round(float(v[: max(1, len(v) // 8)].mean()), 3) for a, v in lengths.items()}
    end_len = {a: round(float(v[-max(1, len(v) // 8) :].mean()), 3) for a, v in lengths.items()}
    metrics: dict[str, Any] = {
        "rollouts": {a: [int(r) for r in v] for a, v in xs.items()},
        "accuracy_mean": {a: [round(float(v), 4) for v in m] for a, m in mean.items()},
        "accuracy_std": {a: [round(float(v), 4) for v in acc[a].std(0)] for a in results},
        "initial_accuracy": round(float(acc["grpo"][0, 0]), 4),
        "final_accuracy": {a: round(v, 4) for a, v in final.items()},
        "heldout_accuracy": heldout_acc,
        "target": TARGET,
        "rollouts_to_target_seed_mean_curve": reached,
        "rollouts_to_target_per_seed": per_seed_reach,
        "final_accuracy_per_seed": per_seed_final,
        "grad_steps_per_rollout": {
            a: round(rs[0]["grad_steps"] / rs[0]["rollouts"], 5) for a, rs in results.items()
        },
        "rollouts_per_run": {a: int(rs[0]["rollouts"]) for a, rs in results.items()},
        "remix_off_policy_groups": off_groups,
        "zero_std_group_fraction": {
            a: round(float(np.mean([r["zero_std_frac"] for r in rs])), 4)
            for a, rs in results.items()
        },
        "response_length_start_end": {a: [start_len[a], end_len[a]] for a in results},
        "train_wall_s": {a: round(sum(r["wall_s"] for r in rs), 1) for a, rs in results.items()},
        "pretrain_or_load_s": round(pretrain_s, 1),
        "wall_s": round(time.perf_counter() - start, 1),
    }
    return Result(
        summary=(
            f"Pool greedy accuracy {metrics['initial_accuracy']:.3f} at start; after "
            f"{int(total)} rollouts GRPO {final['grpo']:.3f}, ReMix {final['remix']:.3f} "
            f"(seed means). ReMix's seed-mean curve reached the target {TARGET} "
            + (
                f"after {to_reach['remix']:.0f} rollouts (GRPO's: {to_reach['grpo']:.0f}). "
                if reached["remix"] is not None
                else "at no evaluation point. "
            )
            + "Mean sampled "
            f"response length start->end: GRPO {start_len['grpo']}->{end_len['grpo']}, "
            f"ReMix {start_len['remix']}->{end_len['remix']} tokens."
        ),
        metrics=metrics,
        seeds=list(cfg["seeds"]),
        scale=(
            f"task model 2x64 Llama (BPE 400) pretrained {spec.steps} steps on "
            f"{spec.n_train} generated problems; RL pool {cfg['pool']} problems, "
            f"{cfg['iterations']} iterations x 8 prompts x G=8 (GRPO {int(total)} "
            f"rollouts/run, ReMix {metrics['rollouts_per_run']['remix']}), "
            f"lr {LR}, beta 0.04, eps 0.2; ReMix p=0.4 m=2 N=2, T={round(100 * SCALE)}, "
            f"lambda from t={round(50 * SCALE)} every {max(1, round(10 * SCALE))} "
            f"gradient steps (paper steps x {SCALE}); {len(cfg['seeds'])} seeds"
        ),
        claims=claims_,
    )


def _plot(path: Path, xs: dict[str, list[int]], acc: dict[str, np.ndarray], ylabel: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for algo, values in acc.items():
        m, s = values.mean(0), values.std(0)
        ax.plot(xs[algo], m, marker="o", label=algo)
        ax.fill_between(xs[algo], m - s, m + s, alpha=0.2)
    ax.set_xlabel("rollouts (sampled completions)")
    ax.set_ylabel(ylabel)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_lengths(path: Path, lengths: dict[str, np.ndarray], iterations: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for algo, values in lengths.items():
        ax.plot(range(1, iterations + 1), values, label=algo)
    ax.set_xlabel("iteration")
    ax.set_ylabel("mean sampled response length (tokens)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


EXPERIMENT = Experiment(
    name="llm-methods.remix",
    paper=PAPER,
    claim="Mix-policy proximal policy gradient with replay, a higher update-to-data ratio, the "
    "KL-Convex constraint and policy reincarnation reaches on-policy GRPO's accuracy with far "
    "fewer rollouts, without losing final accuracy.",
    run=run,
)
