"""Synthetic corpora with known structure, written from real vocabulary (wordfreq).

``markov_domains``: each domain owns a disjoint slice of real English words and a seeded sparse
bigram chain over them plus shared function words; a document is a walk of the chain. The ground
truth (domain vocabulary, transition matrix) is returned with the text, so claims that need it
(which domain a finetune targeted, how predictable a text is) can be graded exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llm_methods.corpora import wordfreq_words

__all__ = ["MarkovDomains", "markov_domains"]

FUNCTION_WORDS = ("the", "a", "of", "and", "to", "in", "is", "for", "with", "on")


@dataclass
class MarkovDomains:
    texts: list[str]
    domains: list[int]  # domain index of each text
    vocab: list[list[str]]  # content words per domain
    names: list[str]


def markov_domains(
    n_domains: int = 4,
    words_per_domain: int = 60,
    docs_per_domain: int = 200,
    doc_words: int = 60,
    branching: int = 4,
    seed: int = 0,
    lang: str = "en",
) -> MarkovDomains:
    """Documents from ``n_domains`` bigram chains over disjoint real-word vocabularies.

    From each word the chain moves to one of ``branching`` successors (seeded, Dirichlet
    weights) or, with probability 0.2, to a shared function word.
    """
    rng = np.random.default_rng(seed)
    pool = [w for w in wordfreq_words(lang, 3000) if w not in FUNCTION_WORDS and len(w) > 3]
    pool = pool[100 : 100 + n_domains * words_per_domain]
    if len(pool) < n_domains * words_per_domain:
        raise ValueError(f"wordfreq {lang!r} has too few words for {n_domains} domains")
    rng.shuffle(pool)
    vocab = [pool[k * words_per_domain : (k + 1) * words_per_domain] for k in range(n_domains)]
    texts, domains = [], []
    for k, words in enumerate(vocab):
        n = len(words)
        succ = np.stack([rng.choice(n, size=branching, replace=False) for _ in range(n)])
        weights = rng.dirichlet(np.ones(branching), size=n)
        for _ in range(docs_per_domain):
            state = int(rng.integers(n))
            out = [words[state]]
            for _ in range(doc_words - 1):
                if rng.random() < 0.2:
                    out.append(FUNCTION_WORDS[int(rng.integers(len(FUNCTION_WORDS)))])
                state = int(succ[state, rng.choice(branching, p=weights[state])])
                out.append(words[state])
            texts.append(" ".join(out) + ".")
            domains.append(k)
    return MarkovDomains(texts, domains, vocab, [f"domain{k}" for k in range(n_domains)])
