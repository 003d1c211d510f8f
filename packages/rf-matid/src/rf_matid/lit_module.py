"""LightningModule that trains one :mod:`rf_matid.model` baseline with upstream's recipe.

Upstream recipe (``config_hub/freq_domain/all_classes/freq_protocol_1/split_s1/mod0/<Model>/
config.yaml``): cross-entropy, AdamW, OneCycleLR (``max_lr`` 1e-3, torch defaults otherwise) for
four baselines and StepLR(30, 0.3) for ResNet50. Upstream steps OneCycleLR once per *epoch* although
it is sized for ``steps_per_epoch · epochs`` steps, so its learning rate never leaves the start of
the warm-up (≈ ``max_lr / 25``); here OneCycleLR is stepped per optimizer step and sized by
``trainer.estimated_stepping_batches``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import lightning as L
import torch
from torch.nn import functional as F
from torchmetrics.classification import (
    MulticlassAccuracy,
    MulticlassConfusionMatrix,
    MulticlassF1Score,
)

from rf_matid.model import MODELS, build_model, count_parameters

__all__ = ["RFMatIDClassifier"]

SchedulerName = Literal["onecycle", "step", "none"]


def _unpack(batch: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(x, y)`` from a ``{"x", "y"}`` dict, an ``(x, y)`` pair or a bare ``x`` tensor."""
    if isinstance(batch, Mapping):
        if "x" not in batch:
            raise KeyError(f"batch dict needs an 'x' entry; got keys {sorted(batch)}")
        return batch["x"], batch.get("y")
    if isinstance(batch, torch.Tensor):
        return batch, None
    if isinstance(batch, list | tuple) and len(batch) in (1, 2):
        return batch[0], (batch[1] if len(batch) == 2 else None)
    raise TypeError(
        f"batch must be a dict {{'x', 'y'}}, an (x, y) pair or a tensor; got {type(batch).__name__}"
    )


