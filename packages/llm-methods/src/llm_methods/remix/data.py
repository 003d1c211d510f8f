"""Verifiable arithmetic word problems: a GSM8K-jsonl reader, an offline generator, the
exact-match reward and the supervised "task format" texts used to pretrain a zoo-style model.

Format (GSM8K jsonl, one problem per line): ``question`` (str), ``answer`` (worked solution
ending ``#### N``; a bare number is accepted too). The generator writes the same format plus a
``steps`` field. Rewards are exact match of the extracted final answer (``#### N``, else the
last integer of the response) against the gold integer.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from iclr26_common.textio import input_file
from llm_methods.jsonl import read_jsonl
from llm_methods.lm.errors import LMError

__all__ = [
    "REWARDS",
    "Problem",
    "exact_match_reward",
    "extract_answer",
    "make_reward_fn",
    "read_problems",
    "sft_texts",
    "synth_problems",
    "user_prompt",
    "write_gsm8k",
]

NAMES = ("Tom", "Ana", "Li", "Sam", "Mia", "Raj", "Eva", "Ben")
ITEMS = ("apples", "coins", "books", "pens", "cards", "shells")
_INT = re.compile(r"-?\d+")


@dataclass(frozen=True)
class Problem:
    question: str
    answer: str  # the gold final answer, a canonical integer string
    solution: str = ""  # worked solution without the "#### N" line (may be empty)

    @property
    def prompt(self) -> str:
        return user_prompt(self.question)


def _canon(text: str) -> str:
    s = text.strip().replace(",", "").rstrip(".")
    return str(int(s)) if re.fullmatch(r"-?\d+", s) else s


def extract_answer(text: str) -> str:
    """The response's final answer: the value after the last ``####``, else the last integer;
    ``""`` when there is none."""
    if "####" in text:
        found = _INT.search(text.rsplit("####", 1)[1])
        return str(int(found.group())) if found else ""
    found = _INT.findall(text)
    return str(int(found[-1])) if found else ""


def exact_match_reward(response: str, gold: str) -> float:
    """1.0 when the extracted answer equals ``gold`` exactly, else 0.0 (the verifiable reward)."""
    got = extract_answer(response)
    return float(got != "" and got == _canon(gold))


def format_reward(response: str, gold: str) -> float:
    """0.1 when the response ends with a ``#### N`` line (an optional shaping term)."""
    return 0.1 * float(re.search(r"####\s*-?\d+\s*$", response.strip()) is not None)


REWARDS: dict[str, Callable[[str, str], float]] = {
    "exact_match": exact_match_reward,
    "format": format_reward,
}


def make_reward_fn(names: Sequence[str]) -> Callable[[str, str], float]:
    """The sum of the named rewards. An empty set is an error (nothing would be optimised)."""
    names = list(names)
    if not names:
        raise LMError(f"empty reward set: name at least one reward ({', '.join(REWARDS)})")
    unknown = [n for n in names if n not in REWARDS]
    if unknown:
        raise LMError(f"unknown reward(s) {unknown}; known: {', '.join(REWARDS)}")
    fns = [REWARDS[n] for n in names]
    return lambda response, gold: sum(f(response, gold) for f in fns)


def user_prompt(question: str) -> str:
    """The chat-free prompt of the task format (zoo models have no instruction tuning)."""
    return f"Q: {question}\nA:"


def _problem(rng: random.Random, max_value: int) -> tuple[str, str, int]:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b = rng.randint(2, max_value), rng.randint(2, max_value)
    kind = rng.choice(("add", "sub", "plain_add", "plain_sub"))
    if kind in ("sub", "plain_sub") and b > a:
        a, b = b, a
    if kind == "add":
        q = f"{name} has {a} {item} and gets {b} more. How many {item} now?"
        return q, f"{a} + {b} = {a + b}.", a + b
    if kind == "sub":
        q = f"{name} has {a} {item} and gives away {b}. How many {item} are left?"
        return q, f"{a} - {b} = {a - b}.", a - b
    if kind == "plain_add":
        return f"What is {a} + {b}?", f"{a} + {b} = {a + b}.", a + b
    return f"What is {a} - {b}?", f"{a} - {b} = {a - b}.", a - b


def synth_problems(n: int, seed: int = 0, max_value: int = 60) -> list[dict]:
    """``n`` GSM8K-format records (``question``, ``answer`` = "<work>\\n#### N", ``steps`` = 1)."""
    if n < 1:
        raise LMError(f"n must be >= 1, got {n}")
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        q, work, value = _problem(rng, max_value)
        out.append({"question": q, "answer": f"{work}\n#### {value}", "steps": 1})
    return out


def write_gsm8k(records: Sequence[dict], path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _to_problem(row: dict, where: str) -> Problem:
    for key in ("question", "answer"):
        if key not in row:
            raise LMError(f"{where}: missing field {key!r}")
        if not isinstance(row[key], str | int) or not str(row[key]).strip():
            raise LMError(f"{where}: field {key!r} is empty or not a string")
    answer = str(row["answer"])
    work, final = answer.rsplit("####", 1) if "####" in answer else ("", answer)
    gold = _canon(final)
    if not re.fullmatch(r"-?\d+", gold):
        raise LMError(f"{where}: field 'answer' has no integer final answer ({final.strip()!r})")
    return Problem(str(row["question"]).strip(), gold, work.strip())


def read_problems(path: Path, limit: int | None = None) -> list[Problem]:
    """GSM8K jsonl -> problems; errors name ``file:line: field``; an empty file is an error."""
    path = Path(path)
    input_file(path, error=LMError)
    rows = read_jsonl(path, limit=limit, what="problems (empty reward set)")
    return [_to_problem(row, where) for where, row in rows]


def records_to_problems(records: Sequence[dict]) -> list[Problem]:
    return [_to_problem(r, f"record {i}") for i, r in enumerate(records)]


def response_text(problem: Problem, style: str) -> str:
    """A target response in the task format: ``short`` ("#### N") or ``work`` ("a + b = c. #### N")."""
    if style == "work" and problem.solution:
        return f" {problem.solution} #### {problem.answer}"
    return f" #### {problem.answer}"


def sft_texts(problems: Sequence[Problem], seed: int = 0) -> list[tuple[str, str]]:
    """(prompt, response) pairs for pretraining on the task format; half the responses show the
    work, half answer directly, so response length is something RL can change."""
    rng = random.Random(seed)
    return [
        (user_prompt(p.question), response_text(p, rng.choice(("short", "work")))) for p in problems
    ]
