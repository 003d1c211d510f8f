"""LatentSeek-style baseline on LTPO's latent thoughts (policy gradient with a self-reward).

The same K placeholder thought embeddings H as LTPO are optimised, but by REINFORCE on the
model's own answer: generate y greedily from ``[prefix; H]``, score it with the model's yes/no
self-reward r = p(yes) / (p(yes) + p(no)), then step H ← H + lr · r · ‖H‖ · ĝ with
ĝ = ∇_H log π(y | prefix, H) / ‖∇‖, until r ≥ threshold or the iteration budget is spent.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from llm_methods.lm.loading import LM
from llm_methods.ltpo.optimize import BatchThoughtScorer, decode_rows, initial_thoughts

__all__ = ["SELF_REWARD", "latentseek", "latentseek_batch", "self_reward"]

SELF_REWARD = (
    "Question: {q}\nProposed solution: {a}\nIs the proposed final answer correct? Reply yes or no."
)


def self_reward(
    lm: LM, questions: Sequence[str], answers: Sequence[str], batch_size: int = 16
) -> torch.Tensor:
    """LatentSeek's self-reward: p(yes) / (p(yes) + p(no)) for the first answer token of the
    model judging its own solution [N]."""
    from llm_methods.lm import chat_prompt, last_token_logits

    tok = lm.tokenizer
    yes = tok("yes", add_special_tokens=False).input_ids[0]
    no = tok("no", add_special_tokens=False).input_ids[0]
    ids = [
        tok(
            chat_prompt(lm, SELF_REWARD.format(q=q, a=a.strip() or "(none)")),
            add_special_tokens=False,
        ).input_ids
        for q, a in zip(questions, answers, strict=True)
    ]
    last = last_token_logits(lm, ids, batch_size)
    return torch.sigmoid(last[:, yes] - last[:, no]).cpu()


def latentseek_batch(
    scorer: BatchThoughtScorer,
    questions: Sequence[str],
    n_thoughts: int = 8,
    iterations: int = 2,
    lr: float = 0.03,
    threshold: float = 0.9,
    max_new_tokens: int = 48,
    initial_answers: Sequence[str] | None = None,
    score_final: bool = True,
) -> tuple[list[str], list[float]]:
    """LatentSeek on the questions of one :class:`BatchThoughtScorer` (whose prefix cache the
    decoding and the gradients reuse); returns the final answers and self-rewards.
    ``score_final=False``: the answers of the last iteration are not self-rewarded (their
    rewards are NaN), for a caller that reads the answers only; every other step, and so every
    answer, is the same."""
    lm = scorer.lm
    H = initial_thoughts(lm, scorer.B, n_thoughts).clone()  # [B, K, d]
    answers = (
        list(initial_answers)
        if initial_answers is not None
        else decode_rows(scorer, H, max_new_tokens)
    )
    rewards = self_reward(lm, questions, answers, scorer.B)
    for it in range(iterations):
        todo = [i for i in range(scorer.B) if rewards[i] < threshold]
        if not todo:
            break
        ys = [lm.tokenizer(a, add_special_tokens=False).input_ids or [0] for a in answers]
        grads = scorer.continuation_grads(H, ys)
        for i in todo:
            g = grads[i]
            scale = H[i].norm(dim=-1, keepdim=True).mean()
            H[i] = H[i] + lr * float(rewards[i]) * scale * g / g.norm().clamp_min(1e-12)
        new = decode_rows(scorer, H, max_new_tokens)
        if not score_final and it == iterations - 1:  # no later threshold test reads them
            for i in todo:
                answers[i], rewards[i] = new[i], float("nan")
            break
        new_r = self_reward(lm, [questions[i] for i in todo], [new[i] for i in todo], scorer.B)
        for j, i in enumerate(todo):
            answers[i], rewards[i] = new[i], new_r[j]
    return answers, [float(r) for r in rewards]


def latentseek(
    lm: LM,
    questions: Sequence[str],
    prefixes: Sequence[Sequence[int]],
    n_thoughts: int = 8,
    iterations: int = 2,
    lr: float = 0.03,
    threshold: float = 0.9,
    max_new_tokens: int = 48,
    batch_size: int = 16,
    initial_answers: Sequence[str] | None = None,
    suffix: Sequence[int] = (),
) -> tuple[list[str], list[float]]:
    """:func:`latentseek_batch` over batches of ``batch_size`` questions ``prefix · H ·
    suffix``. ``initial_answers``: the decodes of the unoptimised placeholders (= CoT-Unk's),
    if known."""
    answers: list[str] = []
    rewards: list[float] = []
    for b in range(0, len(prefixes), batch_size):
        scorer = BatchThoughtScorer(lm, prefixes[b : b + batch_size], suffix=suffix)
        init = None if initial_answers is None else initial_answers[b : b + batch_size]
        a, r = latentseek_batch(
            scorer,
            questions[b : b + batch_size],
            n_thoughts,
            iterations,
            lr,
            threshold,
            max_new_tokens,
            init,
        )
        answers += a
        rewards += r
    return answers, rewards
