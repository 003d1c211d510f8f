"""Synthetic search-agent traces in the exact SeekBench schema, from agent profiles with known
behaviour, so the process metrics have ground truth to recover.

World: each question asks one relation of one invented entity ("Where was Orlan Vesk born?").
An agent runs rounds of search -> search_result -> StateAssessment; after each result it answers
with probability ``p_answer[E]`` (E = the running evidence state 0/1/2), and an answer is correct
with probability ``accuracy[E]``. After an Insufficient result it refines its query with
probability ``refine`` (a refined query finds sufficient evidence more often) or repeats it.
Its reasoning is grounded in the documents with probability ``grounded``. Every step carries the
gold annotation the generator used; text cues follow the labels with some ambiguous templates,
so judges have something real (and imperfect) to recover.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PROFILES", "AgentProfile", "synth_traces", "true_miscalibration"]

RELATIONS = (
    ("born", "Where was {e} born?", "{e} was born in {v}.", "birthplace"),
    ("employer", "Which company did {e} work for?", "{e} worked for {v}.", "employer"),
    ("river", "Which river flows through {e}?", "The river {v} flows through {e}.", "river"),
    ("author", "Who wrote {e}?", "{e} was written by {v}.", "author"),
)
SYLLABLES = (
    "ka",
    "lo",
    "ven",
    "mi",
    "tor",
    "sa",
    "rel",
    "qu",
    "an",
    "dor",
    "bel",
    "is",
    "um",
    "zer",
    "pha",
    "lin",
    "gro",
    "ett",
    "val",
    "ny",
)
# P(Sufficient) of a result by query type; P(Clear | Sufficient)
P_SUFFICIENT = {
    "InitialQuery": 0.35,
    "RefinedQuery": 0.6,
    "RepeatQuery": 0.08,
    "FollowUpQuery": 0.75,
}
P_CLEAR = {"InitialQuery": 0.5, "RefinedQuery": 0.5, "RepeatQuery": 0.5, "FollowUpQuery": 0.85}
P_ENTITY_DISTRACTOR = 0.4  # an Insufficient result still has a document on the entity
AMBIGUOUS_TEXT = 0.15  # share of reasoning steps written with a type-neutral template


@dataclass(frozen=True)
class AgentProfile:
    """Known behaviour of one synthetic agent (E = evidence state 0/1/2)."""

    name: str
    p_answer: tuple[float, float, float]  # P(answer after a result | E)
    accuracy: tuple[float, float, float]  # P(correct | answer at E)
    refine: float  # P(refine rather than repeat a query after an Insufficient result)
    grounded: float  # P(a StateAssessment is grounded in the documents)
    max_rounds: int = 6


# Calibration chain (true order, strictly dominated in P(answer | E < 2)): calibrated < hasty
# < premature < reckless. ``premature`` knows many answers from memory: its accuracy at low E is
# set so its population accuracy equals ``calibrated``'s (about 0.82 each on 30k traces), so
# answer accuracy alone cannot tell them apart. ``stubborn`` never recovers (always repeats);
# ``overcautious`` rarely answers even at E = 2.
PROFILES: dict[str, AgentProfile] = {
    p.name: p
    for p in (
        AgentProfile("calibrated", (0.02, 0.05, 0.9), (0.2, 0.5, 0.9), 0.9, 0.9),
        AgentProfile("hasty", (0.2, 0.35, 0.9), (0.2, 0.5, 0.9), 0.9, 0.75),
        AgentProfile("premature", (0.45, 0.6, 0.9), (0.76, 0.78, 0.9), 0.9, 0.6),
        AgentProfile("reckless", (0.75, 0.85, 0.9), (0.2, 0.5, 0.9), 0.5, 0.4),
        AgentProfile("stubborn", (0.02, 0.05, 0.9), (0.2, 0.5, 0.9), 0.0, 0.9),
        AgentProfile("overcautious", (0.0, 0.02, 0.3), (0.2, 0.5, 0.9), 0.9, 0.9),
    )
}
CALIBRATION_CHAIN = ("calibrated", "hasty", "premature", "reckless")


def true_miscalibration(profile: AgentProfile, threshold: int = 2) -> float:
    """Decision-level balanced miscalibration mean_k |p_answer[k] - 1[k >= threshold]|."""
    return float(np.mean([abs(p - (k >= threshold)) for k, p in enumerate(profile.p_answer)]))


def _name(rng: np.random.Generator, parts: int = 2) -> str:
    return "".join(rng.choice(SYLLABLES, size=parts)).capitalize()


def _world(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        rel = RELATIONS[i % len(RELATIONS)]
        entity = f"{_name(rng)} {_name(rng, 3)}"
        answer, distractor = _name(rng, 3), _name(rng, 3)
        others = [f"{_name(rng)} {_name(rng, 3)}" for _ in range(3)]
        out.append(
            {
                "rel": rel,
                "entity": entity,
                "answer": answer,
                "distractor": distractor,
                "others": others,
                "dataset": ("musique", "hotpotqa", "nq")[i % 3],
            }
        )
    return out


def _documents(q: dict[str, Any], sufficient: bool, clear: bool, rng: np.random.Generator):
    rel, e = q["rel"], q["entity"]
    docs = []
    if sufficient:
        text = rel[2].format(e=e, v=q["answer"])
        if not clear:
            text += " However, some sources say " + rel[2].format(e=e, v=q["distractor"]).lower()
        docs.append({"title": e, "content": text})
    elif rng.random() < P_ENTITY_DISTRACTOR:  # about the entity, but not the asked relation
        docs.append({"title": e, "content": f"{e} is known for the {_name(rng, 2)} festival."})
    for other in rng.choice(q["others"], size=3 - len(docs), replace=False):
        v = _name(rng, 3)
        docs.append({"title": other, "content": rel[2].format(e=other, v=v)})
    order = rng.permutation(len(docs))
    return [docs[i] for i in order]


def _reasoning(kind: str, q: dict[str, Any], grounded: bool, docs, rng) -> str:
    e, word = q["entity"], q["rel"][3]
    if rng.random() < AMBIGUOUS_TEXT:
        return f"Okay, about {e}." if grounded else "Okay."
    if kind == "PlanFormation":
        return f"I need to find the {word} of {e}. I will search for it next."
    if kind == "InformationSynthesis":
        return f"Therefore, combining what I know, the {word} of {e} can be given."
    if grounded and docs:
        title = docs[0]["title"]
        return f"From the results, the document '{title}' says: {docs[0]['content'][:60]}"
    return f"It seems the {word} is probably something I remember, not from the results."


def _step(index: int, kind: str, body: dict[str, Any], label: dict[str, Any] | None):
    step = {
        "type": kind,
        **body,
        "step_index": index,
        "trace_dependency": {"dependent_on": index - 1 if index else None},
    }
    if label is not None:
        step["annotation"] = label
    return step


def _trace(q: dict[str, Any], qid: int, agent: AgentProfile, rng: np.random.Generator):
    rel, e = q["rel"], q["entity"]
    steps: list[dict[str, Any]] = []

    def add(kind: str, body: dict[str, Any], label: dict[str, Any] | None) -> None:
        steps.append(_step(len(steps), kind, body, label))

    plan = _reasoning("PlanFormation", q, False, [], rng)
    add(
        "reasoning",
        {"content": plan},
        {
            "type": "PlanFormation",
            "attributes": {"groundness": "Not Grounded", "anchor_type": "QUESTION"},
        },
    )
    evidence, last_quality, query, queries = 0, None, "", []
    answer: str | None = None
    correct = False
    for r in range(agent.max_rounds):
        if r == 0:
            qtype, query = "InitialQuery", f"{e} {rel[3]}"
        elif last_quality == "Insufficient":
            if rng.random() < agent.refine:
                qtype, query = "RefinedQuery", f"{e} {rel[3]} {rel[0]} record"
            else:
                qtype = "RepeatQuery"
        else:
            qtype, query = "FollowUpQuery", f"confirm {q['answer']} official source"
        queries.append(query)
        add("search", {"query": query}, {"type": qtype, "attributes": {}})
        sufficient = rng.random() < P_SUFFICIENT[qtype]
        clear = sufficient and rng.random() < P_CLEAR[qtype]
        docs = _documents(q, sufficient, clear, rng)
        last_quality = "Sufficient" if sufficient else "Insufficient"
        add(
            "search_result",
            {"documents": docs},
            {
                "type": "search_result",
                "attributes": {
                    "information_quality": last_quality,
                    "information_clarity": "Clear" if clear else "Unclear",
                },
            },
        )
        evidence = max(evidence, 2 if clear else 1 if sufficient else 0)
        grounded = rng.random() < agent.grounded
        ordered = sorted(docs, key=lambda d: d["title"] != e)  # the relevant doc first
        text = _reasoning("StateAssessment", q, grounded, ordered, rng)
        add(
            "reasoning",
            {"content": text},
            {
                "type": "StateAssessment",
                "attributes": {
                    "groundness": "Grounded" if grounded else "Not Grounded",
                    "anchor_type": "EVIDENCE",
                },
            },
        )
        if rng.random() < agent.p_answer[evidence]:
            synth = _reasoning("InformationSynthesis", q, grounded, ordered, rng)
            add(
                "reasoning",
                {"content": synth},
                {
                    "type": "InformationSynthesis",
                    "attributes": {
                        "groundness": "Grounded" if grounded else "Not Grounded",
                        "anchor_type": "TRACE",
                    },
                },
            )
            correct = bool(rng.random() < agent.accuracy[evidence])
            answer = q["answer"] if correct else q["distractor"]
            add("CorrectAnswer" if correct else "IncorrectAnswer", {"content": answer}, None)
            break
        if r + 1 < agent.max_rounds:
            nxt = _reasoning("PlanFormation", q, False, [], rng)
            add(
                "reasoning",
                {"content": nxt},
                {
                    "type": "PlanFormation",
                    "attributes": {"groundness": "Not Grounded", "anchor_type": "QUESTION"},
                },
            )
    return {
        "question": rel[1].format(e=e),
        "ground_truth": [q["answer"]],
        "reward": int(correct),
        "is_correct": correct,
        "trace": steps,
        "final_answer": answer,
        "queries": queries,
        "model": agent.name,
        "dataset": q["dataset"],
        "id": qid,
    }


def synth_traces(
    n_questions: int, agents: list[str] | None = None, seed: int = 0
) -> list[dict[str, Any]]:
    """Every agent answers the same ``n_questions`` questions (ids ``agent_index * n + i``)."""
    names = list(PROFILES) if agents is None else agents
    unknown = [a for a in names if a not in PROFILES]
    if unknown:
        raise ValueError(f"unknown agent profile {unknown[0]!r} (known: {', '.join(PROFILES)})")
    if n_questions < 1:
        raise ValueError("n_questions must be >= 1")
    world = _world(n_questions, seed)
    out = []
    for a, name in enumerate(names):
        rng = np.random.default_rng([seed, a, 7])
        out += [_trace(q, a * n_questions + i, PROFILES[name], rng) for i, q in enumerate(world)]
    return out
