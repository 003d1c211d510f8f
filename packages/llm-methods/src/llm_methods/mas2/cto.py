"""Collaborative Tree Optimization (CTO) with ΔV-weighted DPO for the three meta-agents.

Per training task, a tree: the root's children are K workflows sampled from the generator; each
has N assignments sampled from the implementer; each assignment is executed, and when the run
calls the rectifier, its first event branches into R alternative actions (same random stream up
to the event, so the branches differ only by the rectifier's choice). Leaves carry the reward
``r = success − λ·cost``; a node's value ``V(v)`` is the mean reward of its leaves. Sibling pairs
with ``V_w > V_l`` become preference pairs for the meta-agent that chose between them, weighted
by ``ΔV = V_w − V_l``; each meta-agent is updated with the weighted DPO loss

    L = − Σ_i ΔV_i · log σ(β [(log π(y_w) − log π_ref(y_w)) − (log π(y_l) − log π_ref(y_l))]) / Σ ΔV_i

with π_ref the policy that built the trees (iterative, on-policy rounds).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from llm_methods.mas2.execute import Agent, Trace, execute
from llm_methods.mas2.policy import TabularPolicy, Team
from llm_methods.mas2.pool import SimPool
from llm_methods.mas2.tasks import Grader, Task

__all__ = ["CTOConfig", "Pair", "build_tree", "dpo_step", "train_cto"]


@dataclass(frozen=True)
class CTOConfig:
    """Collaborative Tree Optimization settings, checked on construction (one-line ValueError
    naming the field)."""

    k: int = 4  # generator samples per task
    n: int = 2  # implementer samples per workflow
    r: int = 2  # rectifier branches at the first rectification event
    rounds: int = 3  # rounds of (build trees with the current team, DPO against it)
    beta: float = 1.0  # DPO temperature
    lr: float = 0.1  # step size of the tabular policies' DPO update
    steps: int = 60  # DPO steps per round
    use_rectifier: bool = True  # rectifier branches on (False: the no-rectifier ablation)

    def __post_init__(self) -> None:
        for name in ("k", "n", "r", "rounds", "steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"CTO {name} must be >= 1, got {getattr(self, name)}")
        for name in ("beta", "lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"CTO {name} must be > 0, got {getattr(self, name)}")


Term = tuple[str, tuple[str, ...], str]  # (context, actions, chosen action)


@dataclass
class Pair:
    """A sibling preference for one meta-agent: raise ``log π(winner) − log π(loser)``.

    Each side is a sum of per-context log-probs (one term for the generator and the rectifier,
    one per node for the implementer); ``weight`` is ΔV.
    """

    agent: str  # generator | implementer | rectifier
    winner: list[Term]
    loser: list[Term]
    weight: float


@dataclass
class Tree:
    pairs: list[Pair] = field(default_factory=list)
    leaves: list[Trace] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)


def _pairs(agent: str, kids: list[tuple[float, list[Term], str]]) -> list[Pair]:
    out = []
    for i in range(len(kids)):
        for j in range(i + 1, len(kids)):
            (vi, ti, ki), (vj, tj, kj) = kids[i], kids[j]
            if vi != vj and ki != kj:
                win, lose = (ti, tj) if vi > vj else (tj, ti)
                out.append(Pair(agent, win, lose, abs(vi - vj)))
    return out


def build_tree(
    task: Task,
    team: Team,
    agent: Agent,
    grader: Grader,
    pool: SimPool,
    cfg: CTOConfig,
    rng: random.Random,
) -> Tree:
    tree = Tree()
    gen_kids = []
    for _ in range(cfg.k):
        wf = team.generate(task, rng)
        imp_kids = []
        for _ in range(cfg.n):
            assign = team.implement(task, wf, rng)
            seed = rng.randrange(2**31)
            run = lambda force=(), wf=wf, assign=assign, seed=seed: execute(  # noqa: E731
                wf,
                assign,
                task,
                agent,
                grader,
                random.Random(seed),
                pool.names,
                team.rectify if cfg.use_rectifier else None,
                pool.theta,
                pool.cheapest(),
                force,
            )
            first = run()
            leaves = [first]
            if first.events and cfg.r > 1:
                ev = first.events[0]
                node = wf.node(ev["node"])
                ctx = f"{ev['event']}|{task.kind}|{node.op}|{ev['model']}"
                others = [a for a in ev["actions"] if a != ev["action"]]
                alts = rng.sample(others, min(cfg.r - 1, len(others)))
                leaves += [run((a,)) for a in alts]
                kids = [
                    (t.reward(pool.cost_weight), [(ctx, tuple(ev["actions"]), a)], a)
                    for t, a in zip(leaves, [ev["action"], *alts], strict=True)
                ]
                tree.pairs += _pairs("rectifier", kids)
            value = sum(t.reward(pool.cost_weight) for t in leaves) / len(leaves)
            tree.leaves += leaves
            key = "|".join(f"{k}={v}" for k, v in sorted(assign.items()))
            imp_kids.append(
                (value, [(f"{task.kind}|{n.op}", team.models, assign[n.id]) for n in wf.nodes], key)
            )
        tree.pairs += _pairs("implementer", imp_kids)
        v_wf = sum(v for v, _, _ in imp_kids) / len(imp_kids)
        tree.values[wf.name] = v_wf
        gen_kids.append((v_wf, [(task.kind, team.names, wf.name)], wf.name))
    tree.pairs += _pairs("generator", gen_kids)
    return tree


def _margin_matrix(pol: TabularPolicy, pairs: Sequence[Pair]) -> tuple[list[str], torch.Tensor]:
    """Contexts and the [pairs, contexts * max actions] ±1 matrix: margin = C @ log π (flat)."""
    for p in pairs:
        for ctx, actions, _ in p.winner + p.loser:
            pol._row(ctx, actions)
    ctxs = sorted({ctx for p in pairs for ctx, _, _ in p.winner + p.loser})
    width = max(len(pol.actions[c]) for c in ctxs)
    col = {c: i * width for i, c in enumerate(ctxs)}
    mat = torch.zeros(len(pairs), len(ctxs) * width)
    for i, p in enumerate(pairs):
        for sign, terms in ((1.0, p.winner), (-1.0, p.loser)):
            for ctx, actions, a in terms:
                mat[i, col[ctx] + actions.index(a)] += sign
    return ctxs, mat


def _flat_logp(pol: TabularPolicy, ctxs: list[str], width: int) -> torch.Tensor:
    rows = []
    for c in ctxs:
        row = pol.logits.get(c)
        if row is None:  # a context the reference never saw: uniform, like a fresh policy
            row = torch.zeros(len(pol.actions.get(c, ())) or width)
        pad = torch.full((width - len(row),), -1e9)
        rows.append(torch.log_softmax(torch.cat([row, pad]), 0))
    return torch.cat(rows)


def dpo_step(team: Team, ref: Team, pairs: Sequence[Pair], cfg: CTOConfig) -> dict[str, float]:
    """ΔV-weighted DPO on each meta-agent's own pairs; returns the final loss per agent."""
    losses = {}
    for name in ("generator", "implementer", "rectifier"):
        pol, ref_pol = _policy(team, name), _policy(ref, name)
        mine = [p for p in pairs if p.agent == name]
        if not mine:
            continue
        ctxs, mat = _margin_matrix(pol, mine)
        width = mat.shape[1] // len(ctxs)
        for c in ctxs:  # the reference's missing rows get the right action count
            ref_pol.actions.setdefault(c, pol.actions[c])
        with torch.no_grad():
            ref_margin = mat @ _flat_logp(ref_pol, ctxs, width)
        weights = torch.tensor([p.weight for p in mine])
        opt = torch.optim.Adam([pol.logits[c] for c in ctxs], lr=cfg.lr)
        for _ in range(cfg.steps):
            margin = mat @ _flat_logp(pol, ctxs, width)
            loss = (
                -(weights * torch.nn.functional.logsigmoid(cfg.beta * (margin - ref_margin))).sum()
                / weights.sum()
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses[name] = float(loss.detach())
    return losses


def _policy(team: Team, name: str) -> TabularPolicy:
    return {"generator": team.gen, "implementer": team.imp, "rectifier": team.rect}[name]


def train_cto(
    team: Team,
    tasks: Sequence[Task],
    agent: Agent,
    grader: Grader,
    pool: SimPool,
    cfg: CTOConfig,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
    *,
    start: tuple[Sequence[dict[str, float]], Any] | None = None,
    after_round: Callable[[list[dict[str, float]], Any], None] | None = None,
    trees: Callable[[int, Sequence[Task]], Iterable[Task]] | None = None,
) -> list[dict[str, float]]:
    """``cfg.rounds`` rounds of (build trees with the current team, DPO against it); returns
    one history row per round. ``team`` is trained in place.

    ``after_round(history, rng_state)``: called after each round with the rows so far and the
    state of the tree-sampling stream (``random.Random.getstate()``), e.g. to save a resumable
    state. ``start = (history, rng_state)``: what ``after_round`` got after the last round an
    interrupted run finished, with ``team`` holding that round's team: training continues at
    round ``len(history)`` on the same random stream, so the result is the uninterrupted
    run's. ``trees(round, tasks)``: the iterable of the round's tasks (e.g. a progress bar)."""
    rng = random.Random(seed)
    history: list[dict[str, float]] = []
    if start is not None:
        history = list(start[0])
        rng.setstate(start[1])
    for rnd in range(len(history), cfg.rounds):
        ref = team.copy()
        pairs, rewards = [], []
        for task in trees(rnd, tasks) if trees is not None else tasks:
            tree = build_tree(task, team, agent, grader, pool, cfg, rng)
            pairs += tree.pairs
            rewards += [t.reward(pool.cost_weight) for t in tree.leaves]
        losses = dpo_step(team, ref, pairs, cfg)
        row = {
            "round": rnd,
            "mean_leaf_reward": sum(rewards) / len(rewards),
            "pairs": len(pairs),
            **{f"loss_{k}": v for k, v in losses.items()},
        }
        history.append(row)
        if log:
            log(f"round {rnd}: mean leaf reward {row['mean_leaf_reward']:.3f}, {len(pairs)} pairs")
        if after_round is not None:
            after_round(list(history), rng.getstate())
    return history
