"""Language consistency (offline detector), task accuracy, layer-wise logit-lens language
probability and cross-lingual similarity of hidden states."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from llm_methods.linguamap.data import LANGS, N_WORDS, Example, Lexicon
from llm_methods.lm import LM, capture_residual, collate, encode_texts, generate, logit_lens
from llm_methods.lm.errors import LMError

__all__ = [
    "FIRST_TOKEN_RATIO",
    "answer_concepts",
    "answer_token_budget",
    "content_mask",
    "cross_lingual_cosine",
    "decision_layer",
    "detect_language",
    "diagnosis_prompts",
    "evaluate",
    "evaluate_items",
    "known_languages",
    "lens_agreement",
    "lens_language_probability",
    "summarize_items",
    "token_languages",
]


def known_languages() -> list[str]:
    """The ISO 639-1 codes the offline detector (py3langid) can tell apart."""
    import py3langid.langid as langid

    # the full model's classes (set_languages narrows ``nb_classes`` in place)
    _, _, classes = langid._get_identifier()._full_model
    return sorted({str(c) for c in classes})  # the model lists sr and uz twice


def detect_language(texts: Sequence[str], langs: Sequence[str] = LANGS) -> list[str]:
    """py3langid restricted to ``langs`` (default en/es/de; any of :func:`known_languages`;
    '' for an empty text)."""
    import py3langid.langid as langid

    unknown = sorted(set(langs) - set(known_languages()))
    if unknown:
        raise ValueError(f"the language detector does not know {', '.join(unknown)}")
    langid.set_languages(list(langs))
    return [langid.classify(t)[0] if t.strip() else "" for t in texts]


def answer_concepts(text: str, lex: Lexicon) -> tuple[int, ...]:
    """Concept ids of the answer's words in any language (unknown words -> -1)."""
    index = lex.concept_of()
    return tuple(index.get(w, ("", -1))[1] for w in text.split())


def answer_token_budget(tokenizer: Any, lex: Lexicon) -> int:
    """New tokens that fit any correct answer in any language: ``N_WORDS`` times the most
    tokens one lexicon word takes (with its leading space), plus the closing newline. (A fixed
    12 cut 45 % of correct Spanish and 25 % of correct German answers of the 512-token BPE.)"""
    longest = max(
        len(tokenizer(" " + w, add_special_tokens=False).input_ids)
        for words in lex.words.values()
        for w in words
    )
    return N_WORDS * longest + 1


def evaluate_items(
    lm: LM, examples: Sequence[Example], lex: Lexicon
) -> tuple[np.ndarray, np.ndarray]:
    """Per example, ``(consistent, correct)`` as 0/1 arrays ``[N]``: greedy answers
    (:func:`answer_token_budget` new tokens), cut to the first line and the task's ``N_WORDS``
    words; consistent: detected language == expected; correct: the concepts, in order, whatever
    the language."""
    budget = answer_token_budget(lm.tokenizer, lex)
    answers = generate(lm, [e.prompt for e in examples], max_new_tokens=budget, batch_size=32)
    answers = [" ".join(a.split("\n")[0].split()[:N_WORDS]) for a in answers]
    langs = detect_language(answers)
    consistent = [lang == e.a_lang for lang, e in zip(langs, examples, strict=True)]
    correct = [
        answer_concepts(a, lex) == e.concepts for a, e in zip(answers, examples, strict=True)
    ]
    return np.array(consistent, dtype=float), np.array(correct, dtype=float)


def evaluate(lm: LM, examples: Sequence[Example], lex: Lexicon) -> dict[str, float]:
    """Language consistency and accuracy (:func:`evaluate_items`), overall and per scenario
    (``"<scenario>/consistency"``, ...)."""
    consistent, correct = evaluate_items(lm, examples, lex)
    return summarize_items(examples, consistent, correct)


