"""Synthetic multilingual task with real English/Spanish/German words (wordfreq) and the four
evaluation scenarios.

Task ("repeat"): the prompt ``"<instruction>: w1 w2 w3 w4 =>"`` lists concepts in the question
language; the answer repeats the same concepts, in order, in the expected answer language. The
lexicon aligns the i-th selected frequent word of each language as one "concept" (a synthetic
parallel lexicon: the words are real, so language detectors work, but the alignment is not a
translation).

Scenarios (the paper's four): ``monolingual`` (question in L, answer in L), ``code_mixed``
(instruction in L, half the listed words in English; answer in L), ``english_distractor`` (an
English sentence before the question in L; answer in L), ``bilingual`` (question in L with an
explicit target-language tag ``[T]``; answer in T).

The pretraining mixture induces a language-consistency failure: Spanish/German questions are
answered in English with probability ``p_fail``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llm_methods.corpora import wordfreq_words

__all__ = [
    "LANGS",
    "SCENARIOS",
    "Example",
    "Lexicon",
    "build_lexicon",
    "consistent_examples",
    "make_example",
    "pretraining_examples",
]

LANGS = ("en", "es", "de")
SCENARIOS = ("monolingual", "code_mixed", "english_distractor", "bilingual")
INSTRUCTION = {"en": "repeat", "es": "repite", "de": "wiederhole"}
ARROW = "=>"
N_WORDS = 4


@dataclass(frozen=True)
class Lexicon:
    words: dict[str, list[str]]  # language -> word of each concept

    @property
    def n_concepts(self) -> int:
        return len(self.words["en"])

    def concept_of(self) -> dict[str, tuple[str, int]]:
        """word -> (language, concept)."""
        return {w: (lang, i) for lang, ws in self.words.items() for i, w in enumerate(ws)}


def build_lexicon(n_concepts: int = 48, skip: int = 30) -> Lexicon:
    """``n_concepts`` frequent words (>= 4 letters) per language after the ``skip`` most frequent,
    no word shared between languages or with the instructions."""
    lists = {lang: [w for w in wordfreq_words(lang, 1500) if len(w) >= 4] for lang in LANGS}
    taken = set(INSTRUCTION.values())
    counts: dict[str, int] = {}
    for ws in lists.values():
        for w in set(ws):
            counts[w] = counts.get(w, 0) + 1
    words = {}
    for lang, ws in lists.items():
        unique = [w for w in ws if counts[w] == 1 and w not in taken][skip : skip + n_concepts]
        if len(unique) < n_concepts:
            raise ValueError(f"wordfreq {lang!r}: only {len(unique)} usable words")
        words[lang] = unique
    return Lexicon(words)


@dataclass(frozen=True)
class Example:
    prompt: str
    answer: str  # starts with a space, no newline
    q_lang: str
    a_lang: str  # expected answer language
    concepts: tuple[int, ...]
    scenario: str


def make_example(
    lex: Lexicon, rng: np.random.Generator, q_lang: str, a_lang: str, scenario: str = "monolingual"
) -> Example:
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    concepts = tuple(int(c) for c in rng.choice(lex.n_concepts, N_WORDS, replace=False))
    shown = [lex.words[q_lang][c] for c in concepts]
    if scenario == "code_mixed":
        for i in rng.choice(N_WORDS, N_WORDS // 2, replace=False):
            shown[i] = lex.words["en"][concepts[i]]
    head = f"{INSTRUCTION[q_lang]}"
    if scenario == "bilingual":
        head += f" [{a_lang}]"
    prompt = f"{head}: {' '.join(shown)} {ARROW}"
    if scenario == "english_distractor":
        distract = rng.choice(lex.n_concepts, 3, replace=False)
        prompt = " ".join(lex.words["en"][int(c)] for c in distract) + ". " + prompt
    answer = " " + " ".join(lex.words[a_lang][c] for c in concepts)
    return Example(prompt, answer, q_lang, a_lang, concepts, scenario)


def pretraining_examples(
    lex: Lexicon, n: int, p_fail: float, seed: int, p_bilingual: float = 0.15
) -> list[Example]:
    """The failure-inducing mixture: questions in all three languages; es/de questions answered
    in English with probability ``p_fail``; a share of explicitly tagged bilingual examples."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        q = LANGS[int(rng.integers(3))]
        if rng.random() < p_bilingual:
            a = LANGS[int(rng.integers(3))]
            out.append(make_example(lex, rng, q, a, "bilingual"))
            continue
        a = "en" if (q != "en" and rng.random() < p_fail) else q
        out.append(make_example(lex, rng, q, a))
    return out


def consistent_examples(lex: Lexicon, n: int, seed: int) -> list[Example]:
    """Fine-tuning data: every scenario, answers in the expected language."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        scenario = SCENARIOS[i % len(SCENARIOS)]
        q = LANGS[int(rng.integers(3))]
        a = LANGS[int(rng.integers(3))] if scenario == "bilingual" else q
        out.append(make_example(lex, rng, q, a, scenario))
    return out
