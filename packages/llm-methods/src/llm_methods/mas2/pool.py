"""The simulated model pool: each "model" solves a task type with known accuracy and token cost.

Operators act on real tasks (:mod:`.tasks`): a simulated model answers an arithmetic task right
with probability ``skill["reason"]`` (else with the value of a mutated expression, so wrong
answers can agree and votes are realistic); a Programmer prints the reference expression (or a
mutant) and the program really runs in the sandbox; code comes out as the reference body or a
buggy mutant and is really tested in the sandbox. Every call can fail (``fail``: an API error),
which is what the rectifier is for. Token counts are ``BASE_TOKENS[op] * verbosity``; cost is
``tokens * price / 1e6``. With these numbers fixed, the best workflow/assignment is computable
(:func:`llm_methods.mas2.execute.oracle_table`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from iclr26_common.textio import input_file
from llm_methods.mas2.tasks import Grader, Task, mutate_expression

__all__ = ["BASE_TOKENS", "Candidate", "SimAgent", "SimModel", "SimPool", "load_pool"]

BASE_TOKENS = {
    "Custom": 120,
    "AnswerGenerate": 300,
    "Programmer": 350,
    "ScEnsemble": 120,
    "Test": 150,
    "TestFix": 250,
    "Review": 120,
    "Revise": 250,
}
N_ARITH_MUTANTS = 3


class PoolError(ValueError):
    """A malformed pool file; the message names the file and the field."""


@dataclass(frozen=True)
class SimModel:
    name: str
    price: float  # $ per 1M tokens
    skill: dict[str, float]
    fail: float = 0.0
    verbosity: float = 1.0


@dataclass
class Candidate:
    """One node's result: an answer (number text or program), tokens used, and what happened."""

    answer: str | None
    tokens: int = 0
    cost: float = 0.0
    failed: bool = False
    verdict: str | None = None  # Review: "ok" | "wrong"
    note: str = ""


@dataclass(frozen=True)
class SimPool:
    models: dict[str, SimModel]
    theta: float = 0.004
    cost_weight: float = 40.0

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.models)

    def cheapest(self) -> str:
        return min(self.models.values(), key=lambda m: m.price * m.verbosity).name