class RFMatIDClassifier(L.LightningModule):
    """Classifier over whitened spectra ``x`` float ``[B, in_channels, L]``, labels int64 ``[B]``.

    Args:
        arch: key of :data:`rf_matid.model.MODELS`.
        num_classes, seq_len, in_channels: passed to the model (``seq_len`` matters for the MLP).
        arch_kwargs: architecture hyperparameters (see each model's constructor).
        lr: peak learning rate of OneCycleLR (upstream ``max_lr``; the schedule starts at
            ``lr / div_factor`` and ends at ``lr / (div_factor · final_div_factor)``), initial rate
            of StepLR, constant rate with ``scheduler="none"``.
        weight_decay: AdamW weight decay.
        pct_start, div_factor, final_div_factor: OneCycleLR (torch defaults as upstream).
        scheduler: "onecycle" (per step), "step" (StepLR per epoch, ``step_size``/``gamma``), "none".
        label_smoothing: cross-entropy label smoothing (upstream: 0).
        class_names: optional label names (length ``num_classes``), stored in the hyperparameters.

    Logs ``train/loss_step``, ``train/loss_epoch``, ``val/loss``, ``test/loss`` and per epoch
    ``{train,val,test}/acc`` (micro) and ``/macro_f1`` (torchmetrics: a class absent from both
    targets and predictions is left out of the mean, a predicted-but-absent class scores 0;
    upstream ``MCC_Metrics`` scores a never-predicted class's precision as 1).
    ``test_confusion`` (rows: true, columns: predicted) holds the last test run's counts and
    ``test_predictions`` (int64 ``[N]``) its predicted class per test sample, in the test
    loader's order (this process's samples under DDP): the per-sample scores of a test run
    without a second (predict) pass over the test set.
    """

    def __init__(
        self,
        arch: str = "transformer1d",
        num_classes: int = 16,
        seq_len: int = 2048,
        in_channels: int = 2,
        arch_kwargs: dict[str, Any] | None = None,
        lr: float = 1e-3,
        weight_decay: float = 1e-3,
        pct_start: float = 0.3,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        scheduler: SchedulerName = "onecycle",
        step_size: int = 30,
        gamma: float = 0.3,
        label_smoothing: float = 0.0,
        class_names: list[str] | None = None,
    ) -> None:
        super().__init__()
        if arch not in MODELS:
            raise ValueError(f"unknown arch {arch!r}; choose one of {sorted(MODELS)}")
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr!r}")
        if scheduler not in ("onecycle", "step", "none"):
            raise ValueError(f"scheduler must be 'onecycle', 'step' or 'none', got {scheduler!r}")
        if class_names is not None and len(class_names) != num_classes:
            raise ValueError(
                f"class_names has {len(class_names)} entries but num_classes is {num_classes}"
            )
        self.save_hyperparameters()
        self.model = build_model(
            arch,
            in_channels=in_channels,
            num_classes=num_classes,
            seq_len=seq_len,
            **(arch_kwargs or {}),
        )
        self.train_acc = MulticlassAccuracy(num_classes, average="micro")
        self.val_acc = MulticlassAccuracy(num_classes, average="micro")
        self.test_acc = MulticlassAccuracy(num_classes, average="micro")
        self.train_f1 = MulticlassF1Score(num_classes, average="macro")
        self.val_f1 = MulticlassF1Score(num_classes, average="macro")
        self.test_f1 = MulticlassF1Score(num_classes, average="macro")
        self.test_confmat = MulticlassConfusionMatrix(num_classes)
        # rows: true class, columns: predicted class; filled by the last test run
        self.test_confusion: torch.Tensor = torch.zeros(num_classes, num_classes, dtype=torch.long)
        # predicted class per sample of the last test run, in loader order; filled per batch
        self.test_predictions: torch.Tensor = torch.zeros(0, dtype=torch.long)
        self._test_batches: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def _shared_step(self, batch: Any, stage: str) -> torch.Tensor:
        x, y = _unpack(batch)
        if y is None:
            raise ValueError(f"{stage} batch has no labels 'y'")
        logits = self.model(x)
        loss = F.cross_entropy(logits, y, label_smoothing=self.hparams.label_smoothing)
        preds = logits.argmax(dim=1)
        acc: MulticlassAccuracy = getattr(self, f"{stage}_acc")
        f1: MulticlassF1Score = getattr(self, f"{stage}_f1")
        acc.update(preds, y)
        f1.update(preds, y)
        if stage == "test":
            self.test_confmat.update(preds, y)
            self._test_batches.append(preds.detach().cpu())
        batch_size = x.shape[0]
        self.log(
            f"{stage}/loss",
            loss,
            on_step=stage == "train",
            on_epoch=True,
            prog_bar=True,
            batch_size=batch_size,
            sync_dist=True,  # the epoch mean over every DDP rank (metric objects sync themselves)
        )
        # metric objects are updated (not called), so they may only be logged per epoch
        self.log(
            f"{stage}/acc",
            acc,
            on_step=False,
            on_epoch=True,
            prog_bar=stage != "train",
            batch_size=batch_size,
        )
        self.log(f"{stage}/macro_f1", f1, on_step=False, on_epoch=True, batch_size=batch_size)
        return loss

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self._shared_step(batch, "train")

    def validation_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self._shared_step(batch, "val")

    def test_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self._shared_step(batch, "test")

    def on_test_epoch_start(self) -> None:
        self.test_confmat.reset()
        self._test_batches = []

    def on_test_epoch_end(self) -> None:
        self.test_confusion = self.test_confmat.compute().detach().cpu().long()
        self.test_confmat.reset()
        batches, self._test_batches = self._test_batches, []
        self.test_predictions = (
            torch.cat(batches).long() if batches else torch.zeros(0, dtype=torch.long)
        )

    def predict_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> dict:
        x, _ = _unpack(batch)
        logits = self.model(x)
        probs = logits.softmax(dim=1)
        return {"logits": logits, "pred": logits.argmax(dim=1), "probs": probs}

    def configure_optimizers(self) -> Any:
        hp = self.hparams
        optimizer = torch.optim.AdamW(self.parameters(), lr=hp.lr, weight_decay=hp.weight_decay)
        if hp.scheduler == "none":
            return optimizer
        if hp.scheduler == "step":
            step_lr = torch.optim.lr_scheduler.StepLR(optimizer, hp.step_size, hp.gamma)
            return {
                "optimizer": optimizer,
                "lr_scheduler": {"scheduler": step_lr, "interval": "epoch"},
            }
        total_steps = self.trainer.estimated_stepping_batches
        if not 0 < total_steps < float("inf"):
            raise ValueError(
                "OneCycleLR needs a finite number of training steps; set max_epochs or max_steps "
                f"on the Trainer (estimated_stepping_batches={total_steps})"
            )
        one_cycle = torch.optim.lr_scheduler.OneCycleLR(
            optimizer,
            max_lr=hp.lr,
            total_steps=int(total_steps),
            pct_start=hp.pct_start,
            div_factor=hp.div_factor,
            final_div_factor=hp.final_div_factor,
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": one_cycle, "interval": "step"},
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Refuses a checkpoint whose class vocabulary differs from this module's (data's) one.

        Runs before the weights are loaded (``--ckpt_path``), so a different class count or
        order fails here with both vocabularies named instead of as a tensor size mismatch.
        """
        saved = checkpoint.get("hyper_parameters") or {}
        saved_names, names = saved.get("class_names"), self.hparams.get("class_names")
        saved_count = saved.get("num_classes", self.hparams.num_classes)
        if saved_count != self.hparams.num_classes or (
            saved_names is not None and names is not None and list(saved_names) != list(names)
        ):
            raise ValueError(
                f"class vocabulary mismatch: the checkpoint was trained on {saved_count} classes "
                f"{list(saved_names) if saved_names is not None else '(names not recorded)'}, the "
                f"data has {self.hparams.num_classes} classes "
                f"{list(names) if names is not None else '(names not recorded)'}"
            )

    def num_parameters(self) -> int:
        """Trainable parameters of the wrapped model (:func:`rf_matid.model.count_parameters`)."""
        return count_parameters(self.model)
