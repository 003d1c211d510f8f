"""Math word-problem readers, answer extraction and an offline graded arithmetic generator.

Readers (one ``Problem`` per jsonl line; errors name ``file:line: field``):

- GSM8K jsonl: ``question``, ``answer`` (worked solution ending ``#### N``);
- MATH-500 jsonl: ``problem``, ``answer`` (LaTeX allowed);
- AIME jsonl: ``problem`` or ``question`` (also ``Problem``), ``answer`` (integer);
- ASDiv: jsonl with ``body`` + ``question`` and ``answer`` (e.g. ``"9 (apples)"``), or the
  official ``ASDiv.xml`` (``<Problem><Body/><Question/><Answer/></Problem>``).

Each problem keeps an ``id``: the record's ``id`` (``unique_id`` in MATH-500, the ``ID``
attribute in ``ASDiv.xml``) when it has one, else ``line N`` (its line / ``<Problem>`` number),
and its ``difficulty`` when the record has an integer one (else 0); ``ltpo solve`` writes both
into ``predictions.jsonl`` so that ``ltpo judge`` can pair the methods' runs and split them by
difficulty.

The generator writes GSM8K-format jsonl (plus ``id`` and a ``difficulty`` field, 1-4
arithmetic steps).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from iclr26_common.textio import input_file
from llm_methods.jsonl import read_jsonl

__all__ = [
    "ANSWER_SOURCES",
    "FORMATS",
    "Problem",
    "answer_with_source",
    "extract_answer",
    "grade",
    "is_correct",
    "normalize_answer",
    "read_problems",
    "synth_problems",
    "write_gsm8k",
]

FORMATS = ("gsm8k", "math500", "aime", "asdiv")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")


@dataclass(frozen=True)
class Problem:
    question: str
    answer: str  # normalised final answer
    difficulty: int = 0  # arithmetic steps (generator) or 0 when unknown
    id: str = ""  # the record's id, else "line N" (readers); "" when built by hand


def _fail(where: str, msg: str) -> ValueError:
    return ValueError(f"{where}: {msg}")


def normalize_answer(text: str) -> str:
    """Canonical form of a final answer: LaTeX wrappers, ``$``, units, commas, trailing ``.0``
    removed; numbers (ints, decimals, ``a/b``, ``\\frac{a}{b}``) as reduced fractions or ints."""
    s = str(text).strip()
    boxed = re.search(r"\\boxed\{(.*)\}", s)
    if boxed:
        s = boxed.group(1)
    s = re.sub(r"\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}", r"\1/\2", s)
    s = s.replace("$", "").replace("\\!", "").replace("\\,", "").replace("\\left", "")
    s = s.replace("\\right", "").replace("^\\circ", "").replace("^{\\circ}", "")
    s = re.sub(r"\\text\{[^{}]*\}", "", s).strip().rstrip(".").strip()
    s = re.sub(r"\s*\([^()]*\)$", "", s)  # ASDiv "9 (apples)"
    compact = s.replace(",", "").replace(" ", "")
    if re.fullmatch(r"-?\d+(?:\.\d+)?(?:/-?\d+)?", compact):
        try:
            value = Fraction(compact)
        except (ValueError, ZeroDivisionError):
            return compact
        return (
            str(value.numerator)
            if value.denominator == 1
            else f"{value.numerator}/{value.denominator}"
        )
    return re.sub(r"\s+", "", s)


_BOXED = r"\\boxed\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}"
#: the fallbacks, tried in order after ``\boxed{}`` (the format every prompt here asks for)
_FALLBACKS = (
    ("####", r"####\s*([^\n]+)"),
    ("answer_phrase", r"[Aa]nswer(?: is)?\s*[:=]?\s*\$?(-?[\d,]*\.?\d+(?:/\d+)?)"),
)
#: where an answer came from: the asked-for format, or one of the fallbacks
ANSWER_SOURCES = ("boxed", "####", "answer_phrase", "last_number")


def _numeric(answer: str) -> bool:
    """A normalised answer that is a number (int, decimal, fraction)."""
    return re.fullmatch(r"-?\d+(?:/\d+)?", answer) is not None


def answer_with_source(text: str, fmt: str = "gsm8k") -> tuple[str, str]:
    """``(answer, source)``: the boxed answer (``"boxed"``, the format the CoT and thought
    prompts ask for), else a fallback: ``#### N`` (``"####"``), ``answer is / Answer: X``
    (``"answer_phrase"``), the last number of the text (``"last_number"``); ``("", "")`` when
    there is none.

    The boxed answer follows upstream's judge (ltpo2025/LTPO@2c3d4f2,
    ``extract_judge_answer/utils.py``): for ``gsm8k``, ``aime`` and ``asdiv`` (upstream's
    ``_extract_answer``) the **first** ``\\boxed{}`` whose content is a number (a later one, or
    a non-numeric one, is not read: "\\boxed{6} ... \\boxed{7}" answers 6); for ``math500``
    (upstream's Qwen ``extract_answer``) the **last** ``\\boxed{}``, any content. Ours also
    reads a boxed fraction (``\\frac{a}{b}``, ``a/b``) as a number (README Deviations)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    found = [normalize_answer(b) for b in re.findall(_BOXED, text)]
    if found and fmt == "math500":
        return found[-1], "boxed"
    numeric = [b for b in found if _numeric(b)]
    if numeric:
        return numeric[0], "boxed"
    for source, pattern in _FALLBACKS:
        found = re.findall(pattern, text)
        if found:
            return normalize_answer(found[-1]), source
    numbers = _NUMBER.findall(text)
    return (normalize_answer(numbers[-1]), "last_number") if numbers else ("", "")


def extract_answer(text: str, fmt: str = "gsm8k") -> str:
    """The model's answer by :func:`answer_with_source` (the boxed answer, else a fallback's;
    ``""`` when there is none). For display: a solve counts only the boxed one
    (:func:`is_correct`)."""
    return answer_with_source(text, fmt)[0]


def grade(prediction_text: str, gold: str, fmt: str = "gsm8k") -> str:
    """``"correct"``: the boxed answer equals the gold (a solve); ``"fallback"``: the text has no
    boxed answer read by the format's rule and a fallback's answer equals the gold (``#### N``, an answer phrase or the
    last number: e.g. "... rolling a 6 ..." for gold 6; reported separately, never a solve);
    ``"wrong"`` otherwise. ``fmt`` picks upstream's boxed rule (:func:`answer_with_source`)."""
    answer, source = answer_with_source(prediction_text, fmt)
    if not answer or answer != normalize_answer(gold):
        return "wrong"
    return "correct" if source == "boxed" else "fallback"


def is_correct(prediction_text: str, gold: str, fmt: str = "gsm8k") -> bool:
    """A solve: the ``\\boxed{}`` answer the prompt asks for equals the gold (:func:`grade`)."""
    return grade(prediction_text, gold, fmt) == "correct"


def _field(obj: dict, names: tuple[str, ...], where: str) -> str:
    for name in names:
        if name in obj and obj[name] is not None:
            value = str(obj[name]).strip()
            if not value:
                raise _fail(where, f"field {name!r} is empty")
            return value
    raise _fail(where, f"missing field {names[0]!r}")


def _problem_id(obj: dict, where: str) -> str:
    """The record's own id (``id``, ``unique_id``, ``ID``), else ``line N`` from ``where``
    (``FILE:N``)."""
    for name in ("id", "unique_id", "ID"):
        value = obj.get(name)
        if value is not None and str(value).strip():
            return str(value).strip()
    return f"line {where.rsplit(':', 1)[-1]}"


def _from_record(obj: dict, fmt: str, where: str) -> Problem:
    if fmt == "gsm8k":
        q = _field(obj, ("question",), where)
        raw = _field(obj, ("answer",), where)
        if "####" not in raw:
            raise _fail(where, "field 'answer' has no '#### N' final answer")
        ans = normalize_answer(raw.rsplit("####", 1)[1])
    elif fmt == "math500":
        q = _field(obj, ("problem",), where)
        ans = normalize_answer(_field(obj, ("answer",), where))
    elif fmt == "aime":
        q = _field(obj, ("problem", "question", "Problem"), where)
        ans = normalize_answer(_field(obj, ("answer", "Answer"), where))
    elif fmt == "asdiv":
        body = str(obj.get("body", obj.get("Body", ""))).strip()
        q = (body + " " + _field(obj, ("question", "Question"), where)).strip()
        ans = normalize_answer(_field(obj, ("answer", "Answer"), where))
    else:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    if not ans:
        raise _fail(where, "field 'answer' has no usable value")
    difficulty = obj.get("difficulty", 0)
    steps = int(difficulty) if isinstance(difficulty, int) else 0
    return Problem(q, ans, steps, _problem_id(obj, where))


def _read_asdiv_xml(path: Path) -> list[Problem]:
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as err:
        raise ValueError(f"{path}: not valid ASDiv XML ({err})") from None
    out = []
    for i, node in enumerate(root.iter("Problem"), 1):
        rec = {child.tag: (child.text or "") for child in node}
        if node.get("ID"):
            rec["ID"] = node.get("ID")
        out.append(_from_record(rec, "asdiv", f"{path}:{i}"))
    if not out:
        raise ValueError(f"{path}: no <Problem> elements")
    return out


def read_problems(path: str | Path, fmt: str = "gsm8k", limit: int | None = None) -> list[Problem]:
    """All problems of a jsonl file (or ASDiv ``.xml``) in ``fmt`` (see :data:`FORMATS`)."""
    path = Path(path)
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    input_file(path)
    if path.suffix == ".xml":
        return _read_asdiv_xml(path)[:limit]
    rows = read_jsonl(path, error=ValueError, limit=limit, what="problems")
    return [_from_record(obj, fmt, where) for where, obj in rows]


_NAMES = ("Ava", "Ben", "Cara", "Dan", "Eli", "Fay", "Gus", "Hana", "Ivan", "Jo", "Kim", "Leo")
_ITEMS = ("apples", "marbles", "stickers", "pencils", "cookies", "books", "coins", "shells")


def _problem(rng: random.Random, steps: int) -> tuple[str, int, list[str]]:
    """A story of ``steps`` operations (+, -, x) on one count; exact integer answer."""
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    value = rng.randint(2, 12)
    text = [f"{name} has {value} {item}."]
    work = []
    for _ in range(steps):
        op = rng.choice(("add", "sub", "mul") if value <= 20 else ("add", "sub"))
        if op == "add":
            n = rng.randint(2, 15)
            text.append(
                rng.choice(
                    (f"A friend gives {name} {n} more {item}.", f"{name} buys {n} more {item}.")
                )
            )
            work.append(f"{value} + {n} = {value + n}")
            value += n
        elif op == "sub" and value > 2:
            n = rng.randint(1, value - 1)
            text.append(rng.choice((f"{name} gives away {n} {item}.", f"{name} loses {n} {item}.")))
            work.append(f"{value} - {n} = {value - n}")
            value -= n
        else:
            n = rng.randint(2, 3)
            text.append(f"Then the number of {item} {name} has becomes {n} times as many.")
            work.append(f"{value} * {n} = {value * n}")
            value *= n
    text.append(f"How many {item} does {name} have now?")
    return " ".join(text), value, work


def synth_problems(
    n: int, seed: int = 0, difficulties: tuple[int, ...] = (1, 2, 3, 4)
) -> list[dict]:
    """``n`` GSM8K-format records (``id`` = ``synth-s{seed}-{i}``, ``question``, ``answer``
    with ``#### N``, ``difficulty``), difficulties cycled evenly; each is a 1-4 step arithmetic
    story with an exact answer."""
    if n < 1:
        raise ValueError("n must be >= 1")
    if not difficulties or any(not 1 <= d <= 4 for d in difficulties):
        raise ValueError("difficulties must be in 1..4")
    rng = random.Random(seed)
    out = []
    for i in range(n):
        steps = difficulties[i % len(difficulties)]
        question, value, work = _problem(rng, steps)
        out.append(
            {
                "id": f"synth-s{seed}-{i}",
                "question": question,
                "answer": "\n".join(work) + f"\n#### {value}",
                "difficulty": steps,
            }
        )
    return out


def write_gsm8k(records: list[dict], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
