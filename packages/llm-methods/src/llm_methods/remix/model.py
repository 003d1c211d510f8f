"""GRPO and ReMix (Reincarnating Mix-policy Proximal Policy Gradient, arXiv 2507.06892) as plain
torch functions on an HF causal LM; importable without Lightning.

Shapes: ``B`` sequences (= prompts x group size ``G``), prompt width ``P`` (left padded),
completion width ``C`` (right padded). A completion keeps its first EOS and masks what follows.

- GRPO (the base): group-normalised advantages ``A_i = (r_i - mean_g r) / (std_g r + 1e-4)``
  (unbiased std, as TRL), token ratio ``rho = pi_theta / pi_old``, loss
  ``-min(rho A, clip(rho, 1-eps_low, 1+eps_high) A) + beta * KL`` averaged per sequence and then
  over sequences (TRL ``loss_type="grpo"``); KL is the k3 estimator ``exp(q-p) - (q-p) - 1``
  times ``rho`` (TRL's ``use_bias_correction_kl``).
- Mix-policy PPG: a completion sampled by ``pi_{k-i}`` (i = 0 on-policy, 1..N from the replay)
  uses ``rho = pi_theta / pi_{k-i}`` clipped to ``[c - eps_low, c + eps_high]`` around the
  behaviour ratio ``c = pi_k / pi_{k-i}`` (GePPO's generalised clip; c = 1 on-policy).
- KL-Convex: ``beta * (lambda(t) KL(pi || pi_base) + (1 - lambda(t)) KL(pi || pi_{k-1}))`` with
  ``lambda(t) = max(1 - 0.1 * ceil(max(t - 50, 0) / 10), 0.5)`` (constants configurable), ``t``
  the gradient step.
- Per-iteration data (ReMix before reincarnation): ``round(p * P)`` of the ``P`` group slots are
  groups drawn from the replay of the last ``N`` policies and only the other ``P - round(p * P)``
  prompts get fresh rollouts, so every fresh rollout paid for is trained on (``m`` gradient steps
  on the mixed batch). Policy reincarnation once ``T`` gradient steps have been taken.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from llm_methods.lm.errors import LMError

__all__ = [
    "RLConfig",
    "group_advantages",
    "grpo_loss",
    "kl_convex_lambda",
    "mix_ppg_loss",
    "sequence_logps",
]


@dataclass
class RLConfig:
    """GRPO / ReMix settings (the ``rl:`` group of ``ReMixModule``), checked on construction.

    Paper defaults for ReMix: p=0.4, m=2, N=2, T in {50, 100}. ``t`` and ``T`` count gradient
    steps. A bad value raises a one-line :class:`LMError` (a ``ValueError``) naming the field.
    """

    algo: str = "remix"  # "grpo" (on-policy baseline) | "remix"
    group_size: int = 8  # G: completions sampled per prompt (>= 2: group-normalised advantages)
    prompts_per_step: int = 8  # prompts per iteration (experiment loop; Lightning: the data's)
    max_new_tokens: int = 16  # completion width C (tokens sampled per completion)
    temperature: float = 1.0  # sampling temperature; logits / T in the log-probs (as TRL)
    lr: float = 1e-4  # AdamW learning rate (ReMixModule's optimiser; the experiment's LR)
    epsilon: float = 0.2  # eps_low of the clipped surrogate
    epsilon_high: float | None = None  # eps_high (None: = epsilon)
    beta: float = 0.04  # KL coefficient (GRPO: to the base; ReMix: the KL-Convex pair)
    num_iterations: int = 1  # GRPO's mu (TRL num_iterations): gradient passes per batch
    p_off: float = 0.4  # ReMix: p, the share of group slots drawn from the replay
    utd: int = 2  # ReMix: m, gradient steps per batch (update-to-data ratio)
    n_past: int = 2  # ReMix: N, past policies kept in the replay
    reincarnate_at: int | None = 50  # ReMix: T, policy reincarnation (None: never)
    lam_start: int = 50  # KL-Convex lambda(t): t where the decay starts
    lam_every: int = 10  # lambda(t): gradient steps per decay
    lam_decay: float = 0.1  # lambda(t): decrease per decay
    lam_min: float = 0.5  # lambda(t): floor
    max_grad_norm: float = 1.0  # gradient clipping norm
    replay_zero_std: bool = False  # ReMix: swap fresh groups with equal rewards for replay groups

    def __post_init__(self) -> None:
        if self.algo not in ("grpo", "remix"):
            raise LMError(f"rl.algo must be 'grpo' or 'remix', got {self.algo!r}")
        if self.group_size < 2:
            raise LMError(
                f"rl.group_size must be >= 2 (group-normalised advantages), got {self.group_size}"
            )
        for name in (
            "prompts_per_step",
            "max_new_tokens",
            "num_iterations",
            "utd",
            "n_past",
            "lam_every",
        ):
            if getattr(self, name) < 1:
                raise LMError(f"rl.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("temperature", "lr", "epsilon", "max_grad_norm"):
            if not getattr(self, name) > 0:
                raise LMError(f"rl.{name} must be > 0, got {getattr(self, name)}")
        if self.epsilon_high is not None and not self.epsilon_high > 0:
            raise LMError(f"rl.epsilon_high must be > 0 or None, got {self.epsilon_high}")
        for name in ("beta", "lam_start", "lam_decay"):
            if getattr(self, name) < 0:
                raise LMError(f"rl.{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.p_off <= 1.0:
            raise LMError(f"rl.p_off must be in [0, 1], got {self.p_off}")
        if not 0.0 <= self.lam_min <= 1.0:
            raise LMError(f"rl.lam_min must be in [0, 1], got {self.lam_min}")
        if self.reincarnate_at is not None and self.reincarnate_at < 0:
            raise LMError(f"rl.reincarnate_at must be >= 0 or None, got {self.reincarnate_at}")


def kl_convex_lambda(
    t: int, start: int = 50, every: int = 10, decay: float = 0.1, floor: float = 0.5
) -> float:
    """lambda(t) = max(1 - decay * ceil(max(t - start, 0) / every), floor) (paper: 50, 10, 0.1, 0.5)."""
    return max(1.0 - decay * math.ceil(max(t - start, 0) / every), floor)


def group_advantages(rewards: torch.Tensor, group_size: int, scale: bool = True) -> torch.Tensor:
    """[B] rewards (B = n_groups * G, groups contiguous) -> [B] advantages (TRL's formula)."""
    if rewards.numel() == 0:
        raise LMError("empty reward set: no rollouts to score")
    if rewards.numel() % group_size:
        raise LMError(f"{rewards.numel()} rewards is not a multiple of group size {group_size}")
    grouped = rewards.float().view(-1, group_size)
    adv = grouped - grouped.mean(1, keepdim=True)
    if scale:
        adv = adv / (grouped.std(1, keepdim=True) + 1e-4)
    return adv.reshape(-1)


def sequence_logps(
    model: nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    temperature: float = 1.0,
) -> torch.Tensor:
    """[B, C] log pi(completion token | prefix) at ``temperature`` (logits / T, as TRL)."""
    ids = torch.cat([prompt_ids, completion_ids], 1)
    attn = torch.cat([prompt_mask, completion_mask], 1)
    logits = model(input_ids=ids, attention_mask=attn).logits
    width = completion_ids.shape[1]
    logits = logits[:, -width - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, completion_ids[..., None]).squeeze(-1)


def _k3(logps: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    return torch.exp(ref - logps) - (ref - logps) - 1


def _aggregate(per_token: torch.Tensor, mask: torch.Tensor, loss_type: str) -> torch.Tensor:
    mask = mask.to(per_token.dtype)
    if loss_type == "grpo":  # per-sequence mean, then mean over sequences
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if loss_type == "bnpo":  # token mean over the batch
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    raise LMError(f"unknown loss_type {loss_type!r} (grpo | bnpo)")


def grpo_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    beta: float = 0.0,
    ref_logps: torch.Tensor | None = None,
    loss_type: str = "grpo",
) -> tuple[torch.Tensor, dict[str, float]]:
    """GRPO clipped surrogate (TRL ``_compute_loss``, token-level ratio). logps/old/ref: [B, C];
    advantages: [B]; mask: [B, C]. Returns (loss, stats)."""
    eps_high = eps_low if eps_high is None else eps_high
    adv = advantages[:, None]
    ratio = torch.exp(logps - old_logps)
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high)
    per_token = -torch.min(ratio * adv, clipped * adv)
    stats: dict[str, float] = {}
    if beta != 0.0:
        if ref_logps is None:
            raise LMError("beta != 0 needs ref_logps")
        kl = _k3(logps, ref_logps) * ratio
        per_token = per_token + beta * kl
        stats["kl"] = float(_aggregate(kl.detach(), mask, "bnpo"))
    loss = _aggregate(per_token, mask, loss_type)
    clip_frac = ((ratio < 1 - eps_low) & (adv < 0)) | ((ratio > 1 + eps_high) & (adv > 0))
    stats["clip_frac"] = float(_aggregate(clip_frac.float(), mask, "bnpo"))
    return loss, stats


