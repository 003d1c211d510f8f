"""CounterFact metrics (ROME §3.2 / MEMIT §5.2 definitions) and fact probing.

Efficacy: fraction of rewrite prompts with p(target_new) > p(target_true); generalisation: the
same on paraphrase prompts; specificity: fraction of neighbourhood prompts whose own true answer
(CounterFact: ``target_true``) stays more probable than ``target_new``; S: harmonic mean of the
three. Probabilities compare the mean per-token log-prob of the answers (ROME's convention).
Fluency: ROME's weighted n-gram entropy (2/3·H₂ + 4/3·H₃)/2 of greedy generations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import torch

from llm_methods.lm import LM, continuation_logprobs, generate
from llm_methods.suit.data import EditRequest

__all__ = [
    "FEWSHOT_ANTONYMS",
    "antonym_items",
    "edit_metrics",
    "fluency",
    "general_ability",
    "harmonic_mean",
    "known_facts",
    "ngram_entropy",
]

BATCH = 32
# a tiny few-shot task for the general-ability probe (pairs of common English antonyms)
FEWSHOT_ANTONYMS = (
    ("hot", "cold"),
    ("big", "small"),
    ("up", "down"),
    ("fast", "slow"),
    ("old", "new"),
    ("good", "bad"),
    ("day", "night"),
    ("open", "closed"),
    ("left", "right"),
    ("wet", "dry"),
    ("happy", "sad"),
    ("light", "dark"),
)


def harmonic_mean(values: Sequence[float]) -> float:
    vals = [float(v) for v in values]
    if any(v <= 0 for v in vals):
        return 0.0
    return len(vals) / sum(1.0 / v for v in vals)


def _prefers(lm: LM, prompts: list[str], good: list[str], bad: list[str]) -> np.ndarray:
    if not prompts:
        return np.zeros(0, dtype=bool)
    n = len(prompts)
    with torch.no_grad():
        s = continuation_logprobs(lm, prompts * 2, good + bad, batch_size=BATCH, reduce="mean")
    return (s[:n] > s[n:]).cpu().numpy()


def edit_metrics(lm: LM, requests: Sequence[EditRequest]) -> dict[str, float]:
    """Efficacy / generalisation / specificity / S (in %) over ``requests``."""
    rw_p, rw_new, rw_true = [], [], []
    pa_p, pa_new, pa_true = [], [], []
    ne_p, ne_good, ne_bad = [], [], []
    for r in requests:
        rw_p.append(r.text)
        rw_new.append(r.target_new)
        rw_true.append(r.target_true)
        pa_p += list(r.paraphrase_prompts)
        pa_new += [r.target_new] * len(r.paraphrase_prompts)
        pa_true += [r.target_true] * len(r.paraphrase_prompts)
        ne_p += list(r.neighborhood_prompts)
        ne_good += r.neighbour_answers()
        ne_bad += [r.target_new] * len(r.neighborhood_prompts)
    eff = _prefers(lm, rw_p, rw_new, rw_true)
    gen = _prefers(lm, pa_p, pa_new, pa_true)
    spe = _prefers(lm, ne_p, ne_good, ne_bad)
    out = {
        "efficacy": 100 * float(eff.mean()) if eff.size else float("nan"),
        "generalization": 100 * float(gen.mean()) if gen.size else float("nan"),
        "specificity": 100 * float(spe.mean()) if spe.size else float("nan"),
    }
    out["S"] = harmonic_mean([v for v in out.values() if v == v])
    return out


def ngram_entropy(
    text: str, ns: Sequence[int] = (2, 3), weights: Sequence[float] = (2 / 3, 4 / 3)
) -> float:
    """ROME's fluency: weighted mean over n of the entropy (bits) of the text's n-gram distribution."""
    words = text.split()
    total = []
    for n in ns:
        grams = Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
        counts = np.array(list(grams.values()), dtype=float)
        if counts.size == 0:
            total.append(0.0)
            continue
        p = counts / counts.sum()
        total.append(float(-(p * np.log2(p)).sum()))
    return float(np.average(total, weights=weights))


def fluency(lm: LM, requests: Sequence[EditRequest], max_new_tokens: int = 40) -> float:
    """Mean n-gram entropy of greedy generations from the requests' generation prompts."""
    prompts = [p for r in requests for p in r.generation_prompts]
    if not prompts:
        return float("nan")
    texts = generate(lm, prompts, max_new_tokens=max_new_tokens)
    return float(np.mean([ngram_entropy(p + t) for p, t in zip(prompts, texts, strict=True)]))


def known_facts(
    lm: LM, facts: Sequence[tuple[str, str, str, list[str]]], templates: dict[str, str]
) -> list[tuple[str, str, str]]:
    """Facts (relation, subject, object) whose true object has the highest mean log-prob among
    all objects of the relation on the relation's prompt (the model demonstrably knows them)."""
    prompts, conts, spans = [], [], []
    for rel, subj, _, objects in facts:
        spans.append((len(prompts), len(objects)))
        prompts += [templates[rel].format(subj)] * len(objects)
        conts += [" " + o for o in objects]
    with torch.no_grad():
        s = continuation_logprobs(lm, prompts, conts, batch_size=64, reduce="mean")
    out = []
    for (start, n), (rel, subj, obj, objects) in zip(spans, facts, strict=True):
        if objects[int(s[start : start + n].argmax())] == obj:
            out.append((rel, subj, obj))
    return out


def antonym_items(shots: int = 3) -> list[tuple[str, list[str], int]]:
    """The few-shot antonym task: for each pair of :data:`FEWSHOT_ANTONYMS`, ``shots`` other pairs
    as ``"hot: cold"`` lines then ``"big:"``; the choices are every pair's second word (chance
    1/12). Items are ``(prompt, choices, index of the answer)``."""
    pairs = FEWSHOT_ANTONYMS
    answers = [f" {b}" for _, b in pairs]
    items = []
    for i, (a, _) in enumerate(pairs):
        demo = [pairs[(i + j) % len(pairs)] for j in range(1, shots + 1)]
        prompt = "".join(f"{x}: {y}\n" for x, y in demo) + f"{a}:"
        items.append((prompt, answers, i))
    return items


def general_ability(
    lm: LM,
    chunks: Sequence[Sequence[int]],
    items: Sequence[tuple[str, Sequence[str], int]],
) -> dict[str, float]:
    """The general-ability probe after editing (reported, not judged): ``ppl`` = exp of the mean
    token NLL over the held-out token ``chunks`` (AlphaEdit / ROME report the general ability
    that edits spoil, here as perplexity), ``fewshot_acc`` = % of few-shot ``items``
    ``(prompt, choices, answer index)`` whose answer has the highest mean per-token log-prob."""
    from llm_methods.lm.scoring import token_logprobs

    out: dict[str, float] = {}
    if chunks:
        with torch.no_grad():
            lps = torch.cat([lp.float().flatten() for lp in token_logprobs(lm, chunks, 8)])
        out["ppl"] = round(float(torch.exp(-lps.mean())), 3)
    if items:
        prompts = [p for p, choices, _ in items for _ in choices]
        conts = [c for _, choices, _ in items for c in choices]
        with torch.no_grad():
            s = continuation_logprobs(lm, prompts, conts, batch_size=BATCH, reduce="mean")
        hits, at = 0, 0
        for _, choices, answer in items:
            hits += int(int(torch.argmax(s[at : at + len(choices)])) == answer)
            at += len(choices)
        out["fewshot_acc"] = round(100.0 * hits / len(items), 2)
    return out
