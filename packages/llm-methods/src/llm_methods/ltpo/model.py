"""LTPO: optimise K latent thought embeddings at test time with an intrinsic-confidence reward.

Prompt = chat-formatted question (token ids, length P) followed by K placeholder "thought"
tokens whose input embeddings H [K, d] are the only thing optimised; the LM stays frozen.

Reward (paper Eq. for the intrinsic confidence), over the K+1 positions t = s..s+K (s = the last
question token, then the K thought positions), each with next-token distribution p_t [V]:

    R(H) = 1/(K+1) · Σ_t  −(1/k) Σ_{j ∈ topk(p_t)} log(p_t(j) + 1e−10),   k = 10.

Zeroth-order update (the default, as upstream): ε ~ N(0, σ²I), R_i = R(H+ε),
H ← H + η · R_i · ε / σ², σ ← γσ (no baseline). An autograd path (Adam, maximise R) is also given.
The question prefix's KV cache is computed once; each reward recomputes only the K-token suffix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from llm_methods.lm.errors import LMError
from llm_methods.lm.loading import cache_kwargs

__all__ = [
    "EPS",
    "THOUGHT_TOKEN_CANDIDATES",
    "BatchThoughtScorer",
    "LTPOConfig",
    "ThoughtScorer",
    "confidence_reward",
    "decode_rows",
    "decode_with_thoughts",
    "ltpo_optimize",
    "ltpo_optimize_batch",
    "prompt_ids",
    "thought_token_id",
]

EPS = 1e-10
# Llama: a reserved special token (upstream); Qwen and SmolLM2: <|endoftext|> (upstream's Qwen
# choice; in SmolLM2 chat text it never occurs, turns use <|im_start|>/<|im_end|>); else <unk>,
# else EOS.
THOUGHT_TOKEN_CANDIDATES = ("<|reserved_special_token_0|>", "<|endoftext|>", "<unk>")
INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass
class LTPOConfig:
    """Defaults = upstream ``run_ltpo.sh`` (K=8, σ=4, γ=0.9, η=0.04, T=10, top-k 10)."""

    n_thoughts: int = 8
    sigma: float = 4.0
    sigma_decay: float = 0.9
    lr: float = 0.04
    steps: int = 10
    top_k: int = 10
    optimizer: str = "zo"  # "zo" (zeroth order, paper) or "adam" (autograd)
    best_post_update: bool = False  # True = upstream quirk: keep the post-update H as "best"
    use_cache: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        if self.n_thoughts < 1:
            raise LMError(f"n_thoughts (K) must be >= 1, got {self.n_thoughts}")
        if self.steps < 0:
            raise LMError(f"steps must be >= 0, got {self.steps}")
        if self.top_k < 1:
            raise LMError(f"top_k must be >= 1, got {self.top_k}")
        if self.sigma <= 0 and self.optimizer == "zo":
            raise LMError(f"sigma must be > 0, got {self.sigma}")
        if self.optimizer not in ("zo", "adam"):
            raise LMError(f"optimizer must be 'zo' or 'adam', got {self.optimizer!r}")


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


def prompt_ids(
    lm: Any, question: str, instruction: str = INSTRUCTION, reserve: int = 0
) -> list[int]:
    """Chat-formatted ``instruction + question`` as token ids (no thoughts); ``reserve`` = thought
    + answer tokens that must still fit in the model's context."""
    from llm_methods.lm import chat_prompt

    if not question or not question.strip():
        raise LMError("question is empty")
    text = chat_prompt(lm, f"{instruction}\n{question.strip()}")
    ids = lm.tokenizer(text, add_special_tokens=False).input_ids
    limit = getattr(lm.model.config, "max_position_embeddings", None)
    if limit is not None and len(ids) + reserve > limit:
        raise LMError(f"question prompt is {len(ids)} tokens (+{reserve} for thoughts and answer); "
                      f"the model allows {limit}: shorten or segment it")  # fmt: skip
    return list(ids)


def confidence_reward(logits: torch.Tensor, top_k: int = 10) -> torch.Tensor:
    """R from logits [..., K+1, V]: mean over positions of −mean_{top-k} log(p + 1e−10) [...]."""
    probs = logits.float().softmax(-1)
    top = probs.topk(min(top_k, probs.shape[-1]), dim=-1).values
    return (-(top + EPS).log().mean(-1)).mean(-1)


