"""``GFScreenModule``: joint Focus + Glance training with the GF-Screen RL objective.

Per step (manual optimisation, two AdamW optimizers as upstream): on the ``N = batch_size x
num_samples`` sub-volumes ``x [N, 1, X, Y, Z]`` with labels ``y``,

    L = DiceCE(Focus(x), y) + 0.1 * balancedCE(Glance(x), has_lesion(y)) + L_RL,

L_RL = PPO-clip + KL of the Glance policy against a frozen copy (refreshed every
``objective.update_epochs`` epochs), with group-relative advantages of the Focus reward
(detection or Dice) computed per CT (``objective.group_by: case``, the paper) or over the whole
batch (``batch``, upstream). The segmentation optimizer follows a linear-warmup cosine schedule
over all training steps (upstream: warm-up ``warmup_epochs x len(loader)`` steps, cosine to
``max_epochs x len(loader)``), stepped once per batch; upstream also steps it once more per
epoch, which we do not.
Validation / test run glance-then-focus inference on whole volumes; test also runs the
Focus-everywhere sliding window for comparison. Settings: :mod:`medimg_gfscreen.settings`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import lightning as L
import torch

from medimg_gfscreen.constants import GLANCE_LOSS_WEIGHT, PAPER_ROI, SPACING_MM
from medimg_gfscreen.inference import glance_focus_inference, sliding_window_focus
from medimg_gfscreen.metrics import case_metrics
from medimg_gfscreen.model import (
    REWARDS,
    Glance,
    build_focus,
    glance_ce_loss,
    glance_labels,
    group_advantages,
    rl_loss,
)
from medimg_gfscreen.settings import (
    DEFAULT_FOCUS,
    DEFAULT_GLANCE,
    DEFAULT_INFERENCE,
    DEFAULT_OBJECTIVE,
    DEFAULT_OPTIM,
    FocusSettings,
    GlanceSettings,
    InferenceSettings,
    ObjectiveSettings,
    OptimSettings,
    plain_hparams,
)

__all__ = ["GFScreenModule", "gfscreen_losses", "schedule_steps"]


def gfscreen_losses(
    focus: torch.nn.Module,
    glance: torch.nn.Module,
    old_glance: torch.nn.Module,
    image: torch.Tensor,
    label: torch.Tensor,
    groups: torch.Tensor | None,
    reward: str = "detection",
    rl_weight: float = 1.0,
    glance_weight: float = GLANCE_LOSS_WEIGHT,
    train_focus: bool = True,
    seg_loss_fn: Any = None,
) -> dict[str, torch.Tensor]:
    """The GF-Screen training objective on sub-volumes ``image / label [N, 1, X, Y, Z]``.

    Returns ``total`` (to back-propagate) and its parts. ``rl_weight = 0`` is the CE-only Glance
    ablation; ``train_focus = False`` keeps Focus fixed (its seg loss is not computed).
    """
    if reward not in REWARDS:
        raise ValueError(f"unknown reward {reward!r}; known: {', '.join(REWARDS)}")
    logits = glance(image)
    if train_focus:
        seg = focus(image)
        seg_loss = seg_loss_fn(seg, label)
    else:
        with torch.no_grad():
            seg = focus(image)
        seg_loss = torch.zeros((), device=image.device)
    target = glance_labels(label)
    gl_loss = glance_ce_loss(logits, target)
    with torch.no_grad():
        old_glance.eval()
        old_logits = old_glance(image)
        rewards = REWARDS[reward](seg.detach(), label)
        advantages = group_advantages(rewards, groups)
    rl, parts = rl_loss(logits, old_logits, advantages)
    total = seg_loss + glance_weight * gl_loss + rl_weight * rl
    return {
        "total": total,
        "seg": seg_loss.detach(),
        "glance_ce": gl_loss.detach(),
        "rl": rl.detach(),
        "kl": parts["kl"],
        "reward": rewards.mean(),
    }


def schedule_steps(
    steps_per_epoch: int, max_epochs: int, warmup_epochs: int, cosine_epochs: int | None
) -> tuple[int, int]:
    """(warm-up steps, cosine horizon in steps) of the segmentation learning rate (upstream
    ``LinearWarmupCosineAnnealingLR(warmup_epochs x len(loader), max_epochs x len(loader))``):
    the horizon is ``cosine_epochs`` (default ``max_epochs``) epochs of ``steps_per_epoch``."""
    horizon = max(int(cosine_epochs or max_epochs), 1) * steps_per_epoch
    warmup = min(int(warmup_epochs) * steps_per_epoch, horizon - 1)
    return max(warmup, 0), max(horizon, 1)


class GFScreenModule(L.LightningModule):
    """Focus + Glance, trained jointly with the GF-Screen objective (defaults = the paper's /
    upstream's).

    Args:
        focus, glance: the networks (:class:`~medimg_gfscreen.settings.FocusSettings`,
            :class:`~medimg_gfscreen.settings.GlanceSettings`).
        objective: reward, advantage groups, loss weights, old-policy refresh
            (:class:`~medimg_gfscreen.settings.ObjectiveSettings`).
        optim: AdamW and the warm-up + cosine schedule of the segmentation learning rate
            (:class:`~medimg_gfscreen.settings.OptimSettings`; a run shorter than
            ``cosine_epochs`` trains the first epochs of that schedule).
        inference: tiling, the Glance gate and the metrics' surface tolerance
            (:class:`~medimg_gfscreen.settings.InferenceSettings`).
        roi_size, num_samples, spacing: sub-volume ``[X, Y, Z]``, sub-volumes per CT and voxel
            spacing (mm), linked from the data module by the CLI.

    ``hparams`` hold every group as a plain dict (what a checkpoint stores, readable with
    ``weights_only=True``); the settings themselves are the attributes ``objective``, ``optim``
    and ``inference`` (and ``focus_settings`` / ``glance_settings``: ``focus`` and ``glance``
    are the networks).
    """

    def __init__(
        self,
        focus: FocusSettings = DEFAULT_FOCUS,
        glance: GlanceSettings = DEFAULT_GLANCE,
        objective: ObjectiveSettings = DEFAULT_OBJECTIVE,
        optim: OptimSettings = DEFAULT_OPTIM,
        inference: InferenceSettings = DEFAULT_INFERENCE,
        roi_size: Sequence[int] = PAPER_ROI,
        num_samples: int = 4,
        spacing: Sequence[float] = SPACING_MM,
    ) -> None:
        super().__init__()
        self.focus_settings, self.glance_settings = focus, glance
        self.objective, self.optim, self.inference = objective, optim, inference
        self.save_hyperparameters()  # under LightningCLI: the parsed config (+ _class_path)
        self.save_hyperparameters(plain_hparams(self.hparams))
        self.automatic_optimization = False
        self.focus = build_focus(
            focus.arch,
            focus.feature_size,
            focus.swin_depths,
            focus.unet_channels,
            focus.patch_merging,
        )
        self.glance = Glance(
            glance.backbone, glance.widths, conv1_stride=glance.conv1_stride, norm=glance.norm
        )
        self.old_glance = copy.deepcopy(self.glance).requires_grad_(False).eval()
        from monai.losses import DiceCELoss

        self.seg_loss = DiceCELoss(to_onehot_y=True, softmax=True)
        self.roi_size = tuple(int(v) for v in roi_size)

    # ----- training -----
    def groups(self, n: int) -> torch.Tensor | None:
        if self.objective.group_by == "batch":
            return None
        return torch.arange(n, device=self.device) // max(int(self.hparams.num_samples), 1)

    def on_train_epoch_start(self) -> None:
        if self.current_epoch % self.objective.update_epochs == 0:
            self.old_glance.load_state_dict(self.glance.state_dict())
        self.old_glance.eval()

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        image, label = batch["image"], batch["label"]
        opt_seg, opt_glance = self.optimizers()
        losses = gfscreen_losses(
            self.focus,
            self.glance,
            self.old_glance,
            image,
            label,
            self.groups(image.shape[0]),
            reward=self.objective.reward,
            rl_weight=self.objective.rl_weight,
            glance_weight=self.objective.glance_weight,
            train_focus=self.objective.train_focus,
            seg_loss_fn=self.seg_loss,
        )
        opt_seg.zero_grad()
        opt_glance.zero_grad()
        self.manual_backward(losses["total"])
        if self.objective.train_focus:
            opt_seg.step()
        opt_glance.step()
        scheduler = self.lr_schedulers()
        if scheduler is not None and self.objective.train_focus:
            scheduler.step()
        self.log_dict(
            {f"train/{k}": v for k, v in losses.items()},
            prog_bar=False,
            batch_size=image.shape[0],
            on_step=True,
            on_epoch=True,
            sync_dist=True,  # epoch means over every DDP rank's sub-volumes
        )
        return losses["total"].detach()

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        from monai.optimizers import WarmupCosineSchedule

        kw = {"lr": self.optim.lr, "weight_decay": self.optim.weight_decay}
        opt_seg = torch.optim.AdamW(self.focus.parameters(), **kw)
        opt_glance = torch.optim.AdamW(self.glance.parameters(), **kw)
        total = max(int(self.trainer.estimated_stepping_batches), 1)
        epochs = max(int(self.trainer.max_epochs or 1), 1)
        per_epoch = max(total // epochs, 1)
        warmup, horizon = schedule_steps(
            per_epoch, epochs, self.optim.warmup_epochs, self.optim.cosine_epochs
        )
        schedule = WarmupCosineSchedule(opt_seg, warmup_steps=warmup, t_total=horizon)
        return [opt_seg, opt_glance], [schedule]

    # ----- evaluation -----
    def screen(
        self,
        image: torch.Tensor,
        threshold: float | None = None,
        progress: bool = False,
        keep_probs: bool = False,
        device: torch.device | str | None = None,
    ):
        """Glance-then-Focus on one preprocessed volume ``[1, 1, X, Y, Z]`` -> GateResult (tiles
        run on this module's device, the whole-volume buffers on ``device``, default the
        image's)."""
        return glance_focus_inference(
            image,
            self.glance.eval(),
            self.focus.eval(),
            self.roi_size,
            overlap=self.inference.overlap,
            threshold=self.inference.threshold if threshold is None else threshold,
            sw_batch_size=self.inference.sw_batch_size,
            progress=progress,
            sw_device=self.device,
            device=device,
            keep_probs=keep_probs,
        )

    def _evaluate(self, batch: dict[str, Any], prefix: str, compare: bool) -> dict[str, Any]:
        image, label = batch["image"], batch["label"]
        name = str(batch.get("name", ["case"])[0])
        result = self.screen(image, device="cpu")  # whole-volume buffers on the CPU
        spacing = self.hparams.spacing
        tol = self.inference.nsd_tolerance_mm
        m = case_metrics(name, result.mask, label[0, 0], spacing, tol, result.selection_rate)
        values = {
            f"{prefix}/dsc": m.dsc,
            f"{prefix}/selection_rate": m.selection_rate,
            f"{prefix}/lesions": float(m.lesions),
            f"{prefix}/detected": float(m.detected),
        }
        if compare:
            probs = sliding_window_focus(
                image,
                self.focus,
                self.roi_size,
                self.inference.overlap,
                self.inference.sw_batch_size,
                device="cpu",
            )
            s = case_metrics(name, probs[0].argmax(0), label[0, 0], spacing, tol)
            values.update({f"{prefix}/sw_dsc": s.dsc, f"{prefix}/sw_detected": float(s.detected)})
        self.log_dict(values, batch_size=1, on_epoch=True, reduce_fx="mean", sync_dist=True)
        row = {
            "case": name,
            "dsc": m.dsc,
            "nsd": m.nsd,
            "lesions": m.lesions,
            "detected": m.detected,
            "pred_voxels": m.pred_voxels,
            "healthy": int(m.healthy),
            "selection_rate": m.selection_rate,
        }
        if compare:
            row.update({"sw_dsc": s.dsc, "sw_detected": s.detected})
        return row

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        self._evaluate(batch, "val", compare=False)

    def on_test_epoch_start(self) -> None:
        self._test_cases: list[dict[str, Any]] = []

    def test_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        row = self._evaluate(batch, "test", compare=True)
        if not getattr(self.trainer, "sanity_checking", False):
            self._test_cases = [*getattr(self, "_test_cases", []), row]

    def on_test_epoch_end(self) -> None:
        """Writes the per-case metrics behind the logged means: ``test_cases.csv`` (case, dsc,
        nsd, lesions, detected, pred_voxels, healthy, selection_rate, sw_dsc, sw_detected) into
        the run's log folder (``lightning_logs/version_N/``, or ``default_root_dir`` without a
        logger), never over an existing file (``test_cases-1.csv``, ...); one file per process
        (``test_cases.rank{R}.csv``) in a multi-process run."""
        import os
        from pathlib import Path

        trainer = self.trainer
        log_dir = trainer.log_dir  # on every process (Lightning broadcasts it)
        rows = getattr(self, "_test_cases", [])
        if not rows or not isinstance(log_dir, str | os.PathLike) or not str(log_dir):
            return  # nothing tested, or no run folder (fast_dev_run's stand-in logger)

        from iclr26_common.lightning import free_config_path
        from iclr26_common.outputs import write_text
        from medimg_gfscreen.screen import _csv_text

        name = (
            "test_cases.csv"
            if trainer.world_size <= 1
            else (f"test_cases.rank{trainer.global_rank}.csv")
        )
        path = free_config_path(Path(log_dir), name)
        header = list(rows[0])

        def cell(value: Any) -> Any:
            return f"{value:.4f}" if isinstance(value, float) else value

        write_text(path, _csv_text(header, [[cell(r.get(k, "")) for k in header] for r in rows]))
        print(f"wrote {path} ({len(rows)} cases)")

    def predict_step(self, batch: dict[str, Any], batch_idx: int) -> dict[str, Any]:
        """Masks ``[X, Y, Z]`` (uint8, on the CPU, preprocessed grid) of a batch of images without
        labels; :class:`medimg_gfscreen.screen.MaskWriter` maps them back and writes them."""
        masks, rates, selected, tiles = [], [], [], []
        for image in batch["image"]:
            result = self.screen(image[None], device="cpu")
            masks.append(result.mask)
            rates.append(result.selection_rate)
            selected.append(result.n_selected)
            tiles.append(result.n_tiles)
        return {
            "names": list(batch.get("name", [])),
            "masks": masks,
            "selection_rates": rates,
            "n_selected": selected,
            "n_tiles": tiles,
        }

    def export_weights(self, preprocessing: dict[str, Any] | None = None) -> dict[str, Any]:
        """Focus + Glance weights, the architecture and the training's preprocessing
        (``{region, prenormalized}`` of the data module, which ``screen`` then applies), loadable
        with ``weights_only=True``."""
        return {
            "focus": self.focus.state_dict(),
            "glance": self.glance.state_dict(),
            "hparams": plain_hparams(self.hparams),
            "preprocessing": plain_hparams(preprocessing or {}),
        }
