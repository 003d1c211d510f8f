"""The three tasks' worlds, the JSON world format and its reader.

- ``synthetic_world``: the exact 20 Questions world, E entities x Q binary attributes with a known
  likelihood p(yes | entity, question): "crisp" attributes are 0/1, "vague" ones (the answerer
  flips a biased coin, p in [0.3, 0.7]) carry aleatoric noise, which is what separates EIG from
  entropy-only. Entities are unique on their crisp attributes.
- ``ANIMALS`` x ``ANIMAL_QUESTIONS`` with a hand-written ground-truth table ``ANIMAL_TRUTH`` (the
  answerer of task 2; SmolLM2's yes/no likelihoods on the same grid are measured against it).
- ``preference_world``: items with binary features, a question bank of feature questions ("do
  you like ...?") and pairwise comparisons; a synthetic user answers with
  p(yes) = sigmoid(beta * w . phi(question)) for a hidden preference vector w.

World JSON (``write_world`` / ``read_world``)::

    {"entities": [names...], "questions": [texts...], "p_yes": [[E rows of Q floats in [0, 1]]]}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "ANIMALS",
    "ANIMAL_QUESTIONS",
    "ANIMAL_TRUTH",
    "PreferenceWorld",
    "World",
    "animal_world",
    "preference_world",
    "read_world",
    "synthetic_world",
    "write_world",
]


@dataclass
class World:
    """A finite 20 Questions world: ``p_yes`` ``[E, Q]`` = p(yes | entity e, question q)."""

    entities: list[str]
    questions: list[str]
    p_yes: np.ndarray

    def likelihood(self) -> np.ndarray:
        """``[E, Q, 2]`` answer distributions over (yes, no)."""
        return np.stack([self.p_yes, 1.0 - self.p_yes], -1)


def synthetic_world(
    n_entities: int = 64, n_attributes: int = 40, n_vague: int = 12, seed: int = 0
) -> World:
    """Exact world: ``n_attributes - n_vague`` crisp 0/1 attributes (base rates U(0.1, 0.5),
    so questions differ in informativeness) and ``n_vague`` attributes with p(yes) ~ U(0.3, 0.7)
    per entity. Crisp signatures are unique (resampled until they are)."""
    n_crisp = n_attributes - n_vague
    if n_crisp < int(np.ceil(np.log2(max(n_entities, 2)))):
        raise ValueError(f"{n_crisp} crisp attributes cannot separate {n_entities} entities")
    rng = np.random.default_rng(seed)
    rates = rng.uniform(0.1, 0.5, n_crisp)
    crisp = (rng.random((n_entities, n_crisp)) < rates).astype(float)
    for _ in range(1000):
        _, first = np.unique(crisp, axis=0, return_index=True)
        dup = np.setdiff1d(np.arange(n_entities), first)
        if len(dup) == 0:
            break
        crisp[dup] = (rng.random((len(dup), n_crisp)) < rates).astype(float)
    vague = rng.uniform(0.3, 0.7, (n_entities, n_vague))
    p = np.concatenate([crisp, vague], 1)
    order = rng.permutation(n_attributes)  # vague questions are not bunched at the end
    kinds = np.array(["crisp"] * n_crisp + ["vague"] * n_vague)[order]
    questions = [f"Q{j:02d} ({k})" for j, k in enumerate(kinds)]
    return World([f"entity-{e:02d}" for e in range(n_entities)], questions, p[:, order])


ANIMAL_QUESTIONS = [
    "Is it a mammal?",
    "Is it a bird?",
    "Is it a fish?",
    "Is it a reptile?",
    "Is it an insect?",
    "Can it fly?",
    "Does it live in water?",
    "Is it commonly kept as a pet?",
    "Is it a farm animal?",
    "Is it bigger than a human?",
    "Does it eat meat?",
    "Does it have four legs?",
    "Does it have fur?",
    "Does it have feathers?",
    "Does it live in Africa?",
    "Does it lay eggs?",
    "Is it dangerous to humans?",
    "Does it have stripes?",
    "Is it smaller than a dog?",
    "Does it have hooves?",
    "Do people ride it?",
    "Does it have horns?",
    "Is it black and white?",
    "Does it live in cold places?",
]
# one row per animal, one 0/1 digit per question above (ground truth written here by hand)
_TABLE = """
dog       100000010011100000000000
cat       100000010011100000100000
horse     100000001101100000011000
cow       100000001101100000010110
pig       100000001001000000010000
sheep     100000001001100000010100
lion      100000000111101010000000
tiger     100000000111100011000000
elephant  100000000101001010001000
giraffe   100000000101101000010100
zebra     100000000101101001010010
bear      100000000111100010000001
wolf      100000000011100010000001
rabbit    100000010001100000100000
mouse     100000000001100000100000
bat       100001000000100000100000
whale     100000100110000000000001
dolphin   100000100010000000000000
shark     001000100110000010000000
salmon    001000100010000100000001
eagle     010001000010010100000000
penguin   010000100010010100000011
owl       010001000010010100100000
chicken   010000001000010100100000
duck      010001101000010100100000
frog      000000100010000100100000
snake     000100000010000110000000
crocodile 000100100111001110000000
turtle    000100110001000100100000
bee       000011000000000101100000
butterfly 000011000000000100100000
spider    000000000010000100100000
"""
ANIMALS = [line.split()[0] for line in _TABLE.strip().splitlines()]
ANIMAL_TRUTH = np.array(
    [[int(c) for c in line.split()[1]] for line in _TABLE.strip().splitlines()], dtype=float
)


def animal_world() -> World:
    """Task 2's answerer: the hand-written ground-truth table (0/1)."""
    return World(list(ANIMALS), list(ANIMAL_QUESTIONS), ANIMAL_TRUTH.copy())