def mix_ppg_loss(
    logps: torch.Tensor,
    behaviour_logps: torch.Tensor,
    current_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    beta: float = 0.0,
    base_logps: torch.Tensor | None = None,
    prev_logps: torch.Tensor | None = None,
    lam: float = 1.0,
    loss_type: str = "grpo",
) -> tuple[torch.Tensor, dict[str, float]]:
    """Mix-policy proximal policy gradient with the KL-Convex constraint.

    ``rho = pi_theta / pi_{k-i}`` (behaviour), clip centre ``c = pi_k / pi_{k-i}`` (``current``
    = pi_k, the policy at the start of this iteration, detached): the surrogate is
    ``-min(rho A, clip(rho, c - eps_low, c + eps_high) A)``; with ``beta > 0`` adds
    ``beta * rho * (lam * k3(base) + (1 - lam) * k3(prev))``. On-policy rows (behaviour =
    current) reduce exactly to :func:`grpo_loss`.
    """
    eps_high = eps_low if eps_high is None else eps_high
    adv = advantages[:, None]
    ratio = torch.exp(logps - behaviour_logps)
    centre = torch.exp(current_logps - behaviour_logps).detach()
    clipped = torch.maximum(torch.minimum(ratio, centre + eps_high), centre - eps_low)
    per_token = -torch.min(ratio * adv, clipped * adv)
    stats: dict[str, float] = {}
    if beta != 0.0:
        if base_logps is None or (lam < 1.0 and prev_logps is None):
            raise LMError("beta != 0 needs base_logps (and prev_logps when lambda < 1)")
        kl = lam * _k3(logps, base_logps)
        if lam < 1.0:
            kl = kl + (1 - lam) * _k3(logps, prev_logps)  # type: ignore[arg-type]
        kl = kl * ratio
        per_token = per_token + beta * kl
        stats["kl"] = float(_aggregate(kl.detach(), mask, "bnpo"))
    loss = _aggregate(per_token, mask, loss_type)
    clip_frac = ((ratio < centre - eps_low) & (adv < 0)) | ((ratio > centre + eps_high) & (adv > 0))
    stats["clip_frac"] = float(_aggregate(clip_frac.float(), mask, "bnpo"))
    return loss, stats
