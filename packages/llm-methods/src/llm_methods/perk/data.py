"""BabiLong-format reader and an offline BabiLong-style generator (bAbI qa1-qa3 in filler).

Format (jsonl, one record a line): ``{"context": [segment, ...], "question": str,
"answer": str, "support": [str, ...] (optional)}``. The generator hides bAbI-like facts (agents,
locations, objects, moves) among filler sentences: ``n_segments`` controls the context length
and ``position`` in [0, 1] where the supporting facts sit.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
from torch.utils.data import DataLoader

from llm_methods.jsonl import iter_jsonl

__all__ = [
    "TASKS",
    "BabiLongDataModule",
    "BabiRecord",
    "extract_output",
    "is_correct",
    "read_babilong",
    "synth_babilong",
    "write_babilong",
]

TASKS = ("qa1", "qa2", "qa3")
AGENTS = ("Mary", "John", "Sandra", "Daniel")
LOCATIONS = ("kitchen", "garden", "office", "bathroom", "hallway", "bedroom")
OBJECTS = ("apple", "football", "milk")
FILLER = (
    "The weather was mild and the streets were quiet.",
    "A train passed in the distance without stopping.",
    "Someone had left a newspaper on the bench.",
    "The clock in the square struck the hour.",
    "Birds gathered on the roof of the old mill.",
    "A shopkeeper swept the pavement in front of his door.",
    "The river ran slowly under the stone bridge.",
    "Children were playing a game near the fountain.",
)


@dataclass
class BabiRecord:
    context: list[str]
    question: str
    answer: str
    support: list[str] = field(default_factory=list)
    task: str = ""


def read_babilong(path: str | Path, limit: int | None = None) -> list[BabiRecord]:
    """Records of a BabiLong-format jsonl; errors name ``file:line: field``."""
    out: list[BabiRecord] = []
    for where, obj in iter_jsonl(path, ("context", "question", "answer"), ValueError):
        ctx = obj["context"]
        if isinstance(ctx, str):
            ctx = [ctx]
        if not isinstance(ctx, list) or not ctx or not all(isinstance(s, str) for s in ctx):
            raise ValueError(f"{where}: field 'context' must be a non-empty list of strings")
        q, a = str(obj["question"]).strip(), str(obj["answer"]).strip()
        if not q:
            raise ValueError(f"{where}: field 'question' is empty")
        if not a:
            raise ValueError(f"{where}: field 'answer' is empty")
        support = obj.get("support") or []
        if isinstance(support, str):
            support = [support]
        out.append(BabiRecord(ctx, q, a, [str(s) for s in support], str(obj.get("task", ""))))
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise ValueError(f"{path}: no records")
    return out


def _facts(rng: random.Random, task: str) -> tuple[list[str], str, str, list[str]]:
    """(story facts, question, answer, supporting facts) for one bAbI-like episode."""
    agents = rng.sample(AGENTS, 2)
    if task == "qa1":  # single supporting fact: the agent's last move
        a, b = agents
        l1, l2, l3 = rng.sample(LOCATIONS, 3)
        facts = [f"{a} went to the {l1}.", f"{b} moved to the {l2}.", f"{a} journeyed to the {l3}."]
        return facts, f"Where is {a}?", l3, [facts[2]]
    if task == "qa2":  # two supporting facts: object carried by an agent
        a, b = agents
        obj = rng.choice(OBJECTS)
        l1, l2, l3 = rng.sample(LOCATIONS, 3)
        facts = [
            f"{a} went to the {l1}.",
            f"{a} picked up the {obj}.",
            f"{b} went to the {l2}.",
            f"{a} travelled to the {l3}.",
        ]
        return facts, f"Where is the {obj}?", l3, [facts[1], facts[3]]
    if task == "qa3":  # three supporting facts: where was the object before
        a = agents[0]
        obj = rng.choice(OBJECTS)
        l1, l2, l3 = rng.sample(LOCATIONS, 3)
        facts = [
            f"{a} went to the {l1}.",
            f"{a} grabbed the {obj}.",
            f"{a} went to the {l2}.",
            f"{a} moved to the {l3}.",
        ]
        return facts, f"Where was the {obj} before the {l3}?", l2, [facts[1], facts[2], facts[3]]
    raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")


def synth_babilong(
    n: int,
    n_segments: int = 8,
    position: float | None = None,
    tasks: tuple[str, ...] = TASKS,
    seed: int = 0,
) -> list[BabiRecord]:
    """``n`` records: each story's facts in order, interleaved into ``n_segments`` filler
    segments (one sentence each) starting at relative ``position`` (None = random)."""
    if n < 1 or n_segments < 1:
        raise ValueError("n and n_segments must be >= 1")
    if position is not None and not 0.0 <= position <= 1.0:
        raise ValueError(f"position must be in [0, 1], got {position}")
    rng = random.Random(seed)
    out = []
    for i in range(n):
        task = tasks[i % len(tasks)]
        facts, q, a, support = _facts(rng, task)
        filler = [rng.choice(FILLER) for _ in range(n_segments)]
        pos = rng.random() if position is None else position
        start = round(pos * n_segments)
        segments = filler[:start] + facts + filler[start:]
        out.append(BabiRecord(segments, q, a, support, task))
    return out


def write_babilong(records: list[BabiRecord], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "context": r.context,
            "question": r.question,
            "answer": r.answer,
            "support": r.support,
            "task": r.task,
        }
        for r in records
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


_OUTPUT = re.compile(r"<output>(.*?)(?:</output>|$)", re.S)


def extract_output(text: str) -> str:
    """The answer inside ``<output>...</output>`` (or after ``<output>`` if unclosed); else the
    whole text's first line. Lower-cased, stripped of spaces and a final full stop."""
    match = _OUTPUT.search(text)
    ans = match.group(1) if match else text.strip().split("\n")[0]
    return ans.strip().rstrip(".").strip().lower()