@dataclass
class PreferenceWorld:
    """Items ``features`` ``[I, d]`` (0/1); questions ``phi`` ``[Q, d]``: a feature question is a
    unit vector e_k, a comparison "item i over item j" is x_i - x_j; ``beta`` answer sharpness."""

    features: np.ndarray
    phi: np.ndarray
    questions: list[str]
    beta: float = 3.0

    def p_yes(self, w: np.ndarray, qids: np.ndarray) -> np.ndarray:
        """``[n, q]`` p(yes | w_n, question) = sigmoid(beta * w_n . phi_q)."""
        z = self.beta * np.atleast_2d(w) @ self.phi[np.asarray(qids)].T
        return 1.0 / (1.0 + np.exp(-z))

    def utilities(self, w: np.ndarray) -> np.ndarray:
        """``[n, I]`` item utilities w_n . x_i."""
        return np.atleast_2d(w) @ self.features.T


def preference_world(
    n_items: int = 40, dim: int = 8, n_pairs: int = 32, beta: float = 3.0, seed: int = 0
) -> PreferenceWorld:
    rng = np.random.default_rng(seed)
    feats = (rng.random((n_items, dim)) < 0.5).astype(float)
    pairs = [tuple(rng.choice(n_items, 2, replace=False)) for _ in range(n_pairs)]
    phi = np.concatenate([np.eye(dim), np.stack([feats[i] - feats[j] for i, j in pairs])])
    qs = [f"Do you like items with feature {k}?" for k in range(dim)]
    qs += [f"Do you prefer item {i} over item {j}?" for i, j in pairs]
    return PreferenceWorld(feats, phi, qs, beta)


def write_world(world: World, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "entities": world.entities,
        "questions": world.questions,
        "p_yes": [[round(float(v), 6) for v in row] for row in world.p_yes],
    }
    path.write_text(json.dumps(data, indent=1))
    return path


def read_world(path: str | Path) -> World:
    """Read a world JSON; bad input raises ``ValueError`` naming the file and the field."""
    from llm_methods.jsonl import read_text

    path = Path(path)
    text = read_text(path, ValueError, "world file")  # missing, a folder, not UTF-8: one line
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object with entities, questions, p_yes")
    for key in ("entities", "questions", "p_yes"):
        if key not in data:
            raise ValueError(f"{path}: missing field {key!r}")
        if not isinstance(data[key], list) or not data[key]:
            raise ValueError(f"{path}: field {key!r} must be a non-empty list")
    for key in ("entities", "questions"):
        for i, v in enumerate(data[key]):
            if not isinstance(v, str) or not v.strip():
                raise ValueError(f"{path}: {key}[{i}] must be a non-empty string")
    if len(set(data["entities"])) != len(data["entities"]):
        raise ValueError(f"{path}: entities must be unique")
    n_e, n_q = len(data["entities"]), len(data["questions"])
    if len(data["p_yes"]) != n_e:
        raise ValueError(
            f"{path}: p_yes has {len(data['p_yes'])} rows, expected {n_e} (one per entity)"
        )
    rows = []
    for i, row in enumerate(data["p_yes"]):
        if not isinstance(row, list) or len(row) != n_q:
            raise ValueError(
                f"{path}: p_yes[{i}] must be a list of {n_q} numbers (one per question)"
            )
        for j, v in enumerate(row):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                raise ValueError(f"{path}: p_yes[{i}][{j}] = {v!r} is not a probability in [0, 1]")
        rows.append(row)
    return World(list(data["entities"]), list(data["questions"]), np.asarray(rows, dtype=float))
