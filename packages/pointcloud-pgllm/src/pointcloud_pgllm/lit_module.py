"""LightningModule training the PointNet++-style encoder (pluggable encoder option 2)."""

from __future__ import annotations

import lightning as L
import torch
from torch import nn

from pointcloud_pgllm.model import PointNet2Encoder

__all__ = ["PointCloudClassifier"]


class PointCloudClassifier(L.LightningModule):
    """``PointNet2Encoder`` + a linear head, cross-entropy on class labels. After training, the
    encoder's ``[B, widths[-1]]`` features feed the PGLLM graph (``--encoder RUN.ckpt``).
    Training augmentation: random anisotropic scaling (0.8-1.25) and Gaussian jitter (0.01)."""

    def __init__(
        self,
        num_classes: int = 13,
        class_names: list[str] | None = None,
        widths: tuple[int, ...] = (64, 128, 256),
        k: int = 16,
        n_centres: tuple[int, ...] = (256, 64, 16),
        lr: float = 1e-3,
        weight_decay: float = 1e-4,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.encoder = PointNet2Encoder(tuple(widths), k, tuple(n_centres))
        self.head = nn.Linear(self.encoder.out_dim, num_classes)

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, num_classes]`` of clouds ``[B, N, 3]``."""
        return self.head(self.encoder(points))

    def _step(self, batch: tuple[torch.Tensor, torch.Tensor], stage: str) -> torch.Tensor:
        points, labels = batch
        if stage == "train":
            points = points * torch.empty(points.shape[0], 1, 3, device=points.device).uniform_(
                0.8, 1.25
            )
            points = points + 0.01 * torch.randn_like(points)
        logits = self(points)
        loss = nn.functional.cross_entropy(logits, labels)
        acc = (logits.argmax(-1) == labels).float().mean()
        sync = stage != "train"  # epoch-level val/test means over all ranks under DDP
        self.log(f"{stage}_loss", loss, prog_bar=True, batch_size=len(labels), sync_dist=sync)
        self.log(f"{stage}_acc", acc, prog_bar=True, batch_size=len(labels), sync_dist=sync)
        return loss

    def training_step(self, batch, batch_idx):
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):
        return self._step(batch, "val")

    def test_step(self, batch, batch_idx):
        return self._step(batch, "test")

    def predict_step(self, batch, batch_idx):
        return {"probs": torch.softmax(self(batch[0]), dim=-1), "features": self.encoder(batch[0])}

    def configure_optimizers(self):
        return torch.optim.AdamW(
            self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay
        )
