"""Experiment ``llm-methods.mas2``: MAS² with CTO vs a fixed MAS, generate-once and untrained MAS².

A simulated pool (``configs/sim_pool.yaml``: four models with known per-skill accuracy, token
price and API failure rate) on offline arithmetic and unit-tested code tasks; generated programs
really run in the sandbox. Systems, each on the same held-out tasks:

- ``fixed``: a hand-designed MAS (AnswerGenerate + Programmer + AnswerGenerate -> ScEnsemble,
  all on the strongest model), no rectifier;
- ``generate_once``: generator + implementer trained by CTO without rectifier branches, run
  without a rectifier;
- ``mas2_no_cto``: the tri-agent team with uniform (untrained) policies, rectifier on;
- ``mas2_cto``: the tri-agent team trained by CTO (K=4, N=2, R=2), rectifier on.

Claims and thresholds, fixed here before any run (issue 42), each decided by a paired 95 %
interval over the held-out tasks (each task's success averaged over its eval runs and seeds; the
seeds' own t-interval where wider, :func:`iclr26_common.effects.points_effect`):

  (a) success(mas2_cto) − success(generate_once) >= CLAIM_MIN_GAIN_PTS points; control: the
      baseline has headroom (success(generate_once) <= 1 − CLAIM_MIN_GAIN_PTS / 100);
  (b) the paper's headline: success(mas2_cto) − success(fixed) >= CLAIM_MIN_GAIN_PTS points;
      control: headroom of the fixed MAS likewise;
  (c) at matched cost: success(mas2_cto) − success(fixed_budget) >= CLAIM_MIN_GAIN_PTS points,
      where ``fixed_budget`` is the fixed MAS's workflow at no more than MAS²'s cost; controls:
      the paired 95 % interval of cost(fixed_budget) − cost(mas2_cto) lies wholly <= 0 (else
      the costs are not matched), and headroom of ``fixed_budget``.

The matched-cost baseline (c), registered before its success was ever computed (the review of
2026-12-07: the earlier (c) compared with the fixed MAS at a tenth of its cost, so it repeated
(b)'s effect): ``fixed_budget`` runs the same hand-designed workflow (``sc_mixed``) with the
fixed MAS's own selection rule, "every node on the model with the highest listed skill", applied
under MAS²'s budget: per task type the affordable model with the highest listed skill for that
type (``reason`` for arithmetic, ``code`` for code tasks) -> ``BUDGET_MODEL`` = mathy
(reason 0.80) for arithmetic, coder (code 0.88) for code. Affordable: its ``sc_mixed`` cost from
the pool's prices and token counts (1190 tokens x verbosity without API errors: tiny $0.10, mathy
$0.71, coder $0.95, large $15.5 per 1k tasks) is below MAS²'s $1.47 per 1k tasks of the
2026-12-07 run; ``large`` is the only model over it. Like the fixed MAS's rule it ignores the API failure rate.
The cost control checks the match on every run. Superiority (not non-inferiority) so that a
null method (the baseline in MAS²'s place) is not held; the paper's Pareto claim is that no
system at MAS²'s cost succeeds as often.

The earlier "(b) on the cost–success Pareto front" was vacuous (the cheapest system is
non-dominated by definition, and CTO's reward penalises cost): (c) replaces it.
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common import Claim, Experiment, Precondition, Result, seed_everything
from iclr26_common.effects import format_effect, paired_interval, points_effect

__all__ = ["EXPERIMENT", "claims", "run", "settings"]

PAPER = "MAS²: Self-Generative, Self-Configuring, Self-Rectifying Multi-Agent Systems (arXiv 2509.24323)"
SYSTEMS = ("fixed", "generate_once", "mas2_no_cto", "mas2_cto", "fixed_budget")
CLAIM_MIN_GAIN_PTS = 2.0
PAPER_GAIN_VS_SOTA_PTS = 19.6  # "up to +19.6 %" over state-of-the-art MAS (the paper's best case)
FIXED_WORKFLOW, FIXED_MODEL = "sc_mixed", "large"
BUDGET_MODEL = {"arith": "mathy", "code": "coder"}  # claim (c)'s baseline: see the docstring


def settings(quick: bool) -> dict[str, Any]:
    """Sizes. Full: 20 seeds, from the 10-seed pilot of 2026-12-07 (claim (a)'s per-seed gain
    SD 9.0 pts: about 11 seeds decide its measured gain; 20 leave a margin for the spread's own
    uncertainty)."""
    if quick:
        return {
            "n_train": 8,
            "n_test": 10,
            "rounds": 2,
            "reps": 1,
            "oracle_reps": 1,
            "seeds": (0, 1, 2),
        }
    return {
        "n_train": 30,
        "n_test": 40,
        "rounds": 4,
        "reps": 2,
        "oracle_reps": 2,
        "seeds": tuple(range(20)),
    }


def evaluate(
    system: str, team: Any, tasks: list, agent: Any, grader: Any, pool: Any, reps: int, seed: int
) -> dict[str, Any]:
    """Success rate, mean cost ($), tokens and reward of one system over ``tasks`` x ``reps``;
    ``task_success`` / ``task_cost``: per task (in ``tasks`` order), averaged over the reps."""
    from llm_methods.mas2.execute import execute

    rng = random.Random(seed)
    rows = []
    for task in tasks:
        for _ in range(reps):
            if system in ("fixed", "fixed_budget"):
                wf = team.workflow(FIXED_WORKFLOW)
                model = FIXED_MODEL if system == "fixed" else BUDGET_MODEL[task.kind]
                assign = {n.id: model for n in wf.nodes}
            else:
                wf = team.generate(task, rng)
                assign = team.implement(task, wf, rng)
            rect = team.rectify if system.startswith("mas2") else None
            tr = execute(
                wf,
                assign,
                task,
                agent,
                grader,
                random.Random(rng.randrange(2**31)),
                pool.names,
                rect,
                pool.theta,
                pool.cheapest(),
            )
            rows.append(
                (tr.success, tr.cost, tr.tokens, tr.reward(pool.cost_weight), len(tr.events))
            )
    n = len(rows)
    by_task = np.asarray([r[:2] for r in rows], dtype=float).reshape(len(tasks), reps, 2).mean(1)
    return {
        "task_success": by_task[:, 0].tolist(),
        "task_cost": by_task[:, 1].tolist(),
        "success": sum(r[0] for r in rows) / n,
        "cost": sum(r[1] for r in rows) / n,
        "tokens": sum(r[2] for r in rows) / n,
        "reward": sum(r[3] for r in rows) / n,
        "rectifications": sum(r[4] for r in rows) / n,
    }


def oracle_table(
    tasks: list, agent: Any, grader: Any, pool: Any, reps: int, seed: int = 0
) -> dict[str, dict[str, float]]:
    """Expected reward of every (template, homogeneous model) config per task type, no rectifier."""
    from llm_methods.mas2.dsl import TEMPLATES
    from llm_methods.mas2.execute import execute

    rng = random.Random(seed)
    table: dict[str, dict[str, float]] = {}
    for kind in ("arith", "code"):
        sub = [t for t in tasks if t.kind == kind]
        table[kind] = {}
        for wf in TEMPLATES:
            for m in pool.names:
                rs = [
                    execute(
                        wf,
                        {n.id: m for n in wf.nodes},
                        t,
                        agent,
                        grader,
                        random.Random(rng.randrange(2**31)),
                        pool.names,
                    ).reward(pool.cost_weight)
                    for t in sub
                    for _ in range(reps)
                ]
                table[kind][f"{wf.name}@{m}"] = sum(rs) / len(rs)
    return table


def _headroom(name: str, success: float) -> Precondition:
    ceiling = 1 - CLAIM_MIN_GAIN_PTS / 100
    return Precondition(
        f"{name} has headroom",
        f"success({name}) <= {ceiling:g} (a {CLAIM_MIN_GAIN_PTS:g}-pt gain is possible)",
        {name: round(success, 4)},
        success <= ceiling,
    )


def claims(success: dict[str, Any], cost: dict[str, Any]) -> list[Claim]:
    """Claims (a)-(c) from per-(seed, task) scores: ``success[system]`` and ``cost[system]``
    are arrays of shape (seeds, tasks) on the same held-out tasks and seeds (0..1 success, $).
    Paired 95 % intervals (:func:`points_effect`) in points of success."""
    s = {k: np.asarray(v, dtype=float) for k, v in success.items()}
    c = {k: np.asarray(v, dtype=float) for k, v in cost.items()}

    def gain(baseline: str, threshold: float, name: str, paper: float | None = None) -> Any:
        return points_effect(
            s["mas2_cto"],
            s[baseline],
            name=name,
            threshold=threshold,
            direction=">=",
            seed=0,
            paper=paper,
        )

    cost_diff = paired_interval(c["fixed_budget"], c["mas2_cto"], scale=1000)
    matched = Precondition(
        "the matched-cost baseline costs no more than MAS²",
        "paired 95 % interval of cost(fixed_budget) - cost(mas2_cto) ($ per 1k tasks) wholly <= 0",
        {
            "diff_usd_per_1k": round(cost_diff.estimate, 4),
            "low": round(cost_diff.low, 4),
            "high": round(cost_diff.high, 4),
        },
        cost_diff.high <= 0,
    )
    return [
        Claim.test(
            text="MAS² with CTO has higher task success than generate-once (the same "
            "CTO-trained generator and implementer, no rectifier).",
            effect=gain("generate_once", CLAIM_MIN_GAIN_PTS, "success gain over generate-once"),
            preconditions=[_headroom("generate_once", float(s["generate_once"].mean()))],
        ),
        Claim.test(
            text="MAS² with CTO beats the fixed hand-designed multi-agent system (the paper's "
            "headline: up to +19.6 % over state-of-the-art MAS).",
            effect=gain(
                "fixed",
                CLAIM_MIN_GAIN_PTS,
                "success gain over the fixed MAS",
                paper=PAPER_GAIN_VS_SOTA_PTS,
            ),
            preconditions=[_headroom("fixed", float(s["fixed"].mean()))],
        ),
        Claim.test(
            text="At matched cost, MAS² with CTO beats the fixed hand-designed workflow run on "
            "the best-skilled models MAS²'s budget affords (mathy for arithmetic, coder for "
            "code; the paper: MAS² is on the cost-performance Pareto front).",
            effect=gain(
                "fixed_budget", CLAIM_MIN_GAIN_PTS, "success gain over the fixed MAS at MAS²'s cost"
            ),
            preconditions=[matched, _headroom("fixed_budget", float(s["fixed_budget"].mean()))],
            measured={"cost_diff_usd_per_1k_tasks": cost_diff.to_dict()},
        ),
    ]


def run(quick: bool, out_dir: Path) -> Result:
    from llm_methods.lm.threads import one_thread
    from llm_methods.mas2.cto import CTOConfig, train_cto
    from llm_methods.mas2.policy import Team
    from llm_methods.mas2.pool import SimAgent, load_pool
    from llm_methods.mas2.tasks import Grader, generate_arith, generate_code

    start = time.perf_counter()
    cfg = settings(quick)
    out_dir.mkdir(parents=True, exist_ok=True)
    pool = load_pool()
    # the programs run here are this experiment's own reference and mutant code, not model output:
    # the OS boundary is used where the machine has one, and they may run without it
    grader = Grader(allow_unisolated=True)
    agent = SimAgent(pool, grader)
    train = generate_arith(cfg["n_train"], 100) + generate_code(cfg["n_train"], 100)
    test = generate_arith(cfg["n_test"], 200) + generate_code(cfg["n_test"], 200)
    grader.prefetch([job for t in train + test for job in agent.programs(t)])
    per_seed: dict[str, list[dict[str, Any]]] = {s: [] for s in SYSTEMS}
    histories, learned = [], []
    seeds = cfg["seeds"]
    with one_thread():
        for seed in seeds:
            seed_everything(seed)
            cto = CTOConfig(rounds=cfg["rounds"])
            mas2 = Team.uniform(pool.names)
            hist = train_cto(mas2, train, agent, grader, pool, cto, seed=seed)
            once = Team.uniform(pool.names)
            train_cto(
                once,
                train,
                agent,
                grader,
                pool,
                CTOConfig(rounds=cfg["rounds"], use_rectifier=False),
                seed=seed,
            )
            teams = {
                "fixed": Team.uniform(pool.names),
                "generate_once": once,
                "mas2_no_cto": Team.uniform(pool.names),
                "mas2_cto": mas2,
                "fixed_budget": Team.uniform(pool.names),
            }
            for name in SYSTEMS:
                per_seed[name].append(
                    evaluate(name, teams[name], test, agent, grader, pool, cfg["reps"], 1000 + seed)
                )
            histories.append([round(h["mean_leaf_reward"], 4) for h in hist])
            mas2.greedy = True
            learned.append(
                {
                    k: mas2.gen.sample(k, mas2.names, random.Random(0), True)
                    for k in ("arith", "code")
                }
            )
        oracle = oracle_table(test, agent, grader, pool, cfg["oracle_reps"])
    task_success = {k: [r.pop("task_success") for r in per_seed[k]] for k in SYSTEMS}
    task_cost = {k: [r.pop("task_cost") for r in per_seed[k]] for k in SYSTEMS}
    summary = {}
    for name in SYSTEMS:
        rows = per_seed[name]
        summary[name] = {k: round(statistics.mean(r[k] for r in rows), 5) for k in rows[0]}
        summary[name]["success_sd"] = round(statistics.stdev(r["success"] for r in rows), 4)
        summary[name]["cost_per_task_usd"] = summary[name].pop("cost")
    _plot(out_dir / "mas2_cost_success.png", per_seed)
    best = {k: max(v, key=v.get) for k, v in oracle.items()}
    judged = claims(task_success, task_cost)
    isolation = _isolation(grader)
    metrics = {
        "systems": summary,
        "per_seed": per_seed,
        "cto_mean_leaf_reward": histories,
        "learned_greedy_workflow": learned,
        "oracle_best_config": {k: [best[k], round(oracle[k][best[k]], 4)] for k in best},
        "oracle_rewards": {k: {c: round(v, 4) for c, v in t.items()} for k, t in oracle.items()},
        "sandbox_runs": grader.sandbox_runs,
        "sandbox_isolation": isolation,
        "task_success": task_success,
        "task_cost_usd": task_cost,
        "wall_s": round(time.perf_counter() - start, 1),
    }
    line = ", ".join(
        f"{k} {v['success']:.3f} @ ${v['cost_per_task_usd'] * 1000:.2f}/1k tasks"
        for k, v in summary.items()
    )
    return Result(
        summary=(
            f"Simulated 4-model pool, arithmetic + unit-tested code tasks, success @ cost: "
            f"{line}. Oracle best single config per type (no rectifier): {best}. Sandbox "
            f"isolation: {isolation}. "
            + " ".join(
                f"({chr(97 + i)}) {c.verdict}: {format_effect(c.effect)}."
                for i, c in enumerate(judged)
                if c.effect is not None
            )
        ),
        metrics=metrics,
        seeds=list(seeds),
        scale=(
            f"{len(train)} training / {len(test)} held-out tasks (half arithmetic, half code), "
            f"CTO K=4 N=2 R=2, {cfg['rounds']} rounds, {cfg['reps']} eval run(s) per task, "
            f"{len(seeds)} seeds; tabular meta-agents"
        ),
        claims=judged,
    )


def _isolation(grader: Any) -> str:
    """The OS boundary the sandboxed programs ran under: ``bwrap`` / ``userns`` (user
    namespaces) / ``none`` (hook only: the in-process guard, no OS boundary), from what the
    grader saw; the best one available here when nothing ran."""
    from llm_methods.mas2.isolation import available

    seen = sorted(getattr(grader, "isolation", set()))
    if seen:
        return ", ".join("none (hook only)" if s == "none" else s for s in seen)
    return (available() or ("none (hook only)",))[0]


def _plot(path: Path, per_seed: dict[str, list[dict[str, float]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.6))
    for name, rows in per_seed.items():
        xs = [r["cost"] * 1000 for r in rows]
        ys = [r["success"] for r in rows]
        ax.scatter(xs, ys, label=name, alpha=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("cost per 1000 tasks ($, log)")
    ax.set_ylabel("success rate")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


EXPERIMENT = Experiment(
    name="llm-methods.mas2",
    paper=PAPER,
    claim="A generator-implementer-rectifier meta-agent team trained by Collaborative Tree "
    "Optimization builds and repairs multi-agent systems that succeed more often than "
    "generate-once systems and than a fixed state-of-the-art multi-agent system, at lower cost.",
    run=run,
)