def summarize_items(
    examples: Sequence[Example], consistent: np.ndarray, correct: np.ndarray
) -> dict[str, float]:
    """The rates of :func:`evaluate` from per-example outcomes."""
    out = {"consistency": float(np.mean(consistent)), "accuracy": float(np.mean(correct))}
    for scenario in sorted({e.scenario for e in examples}):
        idx = [i for i, e in enumerate(examples) if e.scenario == scenario]
        out[f"{scenario}/consistency"] = float(np.mean(consistent[idx]))
        out[f"{scenario}/accuracy"] = float(np.mean(correct[idx]))
    return out


def decision_layer(lens: np.ndarray) -> int:
    """The layer from which the logit lens's top language (``lens`` ``[n_layers, langs]``, e.g.
    :func:`lens_language_probability`) stays the last layer's: the paper's diagnosis of where
    the output language is decided (LinguaMap Sec. 4, the logit-lens language curves). Layers
    from it on are the ones selective finetuning trains (``k = n_layers - decision_layer``)."""
    lens = np.asarray(lens)
    if lens.ndim != 2 or len(lens) == 0:
        raise ValueError(f"lens must be [n_layers, langs], got shape {lens.shape}")
    top = lens.argmax(1)
    differ = np.nonzero(top != top[-1])[0]
    return int(differ[-1] + 1) if differ.size else 0


def diagnosis_prompts(lm: LM, examples: Sequence[Example], lex: Lexicon) -> list[str]:
    """The prompts of ``examples`` that ``lm`` answers in their expected language (greedy,
    :func:`evaluate_items`' consistency): the set the language-decision diagnosis reads. The
    decision that selective finetuning targets is the one that produces the target language;
    on a question answered in English the lens's top language is English at every layer and no
    layer switches (issue 40: a 20 x 48 model that answers 70 % of Spanish questions in English
    gave decision layer 0 over all of them)."""
    consistent, _ = evaluate_items(lm, examples, lex)
    return [e.prompt for e, ok in zip(examples, consistent, strict=True) if ok]


#: issue 40 (fifth session, fixed before its run): a token counts for a language when it
#: starts at least this many times as many of that language's lexicon words as of any other's
FIRST_TOKEN_RATIO = 2.0


def token_languages(
    tokenizer: Any,
    lex: Lexicon,
    ratio: float = FIRST_TOKEN_RATIO,
    langs: Sequence[str] | None = None,
) -> dict[int, str | None]:
    """Token id -> language, from the answers' own first tokens: the first token of each
    lexicon word as an answer writes it (``" " + word``, the tokenizer's own split). A token
    counts for the language whose lexicon words it starts most often, when that count is >=
    ``ratio`` times every other language's (``None``: ambiguous; tokens that start no lexicon
    word are absent, i.e. count for no language). The answers draw concepts uniformly, so these
    counts are the answers' first-token frequencies per language.

    Issue 40: the earlier map (a token counts for a language when its text is a prefix of that
    language's words alone, >= 2 characters) left 19 of the 28 Spanish first tokens the model
    wrote unmapped (``' c'``, ``' n'``, ``' s'``: the 512-token BPE splits a Spanish word into
    3.1 tokens, 22 of 48 Spanish words start with one letter) and 4 ambiguous, so the output
    layer's lens read 0.85 English where every greedy answer was Spanish.

    ``langs`` (default: all of ``LANGS``): the languages a token may count for, i.e. those the
    read answers can be written in; the other languages' words are not counted. Issue 40 (sixth
    session): an untagged Spanish question is answered in Spanish or English only, and with
    German counted too the pieces that start Spanish and German words about equally (``' de'``,
    ``' s'``, ``' a'``) were ambiguous while English, one token per word, never was."""
    allowed = list(LANGS) if langs is None else list(langs)
    unknown = sorted(set(allowed) - set(LANGS))
    if unknown or not allowed:
        raise ValueError(f"langs must be a non-empty subset of {list(LANGS)}, got {allowed}")
    counts: dict[int, np.ndarray] = {}
    for i, lang in enumerate(LANGS):
        if lang not in allowed:
            continue
        for w in lex.words[lang]:
            ids = tokenizer(" " + w, add_special_tokens=False).input_ids
            counts.setdefault(int(ids[0]), np.zeros(len(LANGS)))[i] += 1
    out: dict[int, str | None] = {}
    for token, c in counts.items():
        best = int(np.argmax(c))
        rest = np.delete(c, best)
        out[token] = LANGS[best] if c[best] >= ratio * rest.max() else None
    return out


