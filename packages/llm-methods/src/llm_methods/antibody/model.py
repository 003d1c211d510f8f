"""Antibody (arXiv 2603.00498) and its baselines as gradient recipes on a plain HF causal LM.

Every ``*_grads`` function returns the update direction as a list of tensors (one per trainable
parameter, the parameters' shapes) plus a dict of logs; :func:`train` turns a recipe into an
AdamW loop built as the HF Trainer of the official code builds it (:func:`adamw`: no weight
decay on biases and normalisation weights; gradient clipping 1.0, the Trainer default). Batches are
dicts of ``ids`` [B, T], ``attn`` [B, T] and ``loss_mask`` [B, T] (1 on response tokens).

Alignment stage (paper Sec. 3.1), with ``g_X = ∇_θ L_X``:

* harmful perturbation  θ_pert = θ − ρ g_harm(θ) / ‖g_harm(θ)‖;
* sharpness  L_sharp(θ) = L_harm(θ) − L_harm(θ_pert), first-order gradient
  g_sharp = g_harm(θ) − g_harm(θ_pert) (θ_pert treated as θ plus a constant, as in Booster);
* update  g = g_align + λ_t g_sharp + λ_r g_refusal(θ_pert) (λ_r = ``lambda2``);
* λ_t, paper: max(0, (a − ⟨g_sharp, g_align⟩) / ‖g_sharp‖²)  (the smallest λ that makes the
  combined step decrease L_sharp at rate a to first order: ⟨g, g_sharp⟩ >= a);
  official code: max(0, η_λ − cos(g_align, g_sharp)), smoothed by an EMA (momentum 0.99).

Finetuning stage (paper Sec. 3.2): d_i = avgNLL(refusal_i | x_i) − avgNLL(target_i | x_i),
w = softmax(d / τ) over the batch, loss = Σ_i w_i Σ_t CE_it / Σ_i w_i N_i (weighted token CE).

Baselines: SFT (plain CE); Booster (g_align + λ g_sharp with a fixed λ); Vaccine (alignment loss
under the worst-case ρ-perturbation of every decoder layer's output, found by one gradient step).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from llm_methods.lm.errors import LMError

__all__ = [
    "AntibodyConfig",
    "LambdaEMA",
    "adamw",
    "antibody_align_grads",
    "booster_align_grads",
    "lambda_code",
    "lambda_paper",
    "masked_ce",
    "perturbed",
    "sequence_nll",
    "sft_grads",
    "train",
    "vaccine_align_grads",
    "weighted_finetune_grads",
]

Batch = dict[str, torch.Tensor]
Grads = list[torch.Tensor]
LAMBDA_RULES = ("paper", "code")


@dataclass
class AntibodyConfig:
    """Antibody's hyper-parameters (the ``antibody:`` group of a config; defaults: the issue /
    official script values). Checked on construction: one-line ``LMError`` (a ``ValueError``)
    naming the field."""

    rho: float = 0.1  # ρ, harmful perturbation radius (official ``alpha``)
    lambda_rule: Literal["code", "paper"] = "code"  # "code" (the official trainer) or "paper"
    a: float = 1.0  # paper rule only: target decrease rate of L_sharp (our constant, see README)
    eta_lambda: float = 5.0  # η_λ of the code's λ_t rule
    ema: float = 0.99  # EMA momentum of the code's λ_t (paper rule: no EMA)
    lambda2: float = 0.05  # λ_r, weight of the refusal loss at θ_pert
    tau: float = 1.0  # finetuning softmax temperature

    def __post_init__(self) -> None:
        if self.lambda_rule not in LAMBDA_RULES:
            raise LMError(f"lambda_rule must be one of {LAMBDA_RULES}, got {self.lambda_rule!r}")
        if self.rho < 0:
            raise LMError(f"rho must be >= 0, got {self.rho}")
        if self.tau <= 0:
            raise LMError(f"tau must be > 0, got {self.tau}")
        if not 0 <= self.ema < 1:
            raise LMError(f"ema must be in [0, 1), got {self.ema}")
        if self.lambda2 < 0:
            raise LMError(f"lambda2 must be >= 0, got {self.lambda2}")


def _params(model: nn.Module) -> list[nn.Parameter]:
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise LMError("the model has no trainable parameters")
    return params


def sequence_nll(model: nn.Module, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sequence summed next-token NLL over response tokens and their counts, both [B]."""
    out = model(input_ids=batch["ids"], attention_mask=batch["attn"])
    logp = torch.log_softmax(out.logits[:, :-1].float(), dim=-1)
    nll = -logp.gather(-1, batch["ids"][:, 1:, None]).squeeze(-1)
    mask = batch["loss_mask"][:, 1:].to(nll.dtype)
    return (nll * mask).sum(1), mask.sum(1)


