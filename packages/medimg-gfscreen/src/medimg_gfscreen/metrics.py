"""Screening metrics on binary masks ``[X, Y, Z]`` (uint8 / bool tensors or arrays).

* DSC: MONAI ``DiceMetric(include_background=False, ignore_empty=False)``: an empty label with an
  empty prediction scores 1, an empty label with any predicted voxel scores 0 (so on healthy
  cases DSC is 1 exactly when there is no false positive).
* NSD: MONAI ``SurfaceDiceMetric`` at ``tolerance_mm`` with the voxel spacing; NaN when the label
  or the prediction is empty (reported over lesion cases only).
* Lesion recall: ground-truth lesions are 26-connected components (scipy ``ndimage.label``); a
  lesion is detected when any predicted foreground voxel overlaps it.
* False positives on healthy cases: predicted foreground volume (voxels, ml); a healthy case is a
  false-positive case when it exceeds ``fp_min_voxels``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy import ndimage

__all__ = ["CaseMetrics", "case_metrics", "dice", "lesion_hits", "nsd", "summarize"]

FP_MIN_VOXELS = 10  # a healthy case with more predicted voxels counts as a false-positive case


def _np(mask) -> np.ndarray:
    if isinstance(mask, torch.Tensor):
        mask = mask.detach().cpu().numpy()
    return np.asarray(mask).astype(bool)


def _onehot(mask: np.ndarray) -> torch.Tensor:
    m = torch.from_numpy(mask.astype(np.float32))[None, None]
    return torch.cat([1 - m, m], dim=1)


def dice(pred, label) -> float:
    """MONAI DiceMetric of the lesion class (background excluded; empty label convention above)."""
    from monai.metrics import DiceMetric

    metric = DiceMetric(include_background=False, reduction="none", ignore_empty=False)
    return float(metric(_onehot(_np(pred)), _onehot(_np(label)))[0, 0])


def nsd(pred, label, spacing: Sequence[float], tolerance_mm: float = 2.0) -> float:
    """MONAI SurfaceDiceMetric at ``tolerance_mm``; NaN if the label or the prediction is empty."""
    from monai.metrics import SurfaceDiceMetric

    p, g = _np(pred), _np(label)
    if not p.any() or not g.any():
        return float("nan")
    import warnings

    metric = SurfaceDiceMetric(class_thresholds=[tolerance_mm], include_background=False)
    with warnings.catch_warnings():  # MONAI's own deprecated internal argument
        warnings.simplefilter("ignore", FutureWarning)
        value = metric(_onehot(p), _onehot(g), spacing=list(spacing))
    return float(value[0, 0])


def lesion_hits(pred, label) -> tuple[int, int]:
    """(detected lesions, ground-truth lesions): 26-connected components of the label."""
    g = _np(label)
    components, n = ndimage.label(g, structure=np.ones((3, 3, 3)))
    if n == 0:
        return 0, 0
    p = _np(pred)
    hit_ids = np.unique(components[p & g])
    return int((hit_ids > 0).sum()), int(n)


@dataclass
class CaseMetrics:
    name: str
    dsc: float
    nsd: float
    detected: int
    lesions: int
    pred_voxels: int
    healthy: bool
    selection_rate: float = 1.0


def case_metrics(
    name: str,
    pred,
    label,
    spacing: Sequence[float],
    tolerance_mm: float = 2.0,
    selection_rate: float = 1.0,
) -> CaseMetrics:
    detected, lesions = lesion_hits(pred, label)
    return CaseMetrics(
        name=name,
        dsc=dice(pred, label),
        nsd=nsd(pred, label, spacing, tolerance_mm),
        detected=detected,
        lesions=lesions,
        pred_voxels=int(_np(pred).sum()),
        healthy=lesions == 0,
        selection_rate=selection_rate,
    )


def summarize(
    cases: Sequence[CaseMetrics], voxel_ml: float, fp_min_voxels: int = FP_MIN_VOXELS
) -> dict[str, float]:
    """Pooled numbers over cases: lesion recall, DSC (all / lesion cases), NSD (lesion cases),
    healthy-case false positives, mean selection rate."""
    lesion_cases = [c for c in cases if not c.healthy]
    healthy = [c for c in cases if c.healthy]
    total = sum(c.lesions for c in cases)

    def mean(values: list[float]) -> float:
        values = [v for v in values if not np.isnan(v)]
        return float(np.mean(values)) if values else float("nan")

    return {
        "lesion_recall": sum(c.detected for c in cases) / total if total else float("nan"),
        "case_recall": mean([float(c.detected > 0) for c in lesion_cases]),
        "dsc_all": mean([c.dsc for c in cases]),
        "dsc_lesion_cases": mean([c.dsc for c in lesion_cases]),
        "nsd_lesion_cases": mean([c.nsd for c in lesion_cases]),
        "fp_voxels_healthy": mean([float(c.pred_voxels) for c in healthy]),
        "fp_ml_healthy": mean([c.pred_voxels * voxel_ml for c in healthy]),
        "fp_case_rate_healthy": mean([float(c.pred_voxels > fp_min_voxels) for c in healthy]),
        "selection_rate": mean([c.selection_rate for c in cases]),
        "n_cases": float(len(cases)),
        "n_lesions": float(total),
    }