@torch.no_grad()
def lens_language_probability(
    lm: LM,
    prompts: Sequence[str],
    lex: Lexicon,
    k: int = 20,
    per_prompt: bool = False,
    prepend_bos: bool = False,
    langs: Sequence[str] | None = None,
) -> np.ndarray:
    """P^(l)(ℓ): ``[n_layers, 3]`` (``per_prompt``: ``[n_prompts, n_layers, 3]``); at the last
    prompt position of each prompt, the logit lens of layer l's residual, its top-``k`` tokens
    mapped to languages by :func:`token_languages` (the answers' own first tokens), probability
    mass per language normalised over the mapped mass (a prompt with no mapped mass: zeros),
    averaged over prompts.

    The prompts are encoded as :func:`~llm_methods.lm.generate` encodes them (no special
    tokens), so the last layer's lens is the model's own next-token distribution for the
    answer it writes; ``prepend_bos=True`` puts the tokenizer's BOS first (issue 40: the
    testbed's model never saw a BOS in pretraining, and with it the lens's top token matched
    the greedy answer's first token on 22 of 28 questions, without it on 28 of 28).
    ``langs``: the languages the map may assign (:func:`token_languages`; the others' column
    stays 0), e.g. ``("en", "es")`` for Spanish questions, which are answered in one of those."""
    token_lang = token_languages(lm.tokenizer, lex, langs=langs)
    ids = encode_texts(lm, prompts, prepend_bos=prepend_bos)
    batch = collate(ids, lm.tokenizer.pad_token_id, lm.device)
    with capture_residual(lm) as store:
        lm.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
    rows = torch.arange(len(ids), device=batch.input_ids.device)
    last = (batch.lengths - 1).to(batch.input_ids.device)
    out = np.zeros((len(ids), lm.n_layers, len(LANGS)))
    for layer in range(lm.n_layers):
        h = store[layer][rows, last]
        probs = torch.softmax(logit_lens(lm, h).float(), -1)
        top = torch.topk(probs, k)
        for r, (row_p, row_i) in enumerate(zip(top.values, top.indices, strict=True)):
            mass = np.zeros(len(LANGS))
            for p, t in zip(row_p.tolist(), row_i.tolist(), strict=True):
                lang = token_lang.get(t)
                if lang is not None:
                    mass[LANGS.index(lang)] += p
            if mass.sum() > 0:
                out[r, layer] = mass / mass.sum()
    return out if per_prompt else out.mean(0)


def lens_agreement(lens: np.ndarray, expected: str | Sequence[str]) -> float:
    """The share of prompts whose last layer's top language in the per-prompt lens ``lens``
    (``[n_prompts, n_layers, langs]``, :func:`lens_language_probability` with
    ``per_prompt=True``) is ``expected`` (one language, or one per prompt: e.g. the detector's
    language of each greedy answer); a prompt with no mapped mass disagrees. A last-layer lens
    that disagrees with the model's own answers measures the token -> language map, not the
    model (issue 40)."""
    lens = np.asarray(lens)
    if lens.ndim != 3 or len(lens) == 0:
        raise ValueError(f"lens must be [n_prompts, n_layers, langs], got shape {lens.shape}")
    want = [expected] * len(lens) if isinstance(expected, str) else list(expected)
    if len(want) != len(lens):
        raise ValueError(f"{len(want)} expected languages for {len(lens)} prompts")
    final = lens[:, -1]
    top = [
        LANGS[int(i)] if row.sum() > 0 else ""
        for i, row in zip(final.argmax(1), final, strict=True)
    ]
    return float(np.mean([a == b for a, b in zip(top, want, strict=True)]))


