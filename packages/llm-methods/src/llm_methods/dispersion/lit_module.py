"""LightningModule: a tiny Llama trained with the push-away objective L = L_CE + λ·(−d_avg)."""

from __future__ import annotations

import math
from typing import Any

import lightning as L
import torch

from llm_methods.dispersion.model import PushAwayLoss
from llm_methods.lm.train import causal_lm_loss
from llm_methods.zoo.models import tiny_llama

__all__ = ["PushAwayLM"]


class PushAwayLM(L.LightningModule):
    """Args: ``vocab_size`` (linked from the data module), Llama size, ``lam`` (λ), ``mode``
    (``single`` | ``cross``), ``scope`` (``sequence`` | ``batch``), optimiser settings.

    Logs ``train/ce``, ``train/d_avg``, ``val/loss``, ``val/ppl``, ``val/d`` (mean
    within-sequence last-layer D on validation chunks).
    """

    def __init__(
        self,
        vocab_size: int = 512,
        n_layers: int = 2,
        hidden: int = 64,
        heads: int = 4,
        max_len: int = 256,
        lam: float = 0.1,
        mode: str = "single",
        scope: str = "sequence",
        lr: float = 3e-3,
        weight_decay: float = 0.01,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model = tiny_llama(vocab_size, n_layers, hidden, heads, max_len=max_len, seed=seed)
        self.model.train()
        self.pushaway = PushAwayLoss(lam, mode, scope)

    def _forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, Any]:
        ids = batch["input_ids"]
        mask = torch.ones_like(ids)
        out = self.model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        return causal_lm_loss(out.logits, ids, mask), mask, out

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        ce, mask, out = self._forward(batch)
        term, d = self.pushaway(out.hidden_states[-1], mask, batch.get("domain"))
        self.log_dict({"train/ce": ce, "train/d_avg": d}, prog_bar=True)
        return ce + term

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        from llm_methods.dispersion.metrics import dispersion

        ce, mask, out = self._forward(batch)
        d = dispersion(out.hidden_states[-1], mask).mean()
        self.log_dict({"val/loss": ce, "val/d": d}, prog_bar=True, sync_dist=True)

    def on_validation_epoch_end(self) -> None:
        loss = self.trainer.callback_metrics.get("val/loss")
        if loss is not None:
            self.log("val/ppl", math.exp(float(loss)), sync_dist=True)

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        ce, _, _ = self._forward(batch)
        self.log("test/loss", ce, sync_dist=True)

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(
            self.parameters(),
            lr=self.hparams.lr,
            weight_decay=self.hparams.weight_decay,
            betas=(0.9, 0.95),
        )
