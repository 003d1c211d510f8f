"""Edit metrics (ROME §3.2 / MEMIT §5.2 definitions) and fact probing.

CounterFact requests (``kind == "counterfact"``): efficacy = fraction of rewrite prompts with
p(target_new) > p(target_true); generalisation: the same on paraphrase prompts; specificity:
fraction of neighbourhood prompts whose own true answer (CounterFact: ``target_true``) stays more
probable than ``target_new``. Probabilities compare the mean per-token log-prob of the answers
(ROME's convention).

zsRE requests (``kind == "zsre"``): token-level accuracy, as the official
``compute_rewrite_quality_zsre`` (ROME / MEMIT / AlphaEdit): for each token of the answer, is it
the argmax of the next-token prediction given the prompt and the answer's previous tokens?
Efficacy on the rewrite prompt with ``target_new``, generalisation on the paraphrase with
``target_new``, specificity on the neighbourhood prompt with its own answer (``loc_ans``); each
request's score is its mean over those tokens, the reported number the mean over requests
(the official ``summarize``). There is no p(target_true) in it.

S: harmonic mean of the three. Fluency: ROME's weighted n-gram entropy (2/3·H₂ + 4/3·H₃)/2 of
greedy generations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import torch

from llm_methods.lm import LM, LMError, collate, continuation_logprobs, encode_texts, generate
from llm_methods.lm.scoring import final_hidden, head_logits
from llm_methods.suit.data import EditRequest

__all__ = [
    "FEWSHOT_ANTONYMS",
    "antonym_items",
    "edit_metrics",
    "fluency",
    "general_ability",
    "harmonic_mean",
    "known_facts",
    "mean_logprobs",
    "ngram_entropy",
    "request_metrics",
    "score_requests",
    "token_accuracy",
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


@torch.no_grad()
def mean_logprobs(lm: LM, prompts: Sequence[str], continuations: Sequence[str]) -> np.ndarray:
    """Mean per-token log p(continuation | prompt) of each pair, ``[N]``: the values of
    ``continuation_logprobs(..., reduce="mean")`` (prompt with BOS, continuation without special
    tokens), from one forward per distinct token row ``prompt + continuation[:-1]`` and the
    unembedding at the continuation's positions only. The comparisons of :func:`edit_metrics`
    share rows: p(new) and p(true) after one prompt with one-token answers, and the
    neighbourhood prompts that many requests have in common (issue 40: at ~100 edits the
    pair-by-pair scoring cost as much as the edits)."""
    heads = encode_texts(lm, list(prompts))
    tails = [list(lm.tokenizer(c, add_special_tokens=False).input_ids) for c in continuations]
    if len(heads) != len(tails):
        raise LMError(f"{len(heads)} prompts but {len(tails)} continuations")
    rows: dict[tuple[int, ...], int] = {}
    for i, (head, tail) in enumerate(zip(heads, tails, strict=True)):
        if not tail:
            raise LMError(f"continuation {i} has no tokens")
        rows.setdefault(tuple(head + tail[:-1]), len(rows))
    first = [len(k) for k in rows]  # per row, the earliest position any of its pairs reads
    for head, tail in zip(heads, tails, strict=True):
        r = rows[tuple(head + tail[:-1])]
        first[r] = min(first[r], len(head) - 1)
    keys = list(rows)
    logp: list[torch.Tensor] = []  # per row: [len(row) - first, V] log-probs
    for start in range(0, len(keys), BATCH):
        chunk = keys[start : start + BATCH]
        hidden = final_hidden(lm, collate([list(k) for k in chunk], lm.tokenizer.pad_token_id))
        at = [(r, p) for r, k in enumerate(chunk) for p in range(first[start + r], len(k))]
        index = torch.as_tensor(at, device=hidden.device).T
        picked = hidden[index[0], index[1]]
        values = head_logits(lm, picked).float().log_softmax(-1).cpu()
        offset = 0
        for r, k in enumerate(chunk):
            n = len(k) - first[start + r]
            logp.append(values[offset : offset + n])
            offset += n
    out = np.empty(len(heads))
    for i, (head, tail) in enumerate(zip(heads, tails, strict=True)):
        r = rows[tuple(head + tail[:-1])]
        pos = torch.arange(len(head) - 1, len(head) - 1 + len(tail)) - first[r]
        out[i] = float(logp[r][pos, torch.as_tensor(tail)].mean())
    return out


def _prefers(lm: LM, prompts: list[str], good: list[str], bad: list[str]) -> np.ndarray:
    if not prompts:
        return np.zeros(0, dtype=bool)
    n = len(prompts)
    s = mean_logprobs(lm, prompts * 2, good + bad)
    return s[:n] > s[n:]


@torch.no_grad()
def token_accuracy(lm: LM, prompts: Sequence[str], targets: Sequence[str]) -> list[np.ndarray]:
    """Per (prompt, target): one bool per target token, True when that token is the argmax of the
    model's next-token prediction given the prompt and the target's previous tokens (teacher
    forcing; the official zsRE ``test_batch_prediction_acc`` on prompt + decoded prefix). Prompts
    are encoded as everywhere in the core (BOS first when the tokenizer has one), targets without
    special tokens, so ``" Paris"`` keeps its leading space."""
    if len(prompts) != len(targets):
        raise LMError(f"{len(prompts)} prompts but {len(targets)} targets")
    if not prompts:
        return []
    heads = encode_texts(lm, list(prompts))
    tails = [list(lm.tokenizer(t, add_special_tokens=False).input_ids) for t in targets]
    for t, ids in zip(targets, tails, strict=True):
        if not ids:
            raise LMError(f"target {t!r} has no tokens")
    out: list[np.ndarray] = []
    for start in range(0, len(heads), BATCH):
        pairs = list(zip(heads[start : start + BATCH], tails[start : start + BATCH], strict=True))
        batch = collate([h + t for h, t in pairs], lm.tokenizer.pad_token_id, lm.device)
        hidden = final_hidden(lm, batch)
        for r, (head, tail) in enumerate(pairs):
            at = torch.arange(len(head) - 1, len(head) - 1 + len(tail), device=hidden.device)
            pred = head_logits(lm, hidden[r, at]).argmax(-1).cpu()
            out.append((pred == torch.tensor(tail)).numpy())
    return out


def _outcomes(lm: LM, requests: Sequence[EditRequest]) -> list[dict[str, np.ndarray]]:
    """Per request, the success of each scored unit: ``{"efficacy", "generalization",
    "specificity"}`` -> bool array (CounterFact: one per prompt; zsRE: one per answer token)."""
    kinds = {r.kind for r in requests}
    if not kinds <= {"counterfact", "zsre"}:
        raise LMError(f"unknown request kind(s) {sorted(kinds - {'counterfact', 'zsre'})}")
    groups: dict[str, list[tuple[int, str, str, str, str]]] = {
        "pref": [],  # (request, metric, prompt, good, bad): p(good) > p(bad)
        "acc": [],  # (request, metric, prompt, target, ""): token accuracy of target
    }
    for i, r in enumerate(requests):
        units = [("efficacy", r.text)]
        units += [("generalization", p) for p in r.paraphrase_prompts]
        if r.kind == "zsre":
            groups["acc"] += [(i, m, p, r.target_new, "") for m, p in units]
            groups["acc"] += [
                (i, "specificity", p, a, "")
                for p, a in zip(r.neighborhood_prompts, r.neighbour_answers(), strict=True)
            ]
        else:
            groups["pref"] += [(i, m, p, r.target_new, r.target_true) for m, p in units]
            groups["pref"] += [
                (i, "specificity", p, a, r.target_new)
                for p, a in zip(r.neighborhood_prompts, r.neighbour_answers(), strict=True)
            ]
    out: list[dict[str, list[np.ndarray]]] = [
        {"efficacy": [], "generalization": [], "specificity": []} for _ in requests
    ]
    pref = groups["pref"]
    if pref:
        won = _prefers(lm, [u[2] for u in pref], [u[3] for u in pref], [u[4] for u in pref])
        for (i, metric, *_), hit in zip(pref, won, strict=True):
            out[i][metric].append(np.array([bool(hit)]))
    acc = groups["acc"]
    if acc:
        hits = token_accuracy(lm, [u[2] for u in acc], [u[3] for u in acc])
        for (i, metric, *_), hit in zip(acc, hits, strict=True):
            out[i][metric].append(hit)
    return [
        {m: np.concatenate(v) if v else np.zeros(0, dtype=bool) for m, v in row.items()}
        for row in out
    ]


def _rows(requests: Sequence[EditRequest], got: list[dict[str, np.ndarray]]) -> list[dict]:
    rows = []
    for r, hits_of in zip(requests, got, strict=True):
        row: dict[str, object] = {"case_id": r.case_id, "kind": r.kind, "target_new": r.target_new}
        for metric, hits in hits_of.items():
            row[metric] = round(100 * float(hits.mean()), 4) if hits.size else None
        rows.append(row)
    return rows


def _aggregate(requests: Sequence[EditRequest], got: list[dict[str, np.ndarray]]) -> dict:
    out: dict[str, float] = {}
    for metric in ("efficacy", "generalization", "specificity"):
        values, weights = [], []
        cf = [g[metric] for g, r in zip(got, requests, strict=True) if r.kind == "counterfact"]
        pooled = np.concatenate(cf) if cf else np.zeros(0, dtype=bool)
        if pooled.size:
            values.append(float(pooled.mean()))
            weights.append(len(cf))
        zs = [
            float(g[metric].mean())
            for g, r in zip(got, requests, strict=True)
            if r.kind == "zsre" and g[metric].size
        ]
        if zs:
            values.append(float(np.mean(zs)))
            weights.append(len(zs))
        out[metric] = 100 * float(np.average(values, weights=weights)) if values else float("nan")
    out["S"] = harmonic_mean([v for v in out.values() if v == v])
    return out


def request_metrics(lm: LM, requests: Sequence[EditRequest]) -> list[dict[str, object]]:
    """One row per request: ``case_id``, ``kind``, ``target_new`` and its efficacy /
    generalisation / specificity in % (CounterFact: share of its prompts won; zsRE: share of the
    answer tokens predicted; ``None`` where the request has no such prompt)."""
    return _rows(requests, _outcomes(lm, requests))


def edit_metrics(lm: LM, requests: Sequence[EditRequest]) -> dict[str, float]:
    """Efficacy / generalisation / specificity / S (in %) over ``requests``. CounterFact: the
    share of all prompts won (pooled); zsRE: the mean over requests of each request's token
    accuracy (the official ``summarize``). Both kinds in one list: each metric is the mean of
    the two kinds' values weighted by their request counts."""
    return _aggregate(requests, _outcomes(lm, requests))


def score_requests(
    lm: LM, requests: Sequence[EditRequest]
) -> tuple[dict[str, float], list[dict[str, object]]]:
    """:func:`edit_metrics` and :func:`request_metrics` from one scoring pass."""
    got = _outcomes(lm, requests)
    return _aggregate(requests, got), _rows(requests, got)


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
        # the choices of an item share its rows (one-token choices: one forward per item, not
        # per choice); the values of continuation_logprobs(reduce="mean") to float rounding
        s = mean_logprobs(lm, prompts, conts)
        hits, at = 0, 0
        for _, choices, answer in items:
            hits += int(int(np.argmax(s[at : at + len(choices)])) == answer)
            at += len(choices)
        out["fewshot_acc"] = round(100.0 * hits / len(items), 2)
    return out