def content_mask(lm: LM, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` bool: the positions that hold text, i.e. not padding and not one of the
    tokenizer's special tokens (BOS such as ``<|im_start|>``, EOS, pad)."""
    special = sorted({int(i) for i in lm.tokenizer.all_special_ids})
    mask = attention_mask.bool()
    if special:
        mask &= ~torch.isin(input_ids, torch.tensor(special, device=input_ids.device))
    return mask


@torch.no_grad()
def cross_lingual_cosine(
    lm: LM,
    parallel: dict[str, list[str]],
    skip_first: bool = False,
    batch_size: int = 32,
    quiet: bool = True,
    center: bool = False,
) -> np.ndarray:
    """Per layer (HF hidden-state index 0..L), the mean over language pairs and parallel items of
    cos(mean-pooled hidden state in language a, in language b): ``[L + 1]``.

    The texts are encoded with the tokenizer's BOS in front (so it, not the first word, takes the
    attention-sink role), but the pooling runs over the text's own tokens only: BOS, other
    special tokens and padding are left out (:func:`content_mask`). (Pooling over the BOS too,
    whose activation is orders of magnitude larger in middle layers, gave ~0.9997 for parallel
    and shuffled sentences alike on SmolLM2: its BOS state has norm ~25000 at layer 15, the text's
    ~165.) ``skip_first`` also leaves out each text's first token, as the logit-lens literature
    does for models without a BOS. ``center``: subtract each language's mean pooled vector (over
    its items) before the cosine, which removes the component every text shares (SmolLM2's
    content tokens still carry a few outlier dimensions, ~80 against a median of ~2, so uncentred
    cosines sit near 0.88 for any pair of sentences); needs >= 2 items. ``quiet=False``: progress
    lines per batch on stderr (:func:`iclr26_common.progress.progress`)."""
    pooled: dict[str, list[torch.Tensor]] = {}
    from iclr26_common.progress import progress

    for lang, texts in parallel.items():
        ids = encode_texts(lm, texts)
        chunks: list[list[torch.Tensor]] = []
        starts = range(0, len(ids), batch_size)
        for start in progress(starts, description=f"linguamap similarity {lang}", quiet=quiet):
            batch = collate(ids[start : start + batch_size], lm.tokenizer.pad_token_id, lm.device)
            out = lm.model(
                input_ids=batch.input_ids,
                attention_mask=batch.attention_mask,
                output_hidden_states=True,
            )
            keep = content_mask(lm, batch.input_ids, batch.attention_mask)
            if skip_first:
                first = keep.long().cumsum(1) == 1
                keep &= ~first
            empty = (keep.sum(1) == 0).nonzero().flatten().tolist()
            if empty:
                why = "only special tokens" + (" or one token (skip_first)" if skip_first else "")
                raise LMError(f"{lang} text {start + empty[0]} has no token to pool ({why})")
            mask = keep[..., None].float()
            chunks.append([((h.float() * mask).sum(1) / mask.sum(1)) for h in out.hidden_states])
        pooled[lang] = [torch.cat(per_layer) for per_layer in zip(*chunks, strict=True)]
        if center:
            if len(ids) < 2:
                raise LMError("center=True needs at least 2 parallel items")
            pooled[lang] = [v - v.mean(0, keepdim=True) for v in pooled[lang]]
    langs = list(parallel)
    pairs = [(a, b) for i, a in enumerate(langs) for b in langs[i + 1 :]]
    cos = [
        np.mean(
            [
                float(torch.cosine_similarity(pooled[a][layer], pooled[b][layer], -1).mean())
                for a, b in pairs
            ]
        )
        for layer in range(len(pooled[langs[0]]))
    ]
    return np.array(cos)
