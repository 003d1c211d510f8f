"""Run a workflow with an assignment on one task; the rectifier watches and rewrites.

The rectifier is called on two events (paper Sec. 3: self-rectification on execution failure and
on resource overrun):

- ``fail``: a step failed (API error, sandbox violation, unparsable output). Actions: ``retry``,
  ``switch:<model>`` (reassign the node), ``replace`` (rewrite the node's operator to
  AnswerGenerate, or pass its input through for Test/Review/Revise), ``skip`` (drop the node).
- ``over_budget``: the running cost passed θ. Actions: ``continue``, ``downgrade`` (reassign all
  remaining nodes to the cheapest model), ``stop`` (return the latest answer now).

Without a rectifier (generate-once) a failed generator node yields no answer and unary nodes on a
missing answer yield none. ``force`` fixes the actions of the first events (CTO's branches).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from llm_methods.mas2.dsl import Node, Workflow
from llm_methods.mas2.pool import Candidate
from llm_methods.mas2.tasks import Grader, Task

__all__ = ["BUDGET_ACTIONS", "Trace", "execute", "fail_actions"]

BUDGET_ACTIONS = ("continue", "downgrade", "stop")
MAX_FIXES = 3


def fail_actions(models: Sequence[str], current: str) -> tuple[str, ...]:
    return ("retry", *(f"switch:{m}" for m in models if m != current), "replace", "skip")


class Agent(Protocol):
    def call(
        self, op: str, task: Task, model: str, inputs: list[Candidate], rng: random.Random
    ) -> Candidate: ...


# (event, task, node, model, candidate actions, rng) -> chosen action
RectifierFn = Callable[[str, Task, Node, str, tuple[str, ...], random.Random], str]


@dataclass
class Trace:
    answer: str | None
    success: bool
    cost: float
    tokens: int
    events: list[dict[str, Any]] = field(default_factory=list)
    assignment: dict[str, str] = field(default_factory=dict)
    ops: dict[str, str] = field(default_factory=dict)

    def reward(self, cost_weight: float) -> float:
        return float(self.success) - cost_weight * self.cost


def execute(
    wf: Workflow,
    assignment: dict[str, str],
    task: Task,
    agent: Agent,
    grader: Grader,
    rng: random.Random,
    models: Sequence[str],
    rectifier: RectifierFn | None = None,
    theta: float = math.inf,
    cheapest: str | None = None,
    force: Sequence[str] = (),
) -> Trace:
    """Execute ``wf`` (validated) on ``task``; returns the answer, success, cost and the events."""
    assign = dict(assignment)
    ops = {n.id: n.op for n in wf.nodes}
    out: dict[str, Candidate] = {}
    events: list[dict[str, Any]] = []
    cost, tokens, budget_done, last = 0.0, 0, False, None

    def decide(event: str, node: Node, actions: tuple[str, ...]) -> str:
        k = len(events)
        action = (
            force[k]
            if k < len(force)
            else rectifier(event, task, node, assign[node.id], actions, rng)
        )  # type: ignore[misc]
        if action not in actions:
            raise ValueError(f"rectifier action {action!r} not in {actions}")
        events.append(
            {
                "event": event,
                "node": node.id,
                "op": ops[node.id],
                "model": assign[node.id],
                "action": action,
                "actions": actions,
            }
        )
        return action

    stopped = False
    for node in wf.nodes:
        if stopped:
            break
        inputs = [out[i] for i in node.inputs]
        if node.op in ("Test", "Review", "Revise") and inputs[0].answer is None:
            out[node.id] = Candidate(None, note="no input answer")
            continue
        cand = agent.call(ops[node.id], task, assign[node.id], inputs, rng)
        fixes = 0
        while cand.failed and rectifier is not None and fixes < MAX_FIXES:
            fixes += 1
            cost, tokens = cost + cand.cost, tokens + cand.tokens
            action = decide("fail", node, fail_actions(models, assign[node.id]))
            if action == "skip" or (action == "replace" and node.inputs):
                kept = [c.answer for c in inputs if c.answer is not None]
                ops[node.id] = "skip" if action == "skip" else "passthrough"
                cand = Candidate(kept[0] if kept else None, note=action)
                break
            if action == "replace":
                ops[node.id] = "AnswerGenerate"
            elif action.startswith("switch:"):
                assign[node.id] = action.split(":", 1)[1]
            cand = agent.call(ops[node.id], task, assign[node.id], inputs, rng)
        cost, tokens = cost + cand.cost, tokens + cand.tokens
        if cand.failed:
            cand = Candidate(None, failed=True, note=cand.note)
        out[node.id] = cand
        if cand.answer is not None:
            last = cand.answer
        if rectifier is not None and not budget_done and cost > theta and node.id != wf.output:
            budget_done = True
            action = decide("over_budget", node, BUDGET_ACTIONS)
            if action == "downgrade" and cheapest:
                done = set(out)
                for n in wf.nodes:
                    if n.id not in done:
                        assign[n.id] = cheapest
            elif action == "stop":
                stopped = True
    answer = out[wf.output].answer if wf.output in out else last
    return Trace(answer, grader.correct(task, answer), cost, tokens, events, assign, ops)
