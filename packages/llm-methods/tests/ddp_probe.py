"""A Lightning callback for ``test_ddp.py`` (added with ``--trainer.callbacks+=ddp_probe.DDPProbe``
and this folder on ``PYTHONPATH``): per rank, a checksum of the trainable parameters at the end
of fit (replicas in sync?) and a digest of the first training batch (ranks on different data?);
rank 0 writes them to ``ddp_probe.json`` in the working directory."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import lightning as L
import torch


def _digest(obj: Any) -> str:
    if isinstance(obj, torch.Tensor):
        return hashlib.sha1(obj.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:12]
    if isinstance(obj, dict):
        return _digest([_digest(obj[k]) for k in sorted(obj)])
    if isinstance(obj, list | tuple):
        return hashlib.sha1("|".join(_digest(x) for x in obj).encode()).hexdigest()[:12]
    return hashlib.sha1(repr(obj).encode()).hexdigest()[:12]


class DDPProbe(L.Callback):
    def __init__(self) -> None:
        self.first_batch: str | None = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:  # type: ignore[no-untyped-def]
        if self.first_batch is None:
            self.first_batch = _digest(batch)

    def on_train_end(self, trainer, pl_module) -> None:  # type: ignore[no-untyped-def]
        params = [
            p.detach().double().sum().item() for p in pl_module.parameters() if p.requires_grad
        ]
        mine = {
            "rank": trainer.global_rank,
            "checksum": sum(params),
            "first_batch": self.first_batch,
            "steps": trainer.global_step,
        }
        everyone = [None] * trainer.world_size
        if trainer.world_size > 1:
            torch.distributed.all_gather_object(everyone, mine)
        else:
            everyone = [mine]
        if trainer.is_global_zero:
            Path("ddp_probe.json").write_text(json.dumps(everyone))
