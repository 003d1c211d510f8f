"""A plain next-token training loop (AdamW, cosine decay) with a pluggable extra loss.

Used by the zoo builder and by experiments that train many small models (Lightning's per-run
overhead matters there); the LightningModules of the methods call the same loss functions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from llm_methods.lm.errors import LMError

__all__ = ["TrainLog", "causal_lm_loss", "train_lm"]

ExtraLoss = Callable[[Any, torch.Tensor, torch.Tensor], tuple[torch.Tensor, dict[str, float]]]


@dataclass
class TrainLog:
    losses: list[float] = field(default_factory=list)
    extras: list[dict[str, float]] = field(default_factory=list)
    wall_s: float = 0.0


def causal_lm_loss(logits: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over positions whose target is a real (unmasked) token."""
    target_mask = mask[:, 1:].bool()
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    nll = -logp.gather(-1, ids[:, 1:, None]).squeeze(-1)
    return nll[target_mask].mean()


def train_lm(
    model: nn.Module,
    chunks: Sequence[Sequence[int]],
    steps: int,
    batch_size: int = 16,
    lr: float = 3e-3,
    seed: int = 0,
    weight_decay: float = 0.01,
    warmup: int = 20,
    extra_loss: ExtraLoss | None = None,
    loss_mask: Sequence[Sequence[int]] | None = None,
    quiet: bool = True,
) -> TrainLog:
    """Train ``model`` (HF causal LM) on equal-length token ``chunks`` for ``steps`` steps.

    Batches are drawn with a generator seeded by ``seed``. ``extra_loss(outputs, ids, mask)``
    returns ``(term, logs)`` added to the cross-entropy (e.g. the push-away term); the model is
    then run with ``output_hidden_states=True``. ``loss_mask`` (0/1 per token, same shape as
    ``chunks``) restricts the cross-entropy targets. ``quiet=False``: progress lines on stderr
    (:func:`iclr26_common.progress.progress`).
    """
    from iclr26_common.progress import progress

    if not chunks:
        raise LMError("no training chunks")
    data = torch.as_tensor([list(c) for c in chunks], dtype=torch.long)
    masks = torch.ones_like(data) if loss_mask is None else torch.as_tensor(loss_mask)
    if masks.shape != data.shape:
        raise LMError(f"loss_mask shape {tuple(masks.shape)} != chunks shape {tuple(data.shape)}")
    device = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise LMError("the model has no trainable parameters")
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, betas=(0.9, 0.95))

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    gen = torch.Generator().manual_seed(seed)
    log = TrainLog()
    start = time.perf_counter()
    model.train()
    for _ in progress(range(steps), description="training steps", quiet=quiet):
        idx = torch.randint(0, len(data), (min(batch_size, len(data)),), generator=gen)
        ids, mask = data[idx].to(device), masks[idx].to(device)
        attn = torch.ones_like(ids)
        out = model(input_ids=ids, attention_mask=attn, output_hidden_states=extra_loss is not None)
        loss = causal_lm_loss(out.logits, ids, mask)
        log.losses.append(float(loss.detach()))
        if extra_loss is not None:
            term, logs = extra_loss(out, ids, attn)
            loss = loss + term
            log.extras.append(logs)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
    model.eval()
    log.wall_s = time.perf_counter() - start
    return log