def load_pool(path: Path | str | None = None) -> SimPool:
    """A pool YAML (default: the shipped ``configs/sim_pool.yaml``); errors name file and field."""
    import yaml

    from llm_methods.jsonl import read_text

    path = Path(path) if path else Path(__file__).parent / "configs" / "sim_pool.yaml"
    input_file(path, "pool file", error=PoolError)
    try:
        data = yaml.safe_load(read_text(path, PoolError)) or {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(error, "problem", None) or type(error).__name__
        raise PoolError(f"{where}: not valid YAML ({problem})") from None
    raw = data.get("models") if isinstance(data, dict) else None
    if not isinstance(raw, dict) or not raw:
        raise PoolError(f"{path}: needs a non-empty 'models' mapping")
    models = {}
    for name, m in raw.items():
        where = f"{path}: models.{name}"
        if not isinstance(m, dict):
            raise PoolError(f"{where}: expected a mapping")
        for key in ("price", "skill"):
            if key not in m:
                raise PoolError(f"{where}: missing field {key!r}")
        skill = m["skill"]
        if not isinstance(skill, dict) or set(skill) != {"reason", "code"}:
            raise PoolError(f"{where}.skill: needs exactly 'reason' and 'code'")
        vals = {
            "price": m["price"],
            "fail": m.get("fail", 0.0),
            "verbosity": m.get("verbosity", 1.0),
            **{f"skill.{k}": v for k, v in skill.items()},
        }
        for key, v in vals.items():
            if not isinstance(v, (int, float)) or v != v or v < 0:
                raise PoolError(f"{where}.{key}: must be a non-negative number, got {v!r}")
            if (key.startswith("skill") or key == "fail") and v > 1:
                raise PoolError(f"{where}.{key}: must be a probability in [0, 1], got {v!r}")
        models[str(name)] = SimModel(
            str(name),
            float(m["price"]),
            {k: float(v) for k, v in skill.items()},
            float(vals["fail"]),
            float(vals["verbosity"]),
        )
    theta, weight = data.get("theta", 0.004), data.get("cost_weight", 40.0)
    for key, v in (("theta", theta), ("cost_weight", weight)):
        if not isinstance(v, (int, float)) or v < 0:
            raise PoolError(f"{path}: {key} must be a non-negative number, got {v!r}")
    return SimPool(models, float(theta), float(weight))


class SimAgent:
    """Executes one operator with one simulated model on a real task (see module docstring)."""

    def __init__(self, pool: SimPool, grader: Grader) -> None:
        self.pool = pool
        self.grader = grader
        self._mutants: dict[str, tuple[str, ...]] = {}

    def _wrong_expr(self, task: Task, rng: random.Random) -> str:
        if task.task_id not in self._mutants:  # a fixed small set per task: realistic collisions
            r = random.Random(task.task_id)
            self._mutants[task.task_id] = tuple(
                mutate_expression(task.expression, r) for _ in range(N_ARITH_MUTANTS)
            )
        return rng.choice(self._mutants[task.task_id])

    def programs(self, task: Task) -> list[tuple[Task | None, str, bool]]:
        """Every program this pool can write for ``task`` (for :meth:`Grader.prefetch`)."""
        if task.kind == "arith":
            self._wrong_expr(task, random.Random(0))
            exprs = (task.expression, *self._mutants[task.task_id])
            return [(None, f"print({e})", False) for e in exprs]
        codes = [task.question + b for b in (task.canonical, *task.mutants)]
        return [
            (task, c, pub)
            for c in codes
            for pub in ((False, True) if task.public_test else (False,))
        ]

    def _solve(self, task: Task, p: float, rng: random.Random, program: bool) -> str:
        right = rng.random() < p
        if task.kind == "arith":
            if right and not program:
                return task.answer
            expr = task.expression if right else self._wrong_expr(task, rng)
            return self.grader.program_output(f"print({expr})") or ""  # runs in the sandbox
        if right:
            return task.question + task.canonical
        wrong = rng.choice(task.mutants) if task.mutants else "    raise NotImplementedError\n"
        return task.question + wrong

    def call(
        self, op: str, task: Task, model: str, inputs: list[Candidate], rng: random.Random
    ) -> Candidate:
        m = self.pool.models[model]
        tokens = BASE_TOKENS[op] + (40 * len(inputs) if op == "ScEnsemble" else 0)
        if rng.random() < m.fail:
            t = int(tokens * m.verbosity * 0.3)  # the prompt was sent, the reply never came
            return Candidate(None, t, t * m.price / 1e6, failed=True, note=f"{model} API error")
        reason, code = m.skill["reason"], m.skill["code"]
        src = inputs[0] if inputs else None
        answer: str | None
        verdict = None
        if op == "AnswerGenerate":
            answer = self._solve(task, reason if task.kind == "arith" else code * 0.8, rng, False)
        elif op == "Programmer":
            answer = self._solve(task, code, rng, True)
        elif op == "Custom":
            if src is None:
                answer = self._solve(
                    task, reason - 0.1 if task.kind == "arith" else code * 0.7, rng, False
                )
            else:
                answer = src.answer
        elif op == "ScEnsemble":
            answers = [c.answer for c in inputs if c.answer is not None]
            if not answers:
                answer = None
            else:
                counts = {a: answers.count(a) for a in answers}
                top = max(counts.values())
                best = [a for a in answers if counts[a] == top]
                answer = best[0] if rng.random() < reason else rng.choice(answers)
        elif op == "Test":
            answer = src.answer if src else None
            if task.kind == "code" and answer is not None and task.public_test:
                if not self.grader.passes(task, answer, public=True):
                    tokens += BASE_TOKENS["TestFix"]
                    answer = self._solve(task, code, rng, False)
        elif op == "Review":
            answer = src.answer if src else None
            right = self.grader.correct(task, answer)
            sees = rng.random() < reason
            verdict = ("ok" if right else "wrong") if sees else ("wrong" if right else "ok")
        elif op == "Revise":
            answer = src.answer if src else None
            if src is None or src.verdict != "ok":
                p = reason if task.kind == "arith" else code * 0.8
                answer = self._solve(task, p, rng, False)
            else:
                tokens = BASE_TOKENS["Custom"] // 2
        else:  # validated workflows never get here
            raise ValueError(f"unknown operator {op!r}")
        t = int(tokens * m.verbosity)
        return Candidate(answer, t, t * m.price / 1e6, verdict=verdict)
