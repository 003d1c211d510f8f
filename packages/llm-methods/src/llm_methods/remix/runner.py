"""The GRPO / ReMix training loop (:class:`RLRunner`: sample, score, replay, update, reincarnate)
and its rollout batches, on the losses of :mod:`llm_methods.remix.model`; importable without
Lightning."""

from __future__ import annotations

import copy
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from llm_methods.lm.errors import LMError
from llm_methods.remix.model import (
    RLConfig,
    group_advantages,
    grpo_loss,
    kl_convex_lambda,
    mix_ppg_loss,
    sequence_logps,
)

__all__ = ["RLRunner", "Rollout", "collate_rollouts"]


@dataclass
class Rollout:
    """One sampled completion: unpadded token lists, its reward/advantage, the behaviour
    policy's per-token log-probs and the iteration (policy version) that sampled it."""

    prompt: list[int]
    completion: list[int]
    reward: float
    advantage: float
    behaviour: torch.Tensor  # [len(completion)]
    version: int
    text: str = ""


def collate_rollouts(
    items: Sequence[Rollout], pad_id: int, device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """Left-pad prompts, right-pad completions (and behaviour log-probs) into one batch."""
    if not items:
        raise LMError("empty reward set: no rollouts in the batch")
    width_p = max(len(r.prompt) for r in items)
    width_c = max(1, max(len(r.completion) for r in items))
    B = len(items)
    out = {
        "prompt_ids": torch.full((B, width_p), pad_id, dtype=torch.long),
        "prompt_mask": torch.zeros(B, width_p, dtype=torch.long),
        "completion_ids": torch.full((B, width_c), pad_id, dtype=torch.long),
        "completion_mask": torch.zeros(B, width_c, dtype=torch.long),
        "behaviour": torch.zeros(B, width_c),
        "advantages": torch.tensor([r.advantage for r in items], dtype=torch.float32),
    }
    for i, r in enumerate(items):
        p, c = len(r.prompt), len(r.completion)
        out["prompt_ids"][i, width_p - p :] = torch.tensor(r.prompt)
        out["prompt_mask"][i, width_p - p :] = 1
        if c:
            out["completion_ids"][i, :c] = torch.tensor(r.completion)
            out["completion_mask"][i, :c] = 1
            if r.behaviour.numel() == c:
                out["behaviour"][i, :c] = r.behaviour
    return {k: v.to(device) for k, v in out.items()}


@dataclass
class RLRunner:
    """One GRPO / ReMix run on an HF causal LM (the policy is trained in place).

    ``step(problems, optimizer)`` = one iteration: build the batch (ReMix before
    reincarnation: ``round(p_off * P)`` group slots from the replay, fresh rollouts for the other
    prompts only; GRPO and ReMix after reincarnation: ``G`` fresh completions per problem),
    score fresh completions with ``reward_fn(text, gold)``, take the gradient steps (GRPO:
    ``num_iterations``; ReMix: ``utd``), update the replay. Counts rollouts (fresh completions
    sampled) and gradient steps; ``T`` and ``lambda(t)`` are in gradient steps.
    """

    model: nn.Module
    tokenizer: Any
    cfg: RLConfig
    reward_fn: Callable[[str, str], float]
    seed: int = 0
    t: int = 0
    rollouts: int = 0
    grad_steps: int = 0
    reincarnated: bool = False
    replay: deque = field(default_factory=deque)
    history: list[dict[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.base = _frozen_copy(self.model)
        self.prev = _frozen_copy(self.model) if self.cfg.algo == "remix" else None

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # -- sampling -------------------------------------------------------------------------
    def prompt_ids(self, prompt: str) -> list[int]:
        tok = self.tokenizer
        ids = tok(prompt, add_special_tokens=False).input_ids
        return ([tok.bos_token_id] if tok.bos_token_id is not None else []) + list(ids)

    @torch.no_grad()
    def sample(
        self,
        prompts: Sequence[str],
        n: int,
        greedy: bool = False,
        max_new_tokens: int | None = None,
    ) -> list[tuple[list[int], list[int], str]]:
        """``n`` completions per prompt: (prompt ids, completion ids incl. first EOS, text)."""
        tok, eos = self.tokenizer, self.tokenizer.eos_token_id
        pad = tok.pad_token_id if tok.pad_token_id is not None else eos
        encoded = [self.prompt_ids(p) for p in prompts for _ in range(n)]
        if not encoded:
            raise LMError("empty reward set: no prompts to sample")
        width = max(len(e) for e in encoded)
        ids = torch.full((len(encoded), width), pad, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for i, e in enumerate(encoded):
            ids[i, width - len(e) :] = torch.tensor(e)
            attn[i, width - len(e) :] = 1
        kwargs: dict[str, Any] = {
            "max_new_tokens": max_new_tokens or self.cfg.max_new_tokens,
            "pad_token_id": pad,
            "eos_token_id": eos,
        }
        if greedy:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        else:
            kwargs.update(do_sample=True, temperature=self.cfg.temperature, top_k=0, top_p=1.0)
        was_training = self.model.training
        self.model.eval()
        out = self.model.generate(
            input_ids=ids.to(self.device), attention_mask=attn.to(self.device), **kwargs
        )[:, width:].tolist()
        self.model.train(was_training)
        result = []
        for e, seq in zip(encoded, out, strict=True):
            comp = seq[: seq.index(eos) + 1] if eos in seq else seq
            result.append((e, comp, tok.decode(comp, skip_special_tokens=True)))
        return result

    def _logps(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return sequence_logps(
            model,
            batch["prompt_ids"],
            batch["prompt_mask"],
            batch["completion_ids"],
            batch["completion_mask"],
            self.cfg.temperature,
        )

    def rollout(self, problems: Sequence[Any]) -> list[list[Rollout]]:
        """Fresh groups from the current policy, scored, with behaviour log-probs (pi_k)."""
        G = self.cfg.group_size
        samples = self.sample([p.prompt for p in problems], G)
        rewards = torch.tensor(
            [
                self.reward_fn(text, problems[i // G].answer)
                for i, (_, _, text) in enumerate(samples)
            ]
        )
        adv = group_advantages(rewards, G)
        self.rollouts += len(samples)
        items = [
            Rollout(p, c, float(r), float(a), torch.empty(0), self.t, text)
            for (p, c, text), r, a in zip(samples, rewards, adv, strict=True)
        ]
        pad = self.tokenizer.pad_token_id
        with torch.no_grad():
            batch = collate_rollouts(items, pad, self.device)
            full = self._logps(self.model, batch)
            lp = full.cpu()
        # an on-policy step trains on exactly this batch with the model unchanged: its pi_old
        # (``current``) is this tensor, not a second forward (step() checks the rows)
        self._fresh_logps = (items, full)
        for i, r in enumerate(items):
            r.behaviour = lp[i, : len(r.completion)]
        return [items[g * G : (g + 1) * G] for g in range(len(problems))]

    # -- one iteration --------------------------------------------------------------------
    def _replay_group(self) -> list[Rollout]:
        """A random group of a random one of the last ``N`` iterations."""
        past = self.rng.choice(list(self.replay))
        return self.rng.choice(list(past))

    def _informative_replay_group(self) -> list[Rollout] | None:
        """A random replay group whose rewards differ, or None when the replay holds none (a
        zero-spread replacement would carry no policy gradient either: the swap is skipped)."""
        pool = [g for past in self.replay for g in past if _reward_spread(g)]
        return self.rng.choice(pool) if pool else None

    def _reincarnate_if_due(self) -> None:
        cfg = self.cfg
        if (
            cfg.algo == "remix"
            and not self.reincarnated
            and cfg.reincarnate_at is not None
            and self.grad_steps >= cfg.reincarnate_at
        ):
            self.base = _frozen_copy(self.model)  # policy reincarnation: base <- pi_T
            self.reincarnated = True  # ... and on-policy from here on
            self.replay.clear()

    def step(
        self,
        problems: Sequence[Any],
        optimizer: torch.optim.Optimizer,
        backward: Callable[[torch.Tensor], None] | None = None,
    ) -> dict[str, float]:
        """One iteration (see the class docstring); returns its logs.

        ReMix before reincarnation: the last ``round(p_off * len(problems))`` slots (when the
        replay holds groups) are replay groups and get no fresh rollouts; the other prompts are
        sampled and all of their rollouts are trained on (``replay_zero_std`` swaps fresh groups
        whose rewards are all equal, which carry no policy gradient, for replay groups whose
        rewards differ, and skips the swap when the replay has none)."""
        cfg = self.cfg
        backward = backward or (lambda loss: loss.backward())
        self._reincarnate_if_due()
        remix = cfg.algo == "remix" and not self.reincarnated  # mix-policy phase
        n_off = min(len(problems), round(cfg.p_off * len(problems))) if remix and self.replay else 0
        n_fresh = len(problems) - n_off
        fresh = self.rollout(problems[:n_fresh]) if n_fresh else []
        zero_std = [not _reward_spread(g) for g in fresh]
        groups = [self._replay_group() for _ in range(n_off)]
        n_swapped = 0
        for g, flat in zip(fresh, zero_std, strict=True):
            swap = None
            if remix and flat and cfg.replay_zero_std and self.replay:
                swap = self._informative_replay_group()  # None: keep the fresh group
            groups.append(g if swap is None else swap)
            n_swapped += swap is not None
        items = [r for g in groups for r in g]
        batch = collate_rollouts(items, self.tokenizer.pad_token_id, self.device)
        mask = batch["completion_mask"]
        n_steps = cfg.utd if remix else cfg.num_iterations
        lams = [1.0] * n_steps
        if cfg.algo == "remix" and cfg.beta:  # KL-Convex (kept after reincarnation)
            lams = [
                kl_convex_lambda(
                    self.grad_steps + i, cfg.lam_start, cfg.lam_every, cfg.lam_decay, cfg.lam_min
                )
                for i in range(n_steps)
            ]
        with torch.no_grad():
            cached = getattr(self, "_fresh_logps", None)
            self._fresh_logps = None
            if (
                cached is not None
                and len(cached[0]) == len(items)
                and all(a is b for a, b in zip(cached[0], items, strict=True))
            ):  # the fresh rollouts' batch, scored by the same model: the same numbers
                current = cached[1]
            else:
                current = self._logps(self.model, batch)
            base = self._logps(self.base, batch) if cfg.beta else None
            prev = None
            if min(lams) < 1.0:
                prev = self._logps(self.prev, batch)  # type: ignore[arg-type]
        if cfg.algo == "remix":
            self.prev.load_state_dict(self.model.state_dict())  # type: ignore[union-attr]
        old = batch["behaviour"] if remix else current
        use_mix = cfg.algo == "remix"  # after reincarnation: on-policy rows, clip centre 1
        logs: dict[str, float] = {}
        self.model.train()
        for lam in lams:
            logps = self._logps(self.model, batch)
            if use_mix:
                loss, stats = mix_ppg_loss(
                    logps,
                    old,
                    current,
                    batch["advantages"],
                    mask,
                    cfg.epsilon,
                    cfg.epsilon_high,
                    cfg.beta,
                    base,
                    prev,
                    lam,
                )
            else:
                loss, stats = grpo_loss(
                    logps,
                    old,
                    batch["advantages"],
                    mask,
                    cfg.epsilon,
                    cfg.epsilon_high,
                    cfg.beta,
                    base,
                )
            optimizer.zero_grad(set_to_none=True)
            backward(loss)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
            optimizer.step()
            self.grad_steps += 1
            logs = {"loss": float(loss.detach()), **stats}
        trained_ids = {id(r) for r in items}
        fresh_items = [r for g in fresh for r in g]
        if remix and fresh:
            self.replay.append(fresh)
            while len(self.replay) > cfg.n_past:
                self.replay.popleft()
        n_fresh_rows = max(len(fresh_items), 1)
        logs.update(
            reward=sum(r.reward for r in fresh_items) / n_fresh_rows,
            length=sum(len(r.completion) for r in fresh_items) / n_fresh_rows,
            fresh_rollouts=float(len(fresh_items)),
            fresh_trained=float(sum(id(r) in trained_ids for r in fresh_items)),
            off_policy_groups=float(len(groups) - len(fresh) + n_swapped),
            trained_rows=float(len(items)),
            zero_std_frac=sum(zero_std) / max(len(fresh), 1),
            zero_std_swapped=float(n_swapped),
            lam=lams[-1],
            t=float(self.t),
            rollouts=float(self.rollouts),
            grad_steps=float(self.grad_steps),
        )
        self.history.append(logs)
        self.t += 1
        return logs

    @torch.no_grad()
    def evaluate(self, problems: Sequence[Any]) -> dict[str, float]:
        """Greedy exact-match accuracy and mean response length (tokens) on ``problems``."""
        if not problems:
            raise LMError("empty reward set: no evaluation problems")
        out = self.sample([p.prompt for p in problems], 1, greedy=True)
        from llm_methods.remix.data import exact_match_reward

        acc = sum(
            exact_match_reward(text, p.answer)
            for (_, _, text), p in zip(out, problems, strict=True)
        )
        return {
            "accuracy": acc / len(problems),
            "length": sum(len(c) for _, c, _ in out) / len(out),
        }


def _reward_spread(group: Sequence[Rollout]) -> bool:
    """Whether a group's rewards differ (a group of equal rewards has zero advantages)."""
    return len({r.reward for r in group}) > 1


def _frozen_copy(model: nn.Module) -> nn.Module:
    copy_ = copy.deepcopy(model).eval()
    for p in copy_.parameters():
        p.requires_grad_(False)
    return copy_