class ThoughtScorer:
    """R(H) for one question; caches the prefix's KV and its last-position logits."""

    def __init__(self, lm: Any, prefix: Sequence[int], top_k: int = 10) -> None:
        self.lm, self.top_k = lm, top_k
        self.embed = lm.model.get_input_embeddings()
        ids = torch.tensor([list(prefix)], device=lm.device)
        self.prefix_embeds = self.embed(ids).detach()  # [1, P, d]
        self.P = ids.shape[1]
        with torch.no_grad():
            out = lm.model(input_ids=ids, use_cache=True)
        self.cache = getattr(out, "cache", None) or out.past_key_values
        self.last_logits = out.logits[:, -1:].detach()  # [1, 1, V]: position s

    def reward(self, H: torch.Tensor) -> torch.Tensor:
        """Cached path: forward the K thought embeddings only. H [K, d] -> scalar."""
        out = self.lm.model(inputs_embeds=H[None].to(self.prefix_embeds.dtype), use_cache=True,
                            **cache_kwargs(self.lm.model, self.cache))  # fmt: skip
        self.cache.crop(self.P - self.cache.get_seq_length())  # drop the K suffix entries
        return confidence_reward(torch.cat([self.last_logits, out.logits], 1), self.top_k)[0]

    def reward_uncached(self, H: torch.Tensor) -> torch.Tensor:
        """Reference path: full forward over [prefix; H]."""
        embeds = torch.cat([self.prefix_embeds, H[None].to(self.prefix_embeds.dtype)], 1)
        logits = self.lm.model(inputs_embeds=embeds, use_cache=False).logits
        return confidence_reward(logits[:, self.P - 1 :], self.top_k)[0]


def ltpo_optimize(lm: Any, prefix: Sequence[int], cfg: LTPOConfig,
                  seed: int = 0) -> tuple[torch.Tensor, list[float]]:  # fmt: skip
    """Optimised thought embeddings [K, d] (the best-reward ones) and the reward trace."""
    cfg.validate()
    scorer = ThoughtScorer(lm, prefix, cfg.top_k)
    pid = thought_token_id(lm.tokenizer)
    H = scorer.embed(torch.full((cfg.n_thoughts,), pid, device=lm.device)).detach().float()
    score = scorer.reward if cfg.use_cache else scorer.reward_uncached
    with torch.no_grad():
        trace = [float(score(H))]
    # the best of the T evaluated candidates; the unperturbed start counts only when T = 0
    best_r, best_h = (trace[0] if cfg.steps == 0 else -float("inf")), H.clone()
    if cfg.optimizer == "adam":
        H = H.clone().requires_grad_(True)
        opt = torch.optim.Adam([H], lr=cfg.lr)
        for _ in range(cfg.steps):
            r = score(H)
            opt.zero_grad()
            (-r).backward()
            opt.step()
            with torch.no_grad():
                r_new = float(score(H))
            trace.append(r_new)
            if r_new > best_r:
                best_r, best_h = r_new, H.detach().clone()
        return best_h, trace
    gen = torch.Generator(device="cpu").manual_seed(seed)  # CPU: the same draws on every device
    sigma = cfg.sigma
    with torch.no_grad():
        for _ in range(cfg.steps):
            eps = (torch.randn(H.shape, generator=gen) * sigma).to(H.device)
            candidate = H + eps
            r = float(score(candidate))
            H = H + cfg.lr * r * eps / sigma**2
            sigma *= cfg.sigma_decay
            trace.append(r)
            if r > best_r:  # R was measured at H+ε; upstream stores the post-update H instead
                best_r, best_h = r, (H if cfg.best_post_update else candidate).clone()
    return best_h, trace


