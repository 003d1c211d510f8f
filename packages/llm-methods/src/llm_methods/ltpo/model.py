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

__all__ = [
    "EPS",
    "THOUGHT_TOKEN_CANDIDATES",
    "BatchThoughtScorer",
    "LTPOConfig",
    "ThoughtScorer",
    "confidence_reward",
    "decode_with_thoughts",
    "latentseek",
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
        out = self.lm.model(inputs_embeds=H[None].to(self.prefix_embeds.dtype),
                            cache=self.cache, use_cache=True)  # fmt: skip
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
    gen = torch.Generator(device="cpu").manual_seed(seed)
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
    """R(H) for B questions at once: left-padded prefixes, one shared KV cache, explicit
    position ids, so each row equals :class:`ThoughtScorer` on its own question."""

    def __init__(self, lm: Any, prefixes: Sequence[Sequence[int]], top_k: int = 10) -> None:
        self.lm, self.top_k = lm, top_k
        self.embed = lm.model.get_input_embeddings()
        pieces = [self.embed(torch.tensor(list(p), device=lm.device)).detach() for p in prefixes]
        E, self.mask = _left_pad(pieces)
        self.lengths = self.mask.sum(1)  # [B]
        self.P = E.shape[1]
        pos = (self.mask.cumsum(1) - 1).clamp_min(0)
        with torch.no_grad():
            out = lm.model(inputs_embeds=E, attention_mask=self.mask, position_ids=pos,
                           use_cache=True)  # fmt: skip
        self.cache = getattr(out, "cache", None) or out.past_key_values
        self.last_logits = out.logits[:, -1:].detach()  # [B, 1, V]

    def reward(self, H: torch.Tensor) -> torch.Tensor:
        """H [B, K, d] -> rewards [B]."""
        B, K = H.shape[:2]
        mask = torch.cat([self.mask, self.mask.new_ones(B, K)], 1)
        pos = self.lengths[:, None] + torch.arange(K, device=H.device)[None]
        out = self.lm.model(inputs_embeds=H.to(self.last_logits.dtype), attention_mask=mask,
                            position_ids=pos, cache=self.cache, use_cache=True)  # fmt: skip
        self.cache.crop(self.P - self.cache.get_seq_length())
        return confidence_reward(torch.cat([self.last_logits, out.logits], 1), self.top_k)


@torch.no_grad()
def ltpo_optimize_batch(lm: Any, prefixes: Sequence[Sequence[int]], cfg: LTPOConfig,
                        seeds: Sequence[int]) -> tuple[list[torch.Tensor], list[list[float]]]:  # fmt: skip
    """Zeroth-order LTPO for B questions in one batch (row i uses ``seeds[i]``; identical
    per-row maths to :func:`ltpo_optimize` with ``optimizer="zo"``)."""
    cfg.validate()
    if cfg.optimizer != "zo":
        out = [ltpo_optimize(lm, p, cfg, s) for p, s in zip(prefixes, seeds, strict=True)]
        return [h for h, _ in out], [t for _, t in out]
    scorer = BatchThoughtScorer(lm, prefixes, cfg.top_k)
    pid = thought_token_id(lm.tokenizer)
    B = len(prefixes)
    H = scorer.embed(torch.full((B, cfg.n_thoughts), pid, device=lm.device)).detach().float()
    start = scorer.reward(H).float()
    best_r = start if cfg.steps == 0 else torch.full_like(start, -float("inf"))
    best_h = H.clone()
    traces = [[float(r)] for r in start]
    gens = [torch.Generator(device="cpu").manual_seed(int(s)) for s in seeds]
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


@torch.no_grad()
def decode_with_thoughts(lm: Any, prefixes: Sequence[Sequence[int]],
                         thoughts: Sequence[torch.Tensor | None], max_new_tokens: int = 48,
                         batch_size: int = 16) -> list[str]:  # fmt: skip
    """Greedy answers from ``[prefix; H]`` input embeddings (``H=None``: prefix only)."""
    embed = lm.model.get_input_embeddings()
    tok = lm.tokenizer
    texts: list[str] = []
    for start in range(0, len(prefixes), batch_size):
        pieces = []
        for ids, H in zip(prefixes[start : start + batch_size],
                          thoughts[start : start + batch_size], strict=True):  # fmt: skip
            e = embed(torch.tensor(list(ids), device=lm.device))
            pieces.append(e if H is None else torch.cat([e, H.to(e.dtype)], 0))
        E, M = _left_pad(pieces)
        out = lm.model.generate(inputs_embeds=E, attention_mask=M, max_new_tokens=max_new_tokens,
                                do_sample=False, temperature=None, top_p=None, top_k=None,
                                pad_token_id=tok.pad_token_id)  # fmt: skip
        texts += tok.batch_decode(out, skip_special_tokens=True)
    return texts


SELF_REWARD = ("Question: {q}\nProposed solution: {a}\nIs the proposed final answer correct? "
               "Reply yes or no.")  # fmt: skip


@torch.no_grad()
def self_reward(lm: Any, questions: Sequence[str], answers: Sequence[str],
                batch_size: int = 16) -> torch.Tensor:  # fmt: skip
    """LatentSeek's self-reward: p(yes) / (p(yes) + p(no)) for the first answer token of the
    model judging its own solution [N]."""
    from llm_methods.lm import chat_prompt, collate

    tok = lm.tokenizer
    yes = tok("yes", add_special_tokens=False).input_ids[0]
    no = tok("no", add_special_tokens=False).input_ids[0]
    ids = [tok(chat_prompt(lm, SELF_REWARD.format(q=q, a=a.strip() or "(none)")),
               add_special_tokens=False).input_ids
           for q, a in zip(questions, answers, strict=True)]  # fmt: skip
    out = []
    for b in range(0, len(ids), batch_size):
        batch = collate(ids[b : b + batch_size], tok.pad_token_id, lm.device)
        logits = lm.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        last = logits[torch.arange(len(batch.lengths)), batch.lengths - 1].float()
        out.append(torch.sigmoid(last[:, yes] - last[:, no]))
    return torch.cat(out).cpu()


def _reinforce_grads(lm: Any, prefixes: list[list[int]], H: list[torch.Tensor],
                     answers: list[list[int]]) -> list[torch.Tensor]:  # fmt: skip
    """∇_H log π(y | prefix, H) for each row, one right-padded batched forward/backward."""
    embed = lm.model.get_input_embeddings()
    leaves = [h.clone().requires_grad_(True) for h in H]
    rows = []
    for p, h, y in zip(prefixes, leaves, answers, strict=True):
        e = embed(torch.tensor(p, device=lm.device)).detach()
        ey = embed(torch.tensor(y, device=lm.device)).detach()
        rows.append(torch.cat([e, h.to(e.dtype), ey], 0))
    L = max(r.shape[0] for r in rows)
    E = torch.stack([torch.cat([r, r.new_zeros(L - r.shape[0], r.shape[1])]) for r in rows])
    mask = torch.zeros(len(rows), L, dtype=torch.long, device=lm.device)
    for i, r in enumerate(rows):
        mask[i, : r.shape[0]] = 1
    logp = lm.model(inputs_embeds=E, attention_mask=mask).logits.float().log_softmax(-1)
    total = logp.new_zeros(())
    for i, (p, h, y) in enumerate(zip(prefixes, leaves, answers, strict=True)):
        start = len(p) + h.shape[0] - 1
        target = torch.tensor(y, device=lm.device)[:, None]
        total = total + logp[i, start : start + len(y)].gather(1, target).sum()
    return list(torch.autograd.grad(total, leaves))


def latentseek(lm: Any, questions: Sequence[str], prefixes: Sequence[Sequence[int]],
               n_thoughts: int = 8, iterations: int = 2, lr: float = 0.03,
               threshold: float = 0.9, max_new_tokens: int = 48,
               batch_size: int = 16,
               initial_answers: Sequence[str] | None = None) -> tuple[list[str], list[float]]:  # fmt: skip
    """LatentSeek-style baseline on the same K latent thoughts: generate, self-reward r, then
    REINFORCE H ← H + lr·r·‖H‖·ĝ with ĝ = ∇_H log π(y | prefix, H) / ‖∇‖, until r ≥
    ``threshold`` or ``iterations``; returns final answers and self-rewards.
    ``initial_answers``: the decodes of the unoptimised placeholders (= CoT-Unk's), if known."""
    embed = lm.model.get_input_embeddings()
    pid = thought_token_id(lm.tokenizer)
    H = [embed(torch.full((n_thoughts,), pid, device=lm.device)).detach().float()
         for _ in prefixes]  # fmt: skip
    if initial_answers is None:
        answers = decode_with_thoughts(lm, prefixes, H, max_new_tokens, batch_size)
    else:
        answers = list(initial_answers)
    rewards = self_reward(lm, questions, answers, batch_size)
    for _ in range(iterations):
        todo = [i for i in range(len(prefixes)) if rewards[i] < threshold]
        if not todo:
            break
        for b in range(0, len(todo), batch_size):
            rows = todo[b : b + batch_size]
            ys = [lm.tokenizer(answers[i], add_special_tokens=False).input_ids or [0] for i in rows]
            grads = _reinforce_grads(lm, [list(prefixes[i]) for i in rows],
                                     [H[i] for i in rows], ys)  # fmt: skip
            for i, g in zip(rows, grads, strict=True):
                scale = H[i].norm(dim=-1, keepdim=True).mean()
                H[i] = H[i] + lr * float(rewards[i]) * scale * g / g.norm().clamp_min(1e-12)
        new = decode_with_thoughts(lm, [prefixes[i] for i in todo], [H[i] for i in todo],
                                   max_new_tokens, batch_size)  # fmt: skip
        new_r = self_reward(lm, [questions[i] for i in todo], new, batch_size)
        for j, i in enumerate(todo):
            answers[i], rewards[i] = new[j], new_r[j]
    return answers, [float(r) for r in rewards]
