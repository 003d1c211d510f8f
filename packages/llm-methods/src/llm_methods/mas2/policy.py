"""Tabular meta-agent policies (generator, implementer, rectifier) and the tri-agent team.

The miniature's meta-agents are softmax policies over discrete actions, one logit vector per
context: generator ``π_gen(workflow | task type)`` over the DSL templates, implementer
``π_imp(model | task type, operator)`` per node (an assignment's log-prob is the sum over its
nodes), rectifier ``π_rect(action | event, task type, operator, model)``. They are trained by
CTO (:mod:`.cto`) with ΔV-weighted DPO on these log-probs, exactly as an LLM meta-agent would be
on its sequence log-probs.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from llm_methods.mas2.dsl import TEMPLATES, Node, Workflow
from llm_methods.mas2.tasks import Task

__all__ = ["TabularPolicy", "Team"]


class TabularPolicy:
    """``π(a | ctx) = softmax(θ_ctx)[a]`` with lazily created zero logits (uniform start)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.logits: dict[str, torch.Tensor] = {}
        self.actions: dict[str, tuple[str, ...]] = {}

    def _row(self, ctx: str, actions: Sequence[str]) -> torch.Tensor:
        actions = tuple(actions)
        if ctx not in self.logits:
            self.logits[ctx] = torch.zeros(len(actions), requires_grad=True)
            self.actions[ctx] = actions
        elif self.actions[ctx] != actions:
            raise ValueError(f"{self.name}: context {ctx!r} seen with other actions")
        return self.logits[ctx]

    def probs(self, ctx: str, actions: Sequence[str]) -> list[float]:
        with torch.no_grad():
            return torch.softmax(self._row(ctx, actions), 0).tolist()

    def sample(
        self, ctx: str, actions: Sequence[str], rng: random.Random, greedy: bool = False
    ) -> str:
        p = self.probs(ctx, actions)
        if greedy:
            return actions[max(range(len(p)), key=p.__getitem__)]
        return rng.choices(list(actions), weights=p)[0]

    def logp(self, ctx: str, actions: Sequence[str], action: str) -> torch.Tensor:
        return torch.log_softmax(self._row(ctx, actions), 0)[tuple(actions).index(action)]

    def parameters(self) -> list[torch.Tensor]:
        return list(self.logits.values())

    def copy(self) -> TabularPolicy:
        new = TabularPolicy(self.name)
        new.logits = {k: v.detach().clone().requires_grad_(True) for k, v in self.logits.items()}
        new.actions = dict(self.actions)
        return new

    def to_dict(self) -> dict:
        return {
            ctx: dict(zip(self.actions[ctx], v.detach().tolist(), strict=True))
            for ctx, v in self.logits.items()
        }

    @classmethod
    def from_dict(cls, name: str, data: dict) -> TabularPolicy:
        pol = cls(name)
        for ctx, row in data.items():
            pol.actions[ctx] = tuple(row)
            pol.logits[ctx] = torch.tensor(
                list(row.values()), dtype=torch.float32, requires_grad=True
            )
        return pol


@dataclass
class Team:
    """Generator + implementer + rectifier over a template library and a model pool."""

    gen: TabularPolicy
    imp: TabularPolicy
    rect: TabularPolicy
    models: tuple[str, ...]
    templates: tuple[Workflow, ...] = TEMPLATES
    greedy: bool = False

    @classmethod
    def uniform(cls, models: Sequence[str], templates: Sequence[Workflow] = TEMPLATES) -> Team:
        return cls(
            TabularPolicy("generator"),
            TabularPolicy("implementer"),
            TabularPolicy("rectifier"),
            tuple(models),
            tuple(templates),
        )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.templates)

    def workflow(self, name: str) -> Workflow:
        return self.templates[self.names.index(name)]

    def generate(self, task: Task, rng: random.Random) -> Workflow:
        return self.workflow(self.gen.sample(task.kind, self.names, rng, self.greedy))

    def implement(self, task: Task, wf: Workflow, rng: random.Random) -> dict[str, str]:
        return {
            n.id: self.imp.sample(f"{task.kind}|{n.op}", self.models, rng, self.greedy)
            for n in wf.nodes
        }

    def rectify(
        self,
        event: str,
        task: Task,
        node: Node,
        model: str,
        actions: tuple[str, ...],
        rng: random.Random,
    ) -> str:
        return self.rect.sample(self.rect_ctx(event, task, node, model), actions, rng, self.greedy)

    @staticmethod
    def rect_ctx(event: str, task: Task, node: Node, model: str) -> str:
        return f"{event}|{task.kind}|{node.op}|{model}"

    def gen_logp(self, kind: str, wf_name: str) -> torch.Tensor:
        return self.gen.logp(kind, self.names, wf_name)

    def imp_logp(self, kind: str, wf: Workflow, assignment: dict[str, str]) -> torch.Tensor:
        return sum(
            (self.imp.logp(f"{kind}|{n.op}", self.models, assignment[n.id]) for n in wf.nodes),
            torch.zeros(()),
        )

    def copy(self) -> Team:
        return Team(
            self.gen.copy(),
            self.imp.copy(),
            self.rect.copy(),
            self.models,
            self.templates,
            self.greedy,
        )

    def to_dict(self) -> dict:
        """The team as ``team.json`` holds it: models, templates (DSL text) and each policy's
        logits per context and action (float32 values, exact through JSON)."""
        return {
            "models": list(self.models),
            "templates": {t.name: t.to_text() for t in self.templates},
            "generator": self.gen.to_dict(),
            "implementer": self.imp.to_dict(),
            "rectifier": self.rect.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> Team:
        """The team :meth:`to_dict` wrote (``KeyError``/``TypeError``/``AttributeError`` for
        another mapping)."""
        from llm_methods.mas2.dsl import parse_workflow

        templates = tuple(parse_workflow(text, name) for name, text in data["templates"].items())
        return cls(
            TabularPolicy.from_dict("generator", data["generator"]),
            TabularPolicy.from_dict("implementer", data["implementer"]),
            TabularPolicy.from_dict("rectifier", data["rectifier"]),
            tuple(data["models"]),
            templates,
        )

    def save(self, path: Path) -> Path:
        """Write :meth:`to_dict` as JSON to ``path`` (atomically, mode 0644)."""
        from iclr26_common.outputs import write_text

        return write_text(path, json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path: Path) -> Team:
        from llm_methods.jsonl import read_text

        text = read_text(path, ValueError, "MAS² team file")  # missing, folder, not UTF-8: one line
        try:
            return cls.from_dict(json.loads(text))
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"{path}: not a MAS² team file ({type(e).__name__}: {e})") from None