class BatchThoughtScorer:
    """B questions sharing one KV cache of their left-padded prefixes (explicit position ids, so
    each row equals :class:`ThoughtScorer` on its own question). Everything after the prefix —
    LTPO's K-token reward, greedy decoding with or without thoughts, LatentSeek's gradient — is
    run on top of the cache and cropped off again, so the prefix is encoded once per batch."""

    def __init__(self, lm: Any, prefixes: Sequence[Sequence[int]], top_k: int = 10) -> None:
        self.lm, self.top_k = lm, top_k
        self.embed = lm.model.get_input_embeddings()
        pieces = [self.embed(torch.tensor(list(p), device=lm.device)).detach() for p in prefixes]
        E, self.mask = _left_pad(pieces)
        self.lengths = self.mask.sum(1)  # [B]
        self.B, self.P = E.shape[:2]
        pos = (self.mask.cumsum(1) - 1).clamp_min(0)
        with torch.no_grad():
            out = lm.model(inputs_embeds=E, attention_mask=self.mask, position_ids=pos,
                           use_cache=True)  # fmt: skip
        self.cache = getattr(out, "cache", None) or out.past_key_values
        self.last_logits = out.logits[:, -1:].detach()  # [B, 1, V]

    def _extend(
        self, embeds: torch.Tensor, mask: torch.Tensor, start: torch.Tensor
    ) -> torch.Tensor:
        """Forward ``embeds`` [B, S, d] after what the cache holds (``mask`` [B, P+done+S],
        first positions ``start`` [B]); returns logits [B, S, V]. The cache keeps the new
        entries until :meth:`_reset`."""
        pos = start[:, None] + torch.arange(embeds.shape[1], device=embeds.device)[None]
        out = self.lm.model(inputs_embeds=embeds.to(self.last_logits.dtype), attention_mask=mask,
                            position_ids=pos, use_cache=True,
                            **cache_kwargs(self.lm.model, self.cache))  # fmt: skip
        return out.logits

    def _reset(self) -> None:
        """Drop every cache entry after the prefix."""
        extra = self.cache.get_seq_length() - self.P
        if extra > 0:
            self.cache.crop(-extra)

    def reward(self, H: torch.Tensor) -> torch.Tensor:
        """H [B, K, d] -> rewards [B]."""
        B, K = H.shape[:2]
        mask = torch.cat([self.mask, self.mask.new_ones(B, K)], 1)
        try:
            logits = self._extend(H, mask, self.lengths)
        finally:
            self._reset()
        return confidence_reward(torch.cat([self.last_logits, logits], 1), self.top_k)

    @torch.no_grad()
    def greedy(self, H: torch.Tensor | None, max_new_tokens: int) -> list[list[int]]:
        """Greedy continuations of ``[prefix; H]`` (``H`` [B, K, d], or None for the prefix
        alone) until EOS or ``max_new_tokens``; token ids per row, EOS included. Same tokens as
        ``generate(do_sample=False)`` on the left-padded batch."""
        eos = self.lm.model.generation_config.eos_token_id
        if eos is None:
            eos = self.lm.tokenizer.eos_token_id
        eos_ids = torch.tensor(eos if isinstance(eos, list) else [eos], device=self.mask.device)
        mask, nxt_pos, logits = self.mask, self.lengths.clone(), self.last_logits[:, -1]
        rows: list[list[int]] = [[] for _ in range(self.B)]
        done = torch.zeros(self.B, dtype=torch.bool, device=mask.device)
        try:
            if H is not None:
                mask = torch.cat([mask, mask.new_ones(self.B, H.shape[1])], 1)
                logits = self._extend(H, mask, nxt_pos)[:, -1]
                nxt_pos = nxt_pos + H.shape[1]
            for step in range(max_new_tokens):
                token = logits.argmax(-1)
                for i in torch.nonzero(~done).flatten().tolist():
                    rows[i].append(int(token[i]))
                done |= torch.isin(token, eos_ids)
                if bool(done.all()) or step == max_new_tokens - 1:
                    break
                mask = torch.cat([mask, mask.new_ones(self.B, 1)], 1)
                logits = self._extend(self.embed(token[:, None]), mask, nxt_pos)[:, -1]
                nxt_pos = nxt_pos + 1
        finally:
            self._reset()
        return rows

    def continuation_grads(self, H: torch.Tensor, ys: Sequence[Sequence[int]]) -> torch.Tensor:
        """∇_H Σ_rows log π(y_i | prefix_i, H_i) [B, K, d] (rows are independent, so each row's
        block is its own gradient). Only the [H; y] suffix is forwarded and backpropagated."""
        B, K = H.shape[:2]
        leaves = H.detach().clone().requires_grad_(True)
        Ly = max(len(y) for y in ys)
        ids = torch.zeros(B, Ly, dtype=torch.long, device=H.device)
        ymask = torch.zeros(B, Ly, dtype=self.mask.dtype, device=H.device)
        for i, y in enumerate(ys):
            ids[i, : len(y)] = torch.tensor(list(y), device=H.device)
            ymask[i, : len(y)] = 1
        suffix = torch.cat([leaves.to(self.last_logits.dtype), self.embed(ids).detach()], 1)
        mask = torch.cat([self.mask, self.mask.new_ones(B, K), ymask], 1)
        try:
            logits = self._extend(suffix, mask, self.lengths)[:, K - 1 : K - 1 + Ly]
            logp = logits.float().log_softmax(-1).gather(2, ids[..., None])[..., 0]
            total = (logp * ymask).sum()
            (grad,) = torch.autograd.grad(total, leaves)
        finally:
            self._reset()
        return grad