def is_correct(text: str, answer: str) -> bool:
    return extract_output(text) == answer.strip().rstrip(".").strip().lower()


def _records(batch: list[BabiRecord]) -> list[BabiRecord]:
    return batch


class BabiLongDataModule(L.LightningDataModule):
    """BabiLong-format jsonl files, or the offline generator when a file is not given.

    Batches are lists of :class:`BabiRecord` (each record has its own context). Generated
    splits: ``n_train`` / ``n_val`` / ``n_test`` records of ``tasks`` with ``n_segments`` filler
    segments (a list mixes lengths) and the facts at ``position`` (None = random), seeds
    ``seed``, ``seed + 1``, ``seed + 2``.
    """

    def __init__(
        self,
        train_file: str | None = None,
        val_file: str | None = None,
        test_file: str | None = None,
        n_train: int = 64,
        n_val: int = 16,
        n_test: int = 16,
        n_segments: int | list[int] = 8,
        position: float | None = None,
        tasks: list[str] | None = None,
        batch_size: int = 1,
        limit: int | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        for name in tasks or []:
            if name not in TASKS:
                raise ValueError(f"unknown task {name!r}; expected some of {TASKS}")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.splits: dict[str, list[BabiRecord]] = {}

    def _split(self, file: str | None, n: int, seed: int) -> list[BabiRecord]:
        hp = self.hparams
        if file:
            return read_babilong(file, hp.limit)
        lengths = hp.n_segments if isinstance(hp.n_segments, list) else [hp.n_segments]
        tasks = tuple(hp.tasks or TASKS)
        per = [n // len(lengths) + (i < n % len(lengths)) for i in range(len(lengths))]
        out: list[BabiRecord] = []
        for i, (length, k) in enumerate(zip(lengths, per, strict=True)):
            if k:
                out += synth_babilong(k, length, hp.position, tasks, seed * 1000 + i)
        return out

    def setup(self, stage: str | None = None) -> None:
        hp = self.hparams
        if stage in (None, "fit") and "train" not in self.splits:
            self.splits["train"] = self._split(hp.train_file, hp.n_train, hp.seed)
        if stage in (None, "fit", "validate") and "val" not in self.splits:
            self.splits["val"] = self._split(hp.val_file, hp.n_val, hp.seed + 1)
        if stage in (None, "test") and "test" not in self.splits:
            self.splits["test"] = self._split(hp.test_file, hp.n_test, hp.seed + 2)

    def _loader(self, split: str, shuffle: bool) -> DataLoader[Any]:
        return DataLoader(
            self.splits[split],  # type: ignore[arg-type]
            batch_size=self.hparams.batch_size,
            shuffle=shuffle,
            collate_fn=_records,
            num_workers=0,
        )

    def train_dataloader(self) -> DataLoader[Any]:
        return self._loader("train", True)

    def val_dataloader(self) -> DataLoader[Any]:
        return self._loader("val", False)

    def test_dataloader(self) -> DataLoader[Any]:
        return self._loader("test", False)
