"""LLM pieces of BED-LLM: answer likelihoods p(y | θ, x) from the next-token distribution, and
the prompt-only / CoT questioners (paper Sec. 3-5).

``answer_probs(lm, hypotheses, questions)`` builds the N x M prompts about hypothesis θ_n and
question x_m, runs them in batched forwards and reads the next-token distribution at the answer
position: p(option) = sum of the probabilities of the option's token variants ("Yes"/"yes"/
" Yes"), normalised over the options. Prompt styles (:func:`answer_prompts`): ``style="qa"``
(the default) is ``Question: Is a dog a mammal?\nAnswer:`` with θ substituted into the
question; ``style="chat"`` is the chat template with "the secret is θ" in the system turn
(:data:`ANSWER_SYSTEM`) and the question as the user turn. ``answer_probs_loop`` is the
one-prompt-per-forward reference (the benchmark's peer; a test asserts both agree).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from llm_methods.bed.game import Request
from llm_methods.lm import LM, chat_prompt, collate, generate

__all__ = [
    "ANSWER_SYSTEM",
    "OPTIONS",
    "LLMQuestioner",
    "answer_probs",
    "answer_probs_loop",
    "answer_prompts",
    "ask_about",
    "option_token_ids",
]

OPTIONS = {"yes": ("Yes", "yes", " Yes", " yes"), "no": ("No", "no", " No", " no")}
ANSWER_SYSTEM = (
    "You are playing 20 Questions. The secret {kind} is: {hypothesis}. "
    "Answer the user's question about it with Yes or No."
)


def option_token_ids(lm: LM, options: dict[str, Sequence[str]] = OPTIONS) -> list[list[int]]:
    """First-token ids of each option's variants (duplicates dropped)."""
    out = []
    for variants in options.values():
        ids = {lm.tokenizer(v, add_special_tokens=False).input_ids[0] for v in variants}
        out.append(sorted(ids))
    return out


def ask_about(question: str, hypothesis: str) -> str:
    """ "Is it a mammal?" about "dog" -> "Is a dog a mammal?" (the first " it" is replaced)."""
    article = "an" if hypothesis[:1].lower() in "aeiou" else "a"
    for pat in (" it ", " it?"):
        if pat in question:
            return question.replace(pat, f" {article} {hypothesis}{pat[3:]}", 1)
    return f"About {article} {hypothesis}: {question}"


def answer_prompts(
    lm: LM,
    hypotheses: Sequence[str],
    questions: Sequence[str],
    style: str = "qa",
    kind: str = "animal",
) -> list[str]:
    """N x M prompts, hypothesis-major (row n*M + m). ``style="qa"`` (default, 11 tokens):
    ``Question: Is a dog a mammal?\nAnswer:``; ``style="chat"``: the chat template with the
    hypothesis in the system turn (``ANSWER_SYSTEM``) and the question as the user turn."""
    if style == "qa":
        return [f"Question: {ask_about(q, h)}\nAnswer:" for h in hypotheses for q in questions]
    if style == "chat":
        return [
            chat_prompt(lm, q, system=ANSWER_SYSTEM.format(kind=kind, hypothesis=h))
            for h in hypotheses
            for q in questions
        ]
    raise ValueError(f"unknown prompt style {style!r}; choose qa or chat")


@torch.no_grad()
def _last_token_probs(lm: LM, prompts: Sequence[str], batch_size: int) -> torch.Tensor:
    """``[P, V]`` next-token distributions after each prompt (right-padded batches)."""
    out = []
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start : start + batch_size]
        ids = [lm.tokenizer(p, add_special_tokens=False).input_ids for p in chunk]
        batch = collate(ids, lm.tokenizer.pad_token_id, lm.device)
        logits = lm.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        rows = torch.arange(len(chunk), device=logits.device)
        last = logits[rows, batch.lengths.to(logits.device) - 1]
        out.append(torch.softmax(last.float(), -1).cpu())
    return torch.cat(out)