@torch.no_grad()
def ltpo_optimize_batch(lm: Any, prefixes: Sequence[Sequence[int]], cfg: LTPOConfig,
                        seeds: Sequence[int], scorer: BatchThoughtScorer | None = None,
                        ) -> tuple[list[torch.Tensor], list[list[float]]]:  # fmt: skip
    """Zeroth-order LTPO for B questions in one batch (row i uses ``seeds[i]``; identical
    per-row maths to :func:`ltpo_optimize` with ``optimizer="zo"``). ``scorer``: an existing
    :class:`BatchThoughtScorer` of exactly these prefixes (its cache is reused)."""
    cfg.validate()
    if cfg.optimizer != "zo":
        out = [ltpo_optimize(lm, p, cfg, s) for p, s in zip(prefixes, seeds, strict=True)]
        return [h for h, _ in out], [t for _, t in out]
    if scorer is None or scorer.top_k != cfg.top_k:
        scorer = BatchThoughtScorer(lm, prefixes, cfg.top_k)
    pid = thought_token_id(lm.tokenizer)
    B = len(prefixes)
    H = scorer.embed(torch.full((B, cfg.n_thoughts), pid, device=lm.device)).detach().float()
    start = scorer.reward(H).float()
    best_r = start if cfg.steps == 0 else torch.full_like(start, -float("inf"))
    best_h = H.clone()
    traces = [[float(r)] for r in start]
    gens = [torch.Generator(device="cpu").manual_seed(int(s)) for s in seeds]  # as above: CPU
    sigma = cfg.sigma
    for _ in range(cfg.steps):
        eps = torch.stack([torch.randn(H.shape[1:], generator=g) for g in gens]).to(H.device)
        eps = eps * sigma
        candidate = H + eps
        r = scorer.reward(candidate).float()
        H = H + cfg.lr * r[:, None, None] * eps / sigma**2
        sigma *= cfg.sigma_decay
        better = r > best_r
        keep = H if cfg.best_post_update else candidate
        best_h[better] = keep[better]
        best_r = torch.where(better, r, best_r)
        for i in range(B):
            traces[i].append(float(r[i]))
    return list(best_h), traces


def _left_pad(embeds: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """[L_i, d] pieces -> left-padded [B, L, d] embeddings and attention mask [B, L]."""
    L = max(e.shape[0] for e in embeds)
    d = embeds[0].shape[1]
    out = embeds[0].new_zeros(len(embeds), L, d)
    mask = torch.zeros(len(embeds), L, dtype=torch.long, device=embeds[0].device)
    for i, e in enumerate(embeds):
        out[i, L - e.shape[0] :] = e
        mask[i, L - e.shape[0] :] = 1
    return out, mask


def decode_with_thoughts(lm: Any, prefixes: Sequence[Sequence[int]],
                         thoughts: Sequence[torch.Tensor | None], max_new_tokens: int = 48,
                         batch_size: int = 16) -> list[str]:  # fmt: skip
    """Greedy answers from ``[prefix; H]`` input embeddings (``H=None``: prefix only), in
    batches of prefixes that share one KV cache (rows with and without thoughts are decoded as
    two groups)."""
    texts: list[str | None] = [None] * len(prefixes)
    for start in range(0, len(prefixes), batch_size):
        idx = range(start, min(start + batch_size, len(prefixes)))
        for group in ([i for i in idx if thoughts[i] is None],
                      [i for i in idx if thoughts[i] is not None]):  # fmt: skip
            if not group:
                continue
            scorer = BatchThoughtScorer(lm, [prefixes[i] for i in group])
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
