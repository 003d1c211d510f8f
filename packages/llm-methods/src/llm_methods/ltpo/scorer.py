"""Thought scoring on a shared prefix KV cache: LTPO's confidence reward, greedy decoding with or
without thoughts, and LatentSeek's continuation gradient (shapes in each docstring).

A batch of B questions ``prefix_i · H_i · suffix`` shares one KV cache of the left-padded
prefixes (explicit position ids, so each row equals the question alone). Everything after the
prefix is forwarded on top of the cache and cropped off again, so a batch's prefixes are encoded
once for every method.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from llm_methods.lm.loading import LM, cache_kwargs

__all__ = ["EPS", "BatchThoughtScorer", "ThoughtScorer", "confidence_reward"]

EPS = 1e-10


def confidence_reward(logits: torch.Tensor, top_k: int = 10) -> torch.Tensor:
    """R from logits [..., N, V]: mean over the N positions of −mean_{top-k} log(p + 1e−10)."""
    probs = logits.float().softmax(-1)
    top = probs.topk(min(top_k, probs.shape[-1]), dim=-1).values
    return (-(top + EPS).log().mean(-1)).mean(-1)


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


class BatchThoughtScorer:
    """B questions ``prefixes[i] · H_i · suffix`` on one KV cache of their prefixes.

    ``reward(H)`` forwards [H; suffix[0]] (K + 1 positions, each depending on H; K when the
    suffix is empty); ``greedy`` decodes after [H; suffix] (or [suffix] alone without thoughts);
    ``continuation_grads`` backpropagates log π(y | prefix, H, suffix) into H."""

    def __init__(
        self,
        lm: LM,
        prefixes: Sequence[Sequence[int]],
        top_k: int = 10,
        suffix: Sequence[int] = (),
    ) -> None:
        self.lm, self.top_k = lm, top_k
        self.suffix = list(suffix)
        self.embed = lm.model.get_input_embeddings()
        pieces = [self.embed(torch.tensor(list(p), device=lm.device)).detach() for p in prefixes]
        E, self.mask = _left_pad(pieces)
        self.lengths = self.mask.sum(1)  # [B]
        self.B, self.P = E.shape[:2]
        pos = (self.mask.cumsum(1) - 1).clamp_min(0)
        with torch.no_grad():
            out = lm.model(  # logits of the last position only: all that is used
                inputs_embeds=E,
                attention_mask=self.mask,
                position_ids=pos,
                use_cache=True,
                logits_to_keep=1,
            )
            suffix_ids = torch.tensor(self.suffix, dtype=torch.long, device=lm.device)
            self.suffix_embeds = self.embed(suffix_ids).detach()  # [S, d]
        self.cache = getattr(out, "cache", None) or out.past_key_values
        self.last_logits = out.logits[:, -1:].detach()  # [B, 1, V]

    def _tail(self, H: torch.Tensor | None, n_suffix: int) -> torch.Tensor | None:
        """[H; suffix[:n_suffix]] as [B, K + n, d] (H [B, K, d] or None)."""
        parts = [] if H is None else [H.to(self.suffix_embeds.dtype)]
        if n_suffix:
            parts.append(self.suffix_embeds[:n_suffix][None].expand(self.B, -1, -1))
        return torch.cat(parts, 1) if parts else None

    def _extend(
        self, embeds: torch.Tensor, mask: torch.Tensor, start: torch.Tensor, keep: int = 0
    ) -> torch.Tensor:
        """Forward ``embeds`` [B, S, d] after what the cache holds (``mask`` [B, P+done+S],
        first positions ``start`` [B]); returns logits [B, S, V] (``keep`` > 0: of the last
        ``keep`` positions only, [B, keep, V]). The cache keeps the new entries until
        :meth:`_reset`."""
        pos = start[:, None] + torch.arange(embeds.shape[1], device=embeds.device)[None]
        out = self.lm.model(
            inputs_embeds=embeds.to(self.last_logits.dtype),
            attention_mask=mask,
            position_ids=pos,
            use_cache=True,
            logits_to_keep=keep,
            **cache_kwargs(self.lm.model, self.cache),
        )
        return out.logits

    def _reset(self) -> None:
        """Drop every cache entry after the prefix."""
        extra = self.cache.get_seq_length() - self.P
        if extra > 0:
            self.cache.crop(-extra)

    def reward_logits(self, H: torch.Tensor) -> torch.Tensor:
        """Logits [B, K + 1, V] at the thought positions and the first suffix token."""
        tail = self._tail(H, min(1, len(self.suffix)))
        assert tail is not None
        mask = torch.cat([self.mask, self.mask.new_ones(self.B, tail.shape[1])], 1)
        try:
            return self._extend(tail, mask, self.lengths)
        finally:
            self._reset()

    def reward(self, H: torch.Tensor) -> torch.Tensor:
        """H [B, K, d] -> rewards [B]."""
        return confidence_reward(self.reward_logits(H), self.top_k)

    @torch.no_grad()
    def greedy(self, H: torch.Tensor | None, max_new_tokens: int) -> list[list[int]]:
        """Greedy continuations of ``prefix · H · suffix`` (``H`` [B, K, d], or None for
        ``prefix · suffix``) until EOS or ``max_new_tokens``; token ids per row, EOS included.
        Same tokens as ``generate(do_sample=False)`` on the left-padded batch."""
        eos = self.lm.model.generation_config.eos_token_id
        if eos is None:
            eos = self.lm.tokenizer.eos_token_id
        eos_ids = torch.tensor(eos if isinstance(eos, list) else [eos], device=self.mask.device)
        mask, nxt_pos, logits = self.mask, self.lengths.clone(), self.last_logits[:, -1]
        rows: list[list[int]] = [[] for _ in range(self.B)]
        done = torch.zeros(self.B, dtype=torch.bool, device=mask.device)
        try:
            tail = self._tail(H, len(self.suffix))
            if tail is not None:
                mask = torch.cat([mask, mask.new_ones(self.B, tail.shape[1])], 1)
                logits = self._extend(tail, mask, nxt_pos, keep=1)[:, -1]
                nxt_pos = nxt_pos + tail.shape[1]
            for step in range(max_new_tokens):
                token = logits.argmax(-1)
                for i in torch.nonzero(~done).flatten().tolist():
                    rows[i].append(int(token[i]))
                done |= torch.isin(token, eos_ids)
                if bool(done.all()) or step == max_new_tokens - 1:
                    break
                mask = torch.cat([mask, mask.new_ones(self.B, 1)], 1)
                logits = self._extend(self.embed(token[:, None]), mask, nxt_pos, keep=1)[:, -1]
                nxt_pos = nxt_pos + 1
        finally:
            self._reset()
        return rows

    def continuation_grads(self, H: torch.Tensor, ys: Sequence[Sequence[int]]) -> torch.Tensor:
        """∇_H Σ_rows log π(y_i | prefix_i, H_i, suffix) [B, K, d] (rows are independent, so
        each row's block is its own gradient). Only [H; suffix; y] is forwarded."""
        B, K = H.shape[:2]
        S = len(self.suffix)
        leaves = H.detach().clone().requires_grad_(True)
        Ly = max(len(y) for y in ys)
        ids = torch.zeros(B, Ly, dtype=torch.long, device=H.device)
        ymask = torch.zeros(B, Ly, dtype=self.mask.dtype, device=H.device)
        for i, y in enumerate(ys):
            ids[i, : len(y)] = torch.tensor(list(y), device=H.device)
            ymask[i, : len(y)] = 1
        tail = self._tail(leaves, S)
        assert tail is not None
        seq = torch.cat([tail, self.embed(ids).detach()], 1)
        mask = torch.cat([self.mask, self.mask.new_ones(B, K + S), ymask], 1)
        try:
            # logits of the positions that predict y only (the last Ly + 1, less the last)
            logits = self._extend(seq, mask, self.lengths, keep=Ly + 1)[:, :Ly]
            logp = logits.float().log_softmax(-1).gather(2, ids[..., None])[..., 0]
            total = (logp * ymask).sum()
            (grad,) = torch.autograd.grad(total, leaves)
        finally:
            self._reset()
        return grad


class ThoughtScorer(BatchThoughtScorer):
    """One question: ``reward(H [K, d])`` -> scalar on the cache, and ``reward_uncached`` (a
    full forward over [prefix; H; suffix[0]], the reference the cache must equal)."""

    def __init__(
        self, lm: LM, prefix: Sequence[int], top_k: int = 10, suffix: Sequence[int] = ()
    ) -> None:
        super().__init__(lm, [prefix], top_k, suffix)
        self.prefix = list(prefix)

    def reward(self, H: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().reward(H[None])[0]

    def reward_uncached(self, H: torch.Tensor) -> torch.Tensor:
        ids = torch.tensor([self.prefix], device=self.lm.device)
        tail = self._tail(H[None], min(1, len(self.suffix)))
        assert tail is not None
        embeds = torch.cat([self.embed(ids).detach(), tail.to(self.suffix_embeds.dtype)], 1)
        logits = self.lm.model(inputs_embeds=embeds, use_cache=False).logits
        return confidence_reward(logits[:, self.P :], self.top_k)[0]
