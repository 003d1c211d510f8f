"""LTPO: optimise K latent thought embeddings at test time with an intrinsic-confidence reward.

Prompt (upstream ``ltpo.build_inputs``, :mod:`llm_methods.ltpo.prompts`): one chat user turn
that states the problem, says K special tokens of latent reasoning follow, and ends with the K
placeholder tokens; then the end of the user turn and the assistant header. The placeholders'
input embeddings H [K, d] are the only thing optimised; the LM stays frozen. In ids:
``prefix`` (chat text before the thoughts) · H · ``suffix`` (end of turn + assistant header).

Reward (paper's intrinsic confidence; upstream ``get_confidence``), over the K + 1 positions
t = first thought .. first suffix token (every one of them depends on H), each with next-token
distribution p_t [V]:

    R(H) = 1/(K+1) · Σ_t  −(1/k) Σ_{j ∈ topk(p_t)} log(p_t(j) + 1e−10),   k = 10.

Zeroth-order update (upstream, no baseline): ε ~ N(0, σ²I), R_i = R(H+ε),
H ← H + η · R_i · ε / σ², σ ← γσ; the kept thoughts are the *updated* H of the step whose R_i
was the best (upstream ``best_thought_hidden_states``; ``best_post_update=False`` keeps the
evaluated H+ε instead). ``embedding_units=True`` reads σ and η in units of the model's
embedding scale s (mean embedding-row norm / √d): σ·s and η·s², which makes the run
scale-equivariant (the same trajectory in units of s on any model). An autograd path (Adam,
maximise R) is also given. The prefix's KV cache is computed once; each reward forwards only
[H; first suffix token].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from llm_methods.lm.errors import LMError
from llm_methods.lm.loading import LM
from llm_methods.ltpo.prompts import (
    INSTRUCTION,
    THOUGHT_TOKEN_CANDIDATES,
    ThoughtPrompt,
    prompt_ids,
    thought_prompt,
    thought_token_id,
    thought_token_ids,
)
from llm_methods.ltpo.scorer import EPS, BatchThoughtScorer, ThoughtScorer, confidence_reward

__all__ = [
    "EPS",
    "INSTRUCTION",
    "OPTIMIZERS",
    "THOUGHT_TOKEN_CANDIDATES",
    "BatchThoughtScorer",
    "LTPOConfig",
    "ThoughtPrompt",
    "ThoughtScorer",
    "confidence_reward",
    "decode_rows",
    "decode_with_thoughts",
    "embedding_scale",
    "initial_thoughts",
    "ltpo_optimize",
    "ltpo_optimize_batch",
    "prompt_ids",
    "thought_prompt",
    "thought_token_id",
    "thought_token_ids",
]

OPTIMIZERS = ("zo", "adam")


@dataclass
class LTPOConfig:
    """LTPO's optimiser settings (the ``ltpo:`` group of a config). Defaults = upstream
    ``run_ltpo.sh`` (K=8, σ=4, γ=0.9, η=0.04, T=10, top-k 10) and its best tracking (the
    post-update H of the best step). Checked on construction (one-line ``LMError``, a
    ``ValueError``, naming the field)."""

    n_thoughts: int = 8  # K, latent thought tokens optimised
    sigma: float = 4.0  # σ, standard deviation of the zeroth-order perturbation ε
    sigma_decay: float = 0.9  # γ, σ ← γσ after each step
    lr: float = 0.04  # η, step size (Adam's learning rate for optimizer "adam")
    steps: int = 10  # T, optimisation steps (0: the placeholders as they are, CoT-Unk)
    top_k: int = 10  # k of the confidence reward (top-k log-probabilities per position)
    optimizer: Literal["zo", "adam"] = "zo"  # "zo" (zeroth order, paper) or "adam" (autograd)
    best_post_update: bool = True  # False: keep the evaluated candidate H+ε of the best step
    embedding_units: bool = False  # True: σ·s and η·s², s = embedding_scale(lm)

    def __post_init__(self) -> None:
        if self.n_thoughts < 1:
            raise LMError(f"n_thoughts (K) must be >= 1, got {self.n_thoughts}")
        if self.steps < 0:
            raise LMError(f"steps must be >= 0, got {self.steps}")
        if self.top_k < 1:
            raise LMError(f"top_k must be >= 1, got {self.top_k}")
        if self.optimizer not in OPTIMIZERS:
            raise LMError(f"optimizer must be 'zo' or 'adam', got {self.optimizer!r}")
        if self.sigma <= 0 and self.optimizer == "zo":
            raise LMError(f"sigma must be > 0, got {self.sigma}")

    def scaled(self, scale: float) -> tuple[float, float]:
        """(σ, η) in absolute units for an embedding scale ``scale``."""
        if not self.embedding_units:
            return self.sigma, self.lr
        return self.sigma * scale, self.lr * scale**2


@torch.no_grad()
def embedding_scale(lm: LM) -> float:
    """s = mean over vocabulary rows of ‖e_v‖ / √d: the per-coordinate scale of the input
    embeddings (SmolLM2-135M: rows of norm ≈ 3.2 at d = 576, s ≈ 0.13)."""
    weight = lm.model.get_input_embeddings().weight
    return float(weight.float().norm(dim=-1).mean() / weight.shape[-1] ** 0.5)


def initial_thoughts(lm: LM, batch: int, n_thoughts: int) -> torch.Tensor:
    """The placeholders' input embeddings ``[batch, K, d]`` (float32): upstream's H₀."""
    ids = torch.tensor(thought_token_ids(lm.tokenizer, n_thoughts), device=lm.device)
    return lm.model.get_input_embeddings()(ids).detach().float()[None].expand(batch, -1, -1)


def ltpo_optimize(
    lm: LM,
    prefix: Sequence[int],
    cfg: LTPOConfig,
    seed: int = 0,
    suffix: Sequence[int] = (),
    init: torch.Tensor | None = None,
) -> tuple[torch.Tensor, list[float]]:
    """Optimised thought embeddings [K, d] and the reward trace (the start's R, then R_i of each
    evaluated candidate) for one question ``prefix · H · suffix``. ``init``: H₀ [K, d]
    (default: the placeholders' embeddings)."""
    if cfg.optimizer == "zo":
        hs, traces = ltpo_optimize_batch(
            lm, [prefix], cfg, [seed], suffix=suffix, init=None if init is None else init[None]
        )
        return hs[0], traces[0]
    scorer = BatchThoughtScorer(lm, [prefix], cfg.top_k, suffix)
    H = (initial_thoughts(lm, 1, cfg.n_thoughts) if init is None else init[None].float()).clone()
    with torch.no_grad():
        trace = [float(scorer.reward(H)[0])]
    best_r, best_h = (trace[0] if cfg.steps == 0 else -float("inf")), H[0].clone()
    H.requires_grad_(True)
    opt = torch.optim.Adam([H], lr=cfg.scaled(embedding_scale(lm))[1])
    for _ in range(cfg.steps):
        r = scorer.reward(H)[0]
        opt.zero_grad()
        (-r).backward()
        opt.step()
        with torch.no_grad():
            r_new = float(scorer.reward(H)[0])
        trace.append(r_new)
        if r_new > best_r:
            best_r, best_h = r_new, H[0].detach().clone()
    return best_h, trace


@torch.no_grad()
def ltpo_optimize_batch(
    lm: LM,
    prefixes: Sequence[Sequence[int]],
    cfg: LTPOConfig,
    seeds: Sequence[int],
    scorer: BatchThoughtScorer | None = None,
    suffix: Sequence[int] = (),
    init: torch.Tensor | None = None,
) -> tuple[list[torch.Tensor], list[list[float]]]:
    """Zeroth-order LTPO for B questions in one batch; row i draws its ε from a CPU generator
    seeded ``seeds[i]`` (the stream upstream's ``torch.normal`` draws after
    ``torch.manual_seed(seeds[i])``). ``scorer``: an existing :class:`BatchThoughtScorer` of
    exactly these prefixes (its cache and suffix are reused)."""
    if cfg.optimizer != "zo":  # autograd, one question at a time (this function is no_grad)
        with torch.enable_grad():
            out = [
                ltpo_optimize(lm, p, cfg, s, suffix) for p, s in zip(prefixes, seeds, strict=True)
            ]
        return [h for h, _ in out], [t for _, t in out]
    if scorer is None or scorer.top_k != cfg.top_k:
        scorer = BatchThoughtScorer(
            lm, prefixes, cfg.top_k, suffix if scorer is None else scorer.suffix
        )
    B = len(prefixes)
    H = (initial_thoughts(lm, B, cfg.n_thoughts) if init is None else init.float()).clone()
    start = scorer.reward(H).float()
    best_r = start if cfg.steps == 0 else torch.full_like(start, -float("inf"))
    best_h = H.clone()
    traces = [[float(r)] for r in start]
    gens = [torch.Generator(device="cpu").manual_seed(int(s)) for s in seeds]  # as upstream: CPU
    sigma, lr = cfg.scaled(embedding_scale(lm))
    for _ in range(cfg.steps):
        eps = torch.stack([torch.randn(H.shape[1:], generator=g) for g in gens]).to(H.device)
        eps = eps * sigma
        candidate = H + eps
        r = scorer.reward(candidate).float()
        H = H + lr * r[:, None, None] * eps / sigma**2
        sigma *= cfg.sigma_decay
        better = r > best_r
        keep = H if cfg.best_post_update else candidate
        best_h[better] = keep[better]
        best_r = torch.where(better, r, best_r)
        for i in range(B):
            traces[i].append(float(r[i]))
    return list(best_h), traces


def decode_with_thoughts(
    lm: LM,
    prefixes: Sequence[Sequence[int]],
    thoughts: Sequence[torch.Tensor | None],
    max_new_tokens: int = 48,
    batch_size: int = 16,
    suffix: Sequence[int] = (),
) -> list[str]:
    """Greedy answers from ``prefix · H · suffix`` (``H=None``: ``prefix · suffix``), in
    batches of prefixes that share one KV cache (rows with and without thoughts are decoded as
    two groups)."""
    texts: list[str | None] = [None] * len(prefixes)
    for start in range(0, len(prefixes), batch_size):
        idx = range(start, min(start + batch_size, len(prefixes)))
        for group in (
            [i for i in idx if thoughts[i] is None],
            [i for i in idx if thoughts[i] is not None],
        ):
            if not group:
                continue
            scorer = BatchThoughtScorer(lm, [prefixes[i] for i in group], suffix=suffix)
            H = None if thoughts[group[0]] is None else torch.stack([thoughts[i] for i in group])
            for i, out in zip(group, decode_rows(scorer, H, max_new_tokens), strict=True):
                texts[i] = out
    return [t or "" for t in texts]


def decode_rows(
    scorer: BatchThoughtScorer, H: torch.Tensor | None, max_new_tokens: int
) -> list[str]:
    """Greedy answer texts of the scorer's rows with thoughts ``H`` [B, K, d] (or none)."""
    rows = scorer.greedy(H, max_new_tokens)
    return scorer.lm.tokenizer.batch_decode(rows, skip_special_tokens=True)
