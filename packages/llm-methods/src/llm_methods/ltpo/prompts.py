"""LTPO prompts: the thought prompt (upstream ``ltpo.build_inputs``) and the CoT prompt.

Thought prompt: one user turn that poses the problem, says that K special tokens carrying
compressed latent reasoning follow (use them if useful, else ignore them), and ends with the K
placeholders; then the end of the user turn and the assistant header (upstream appends the
generation prompt after the turn). The wording is ours (upstream's is not copied); the
structure and the placement of the thoughts are upstream's. It is split into token ids
``prefix`` (before the thoughts) and ``suffix`` (after them): H goes in between as embeddings.

CoT prompt (upstream's zero-shot CoT baseline, ``prompts.py`` idx 0): the instruction as the
system message, the question as the user turn, then the assistant header.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_methods.lm.errors import LMError

if TYPE_CHECKING:
    from llm_methods.lm.loading import LM

__all__ = [
    "INSTRUCTION",
    "THOUGHT_TOKEN_CANDIDATES",
    "ThoughtPrompt",
    "prompt_ids",
    "thought_prompt",
    "thought_token_id",
    "thought_token_ids",
]

# Llama: reserved special tokens (upstream uses <|reserved_special_token_i|>, i < K); Qwen and
# SmolLM2: <|endoftext|> (upstream's Qwen choice; in SmolLM2 chat text it never occurs, turns use
# <|im_start|>/<|im_end|>); Mistral: <unk> (upstream); else EOS.
THOUGHT_TOKEN_CANDIDATES = ("<|reserved_special_token_0|>", "<|endoftext|>", "<unk>")
INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
THOUGHT_TEMPLATE = (
    "Solve the following math problem step by step, and put your final answer within "
    "\\boxed{{}}.\n\nPROBLEM: {question}\n\nBelow are {k} special tokens that carry compressed "
    "latent reasoning about this problem. If they help, use them as a reference; if they do not, "
    "ignore them and solve the problem yourself.\n\nThe {k} special tokens: {thoughts}"
)
_MARKER = "\u2063LTPO-THOUGHTS\u2063"


@dataclass(frozen=True)
class ThoughtPrompt:
    """Token ids around the K thoughts: ``prefix · H · suffix``."""

    prefix: list[int]
    suffix: list[int]


def thought_token_id(tokenizer: Any) -> int:
    """The placeholder id: the first of :data:`THOUGHT_TOKEN_CANDIDATES` in the vocabulary,
    else the EOS token."""
    vocab = tokenizer.get_vocab()
    for name in THOUGHT_TOKEN_CANDIDATES:
        if name in vocab:
            return int(vocab[name])
    if tokenizer.eos_token_id is None:
        raise LMError("tokenizer has no placeholder candidate and no EOS token")
    return int(tokenizer.eos_token_id)


def thought_token_ids(tokenizer: Any, n_thoughts: int) -> list[int]:
    """The K placeholder ids: ``<|reserved_special_token_i|>``, i < K, when the vocabulary has
    them all (Llama, upstream), else :func:`thought_token_id` K times."""
    vocab = tokenizer.get_vocab()
    reserved = [vocab.get(f"<|reserved_special_token_{i}|>") for i in range(n_thoughts)]
    if all(r is not None for r in reserved):
        return [int(r) for r in reserved]  # type: ignore[arg-type]
    return [thought_token_id(tokenizer)] * n_thoughts


def _check_length(lm: LM, n: int, reserve: int) -> None:
    limit = getattr(lm.model.config, "max_position_embeddings", None)
    if limit is not None and n + reserve > limit:
        raise LMError(
            f"question prompt is {n} tokens (+{reserve} for thoughts and answer); "
            f"the model allows {limit}: shorten or segment it"
        )


def _check_question(question: str) -> str:
    if not question or not question.strip():
        raise LMError("question is empty")
    return question.strip()


def prompt_ids(
    lm: LM, question: str, instruction: str = INSTRUCTION, reserve: int = 0
) -> list[int]:
    """The CoT prompt as token ids (``instruction`` as the system message, the question as the
    user turn, the assistant header); ``reserve`` = answer tokens that must still fit."""
    from llm_methods.lm import chat_prompt

    text = chat_prompt(lm, _check_question(question), system=instruction or None)
    ids = list(lm.tokenizer(text, add_special_tokens=False).input_ids)
    _check_length(lm, len(ids), reserve)
    return ids


def thought_prompt(lm: LM, question: str, n_thoughts: int, reserve: int = 0) -> ThoughtPrompt:
    """The thought prompt split around the K thoughts (see the module docstring);
    ``reserve`` = answer tokens that must still fit after it."""
    from llm_methods.lm import chat_prompt

    if n_thoughts < 1:
        raise LMError(f"n_thoughts (K) must be >= 1, got {n_thoughts}")
    user = THOUGHT_TEMPLATE.format(
        question=_check_question(question), k=n_thoughts, thoughts=_MARKER
    )
    text = chat_prompt(lm, user)
    if text.count(_MARKER) != 1:
        raise LMError("the chat template does not keep the user text verbatim")
    head, tail = text.split(_MARKER)
    tok = lm.tokenizer
    prompt = ThoughtPrompt(
        list(tok(head, add_special_tokens=False).input_ids),
        list(tok(tail, add_special_tokens=False).input_ids) if tail else [],
    )
    _check_length(lm, len(prompt.prefix) + n_thoughts + len(prompt.suffix), reserve)
    return prompt