def _normalise(probs: torch.Tensor, option_ids: list[list[int]]) -> np.ndarray:
    mass = torch.stack([probs[:, ids].sum(-1) for ids in option_ids], -1)
    return (mass / mass.sum(-1, keepdim=True).clamp_min(1e-30)).numpy().astype(float)


def answer_probs(
    lm: LM,
    hypotheses: Sequence[str],
    questions: Sequence[str],
    batch_size: int = 64,
    style: str = "qa",
    kind: str = "animal",
) -> np.ndarray:
    """``[N, M, K]`` p(option | θ_n, x_m) from batched forwards over all N x M prompts."""
    prompts = answer_prompts(lm, hypotheses, questions, style, kind)
    probs = _normalise(_last_token_probs(lm, prompts, batch_size), option_token_ids(lm))
    return probs.reshape(len(hypotheses), len(questions), -1)


def answer_probs_loop(
    lm: LM,
    hypotheses: Sequence[str],
    questions: Sequence[str],
    style: str = "qa",
    kind: str = "animal",
) -> np.ndarray:
    """The same as :func:`answer_probs`, one forward per (θ, x) pair (reference / peer)."""
    return answer_probs(lm, hypotheses, questions, batch_size=1, style=style, kind=kind)


QUESTIONER_SYSTEM = "You pick the most informative question."
QUESTIONER_PROMPT = """We are playing 20 Questions: you must identify a secret {kind} by asking yes/no questions.
Answers so far:
{history}
Candidate next questions:
{candidates}
Which question should you ask next?{cot} Reply with its number."""


class LLMQuestioner:
    """Prompt-only (``mode="prompt"``: the next-token distribution over the candidate numbers,
    argmax) or CoT (``mode="cot"``: greedy reasoning of ``cot_tokens`` tokens first, then the
    same read-out) choice among the M candidates; batched over games (``__call__``)."""

    def __init__(
        self,
        lm: LM,
        questions: Sequence[str],
        mode: str = "prompt",
        kind: str = "animal",
        cot_tokens: int = 32,
        batch_size: int = 16,
    ) -> None:
        if mode not in ("prompt", "cot"):
            raise ValueError(f"unknown questioner mode {mode!r}; choose prompt or cot")
        self.lm, self.questions, self.mode, self.kind = lm, list(questions), mode, kind
        self.cot_tokens, self.batch_size = cot_tokens, batch_size
        self.digit_ids = [
            lm.tokenizer(str(i), add_special_tokens=False).input_ids[0] for i in range(1, 10)
        ]
        self.calls = 0

    def prompt(self, req: Request) -> str:
        hist = "\n".join(f"- {self.questions[q]} {'Yes' if a else 'No'}" for q, a in req.history)
        cands = "\n".join(f"{i + 1}. {self.questions[q]}" for i, q in enumerate(req.candidates))
        cot = " Think step by step in one or two sentences first." if self.mode == "cot" else ""
        text = QUESTIONER_PROMPT.format(
            kind=self.kind, history=hist or "(none yet)", candidates=cands, cot=cot
        )
        return chat_prompt(self.lm, text, system=QUESTIONER_SYSTEM)

    def __call__(self, requests: list[Request]) -> list[int]:
        if any(len(r.candidates) > 9 for r in requests):
            raise ValueError("the LLM questioner reads one digit: at most 9 candidates")
        prompts = [self.prompt(r) for r in requests]
        if self.mode == "cot":
            thoughts = generate(
                self.lm, prompts, max_new_tokens=self.cot_tokens, batch_size=self.batch_size
            )
            prompts = [
                p + t.strip() + "\nThe number of the best question is "
                for p, t in zip(prompts, thoughts, strict=True)
            ]
        probs = _last_token_probs(self.lm, prompts, self.batch_size)
        self.calls += len(requests)
        out = []
        for r, p in zip(requests, probs, strict=True):
            scores = p[self.digit_ids[: len(r.candidates)]]
            out.append(int(r.candidates[int(torch.argmax(scores))]))
        return out