def masked_ce(model: nn.Module, batch: Batch, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Token CE over response tokens: Σ_i w_i Σ_t CE_it / Σ_i w_i N_i (w = 1: the plain mean)."""
    nll, count = sequence_nll(model, batch)
    if weights is None:
        return nll.sum() / count.sum().clamp(min=1)
    w = weights.detach().to(nll.dtype)
    return (w * nll).sum() / (w * count).sum().clamp(min=1e-8)


def _grads(loss: torch.Tensor, params: Sequence[nn.Parameter]) -> Grads:
    grads = torch.autograd.grad(loss, list(params), allow_unused=True)
    return [
        torch.zeros_like(p) if g is None else g.detach() for p, g in zip(params, grads, strict=True)
    ]


def _dot(a: Grads, b: Grads) -> torch.Tensor:
    return sum((x * y).sum() for x, y in zip(a, b, strict=True))  # type: ignore[return-value]


def _norm(a: Grads) -> torch.Tensor:
    return torch.sqrt(_dot(a, a))


@contextmanager
def perturbed(params: Sequence[nn.Parameter], direction: Grads, rho: float) -> Iterator[None]:
    """Temporarily move the parameters to θ − ρ d/‖d‖ (restored exactly on exit)."""
    saved = [p.detach().clone() for p in params]
    scale = rho / (float(_norm(direction)) + 1e-7)
    with torch.no_grad():
        for p, d in zip(params, direction, strict=True):
            p.sub_(scale * d)
    try:
        yield
    finally:
        with torch.no_grad():
            for p, s in zip(params, saved, strict=True):
                p.copy_(s)


def lambda_paper(g_align: Grads, g_sharp: Grads, a: float) -> float:
    """Paper: λ_t = max(0, (a − ⟨g_sharp, g_align⟩) / ‖g_sharp‖²)."""
    sq = float(_dot(g_sharp, g_sharp))
    return max(0.0, (a - float(_dot(g_sharp, g_align))) / (sq + 1e-12))


def lambda_code(g_align: Grads, g_sharp: Grads, eta: float) -> float:
    """Official code: λ_t = max(0, η_λ − cos(g_align, g_sharp)) (before its EMA)."""
    cos = float(_dot(g_align, g_sharp)) / (float(_norm(g_align) * _norm(g_sharp)) + 1e-8)
    return max(0.0, eta - cos)


@dataclass
class LambdaEMA:
    """EMA of λ_t (official: the first value initialises it)."""

    momentum: float = 0.99
    value: float | None = None

    def __call__(self, raw: float) -> float:
        self.value = (
            raw if self.value is None else self.momentum * self.value + (1 - self.momentum) * raw
        )
        return self.value


def sft_grads(model: nn.Module, params: Sequence[nn.Parameter], batch: Batch) -> tuple[Grads, dict]:
    """Plain SFT: ∇ of the mean response-token CE (1 forward + backward)."""
    loss = masked_ce(model, batch)
    return _grads(loss, params), {"loss": float(loss.detach())}


def _sharpness(
    model: nn.Module,
    params: Sequence[nn.Parameter],
    harm: Batch,
    rho: float,
    refusal: Batch | None = None,
) -> tuple[Grads, Grads | None, dict]:
    """g_sharp = g_harm(θ) − g_harm(θ_pert) and (optionally) g_refusal(θ_pert)."""
    loss_h = masked_ce(model, harm)
    g_h = _grads(loss_h, params)
    with perturbed(params, g_h, rho):
        loss_p = masked_ce(model, harm)
        g_p = _grads(loss_p, params)
        g_r, loss_r = None, float("nan")
        if refusal is not None:
            loss_ref = masked_ce(model, refusal)
            g_r, loss_r = _grads(loss_ref, params), float(loss_ref.detach())
    g_sharp = [a - b for a, b in zip(g_h, g_p, strict=True)]
    logs = {
        "harmful_loss": float(loss_h.detach()),
        "perturbed_loss": float(loss_p.detach()),
        "refusal_loss": loss_r,
    }
    return g_sharp, g_r, logs


def booster_align_grads(
    model: nn.Module,
    params: Sequence[nn.Parameter],
    align: Batch,
    harm: Batch,
    lam: float = 5.0,
    rho: float = 0.1,
) -> tuple[Grads, dict]:
    """Booster: g_align + λ (g_harm(θ) − g_harm(θ_pert)), fixed λ (3 forward + backward)."""
    g_sharp, _, logs = _sharpness(model, params, harm, rho)
    loss_a = masked_ce(model, align)
    g_a = _grads(loss_a, params)
    return [a + lam * s for a, s in zip(g_a, g_sharp, strict=True)], {
        "loss": float(loss_a.detach()),
        **logs,
    }


def antibody_align_grads(
    model: nn.Module,
    params: Sequence[nn.Parameter],
    align: Batch,
    harm: Batch,
    refusal: Batch,
    cfg: AntibodyConfig,
    ema: LambdaEMA | None = None,
) -> tuple[Grads, dict]:
    """Antibody alignment: g_align + λ_t g_sharp + λ_r g_refusal(θ_pert) (4 forward + backward).

    ``refusal`` holds the harmful batch's prompts with refusal targets. λ_t follows
    ``cfg.lambda_rule``; ``ema`` (code rule only) carries the EMA state across steps.
    """
    g_sharp, g_ref, logs = _sharpness(model, params, harm, cfg.rho, refusal)
    loss_a = masked_ce(model, align)
    g_a = _grads(loss_a, params)
    if cfg.lambda_rule == "paper":
        lam = raw = lambda_paper(g_a, g_sharp, cfg.a)
    else:
        raw = lambda_code(g_a, g_sharp, cfg.eta_lambda)
        lam = ema(raw) if ema is not None else raw
    assert g_ref is not None
    out = [a + lam * s + cfg.lambda2 * r for a, s, r in zip(g_a, g_sharp, g_ref, strict=True)]
    return out, {"loss": float(loss_a.detach()), "lambda_t": lam, "lambda_raw": raw, **logs}


def _layer_output(out: Any) -> torch.Tensor:
    return out[0] if isinstance(out, tuple) else out


def _with_output(out: Any, h: torch.Tensor) -> Any:
    return (h, *out[1:]) if isinstance(out, tuple) else h


def _decoder_layers(model: nn.Module) -> nn.ModuleList:
    from llm_methods.lm.loading import find_modules

    return find_modules(model).layers


def vaccine_align_grads(
    model: nn.Module, params: Sequence[nn.Parameter], align: Batch, rho: float = 5.0
) -> tuple[Grads, dict]:
    """Vaccine: ∇ L_align with every decoder layer's output h_l shifted by ρ g_l / ‖g‖, where
    g_l = ∂L_align/∂h_l and ‖g‖ is the joint norm over layers (2 forward + backward)."""
    layers = list(_decoder_layers(model))
    captured: list[torch.Tensor] = []

    def capture(_m: nn.Module, _i: Any, out: Any) -> Any:
        h = _layer_output(out)
        captured.append(h)
        return out

    handles = [layer.register_forward_hook(capture) for layer in layers]
    try:
        loss0 = masked_ce(model, align)
        hg = torch.autograd.grad(loss0, captured)
    finally:
        for h in handles:
            h.remove()
    total = torch.sqrt(sum((g.float() ** 2).sum() for g in hg)) + 1e-7  # type: ignore[arg-type]
    shifts = [(rho * g / total).detach() for g in hg]

    def make(shift: torch.Tensor) -> Callable:
        def add(_m: nn.Module, _i: Any, out: Any) -> Any:
            return _with_output(out, _layer_output(out) + shift)

        return add

    handles = [
        layer.register_forward_hook(make(s)) for layer, s in zip(layers, shifts, strict=True)
    ]
    try:
        loss = masked_ce(model, align)
        grads = _grads(loss, params)
    finally:
        for h in handles:
            h.remove()
    return grads, {"loss": float(loss0.detach()), "perturbed_loss": float(loss.detach())}


def weighted_finetune_grads(
    model: nn.Module, params: Sequence[nn.Parameter], batch: Batch, refusal: Batch, tau: float = 1.0
) -> tuple[Grads, dict]:
    """Antibody finetuning: w = softmax(d / τ), d_i = avgNLL(refusal_i) − avgNLL(target_i);
    weighted token CE (1 no-grad forward of the refusal view + 1 forward + backward).

    The target NLL is read from the training forward itself (the same θ and inputs), so d uses
    the pre-step model as in the official code without a third pass."""
    with torch.no_grad():
        ref_nll, ref_n = sequence_nll(model, refusal)
    nll, count = sequence_nll(model, batch)
    d = ref_nll / ref_n.clamp(min=1) - nll.detach() / count.clamp(min=1)
    w = torch.softmax(d / tau, dim=0)
    loss = (w * nll).sum() / (w * count).sum().clamp(min=1e-8)
    return _grads(loss, params), {
        "loss": float(loss.detach()),
        "weights": w.tolist(),
        "d": d.tolist(),
    }


def adamw(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW over the trainable parameters as the HF ``Trainer.create_optimizer`` of the official
    code builds it (``get_decay_parameter_names``): ``weight_decay`` on every parameter except
    biases and the weights of LayerNorm / RMSNorm layers, which get none."""
    norms = {
        id(p)
        for m in model.modules()
        if "LayerNorm" in type(m).__name__ or "RMSNorm" in type(m).__name__
        for p in m.parameters(recurse=False)
    }
    decay, plain = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (plain if "bias" in name or id(p) in norms else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": plain, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=lr)


@dataclass
class TrainLog:
    logs: list[dict] = field(default_factory=list)
    wall_s: float = 0.0


def train(
    model: nn.Module,
    step_fn: Callable[[list[nn.Parameter], int], tuple[Grads, dict]],
    steps: int,
    lr: float = 1e-3,
    weight_decay: float = 0.1,
    clip: float = 1.0,
    progress_as: str | None = None,
) -> TrainLog:
    """:func:`adamw` (constant lr, as the official scripts) driven by ``step_fn(params, step)``,
    which returns the update direction; the direction is clipped to ``clip`` global norm.
    ``progress_as``: show progress over the steps on stderr under that description."""
    from iclr26_common.progress import progress

    params = _params(model)
    opt = adamw(model, lr, weight_decay)
    log = TrainLog()
    start = time.perf_counter()
    model.train()
    for step in progress(range(steps), description=progress_as or "", quiet=progress_as is None):
        grads, info = step_fn(params, step)
        norm = float(_norm(grads))
        if not math.isfinite(norm):
            raise LMError(f"non-finite update at step {step}")
        scale = min(1.0, clip / (norm + 1e-6))
        for p, g in zip(params, grads, strict=True):
            p.grad = g * scale
        opt.step()
        opt.zero_grad(set_to_none=True)
        log.logs.append({k: v for k, v in info.items() if not isinstance(v, list)})
    model.eval()
    log.wall_s = time.perf_counter() - start
    return log
