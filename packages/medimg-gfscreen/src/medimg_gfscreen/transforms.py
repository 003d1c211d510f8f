"""MONAI preprocessing and augmentation (upstream ``utils/data_utils.py`` order).

LoadImaged -> EnsureChannelFirstd -> Orientationd(RAS) -> Spacingd(1, 1, 3 mm) -> label map ->
ScaleIntensityRanged(HU window -> [0, 1], clipped) -> CropForegroundd(allow_smaller) ->
SpatialPadd(roi); training adds RandCropByPosNegLabeld(pos=1, neg=1, num_samples), flips
(p=0.2 per axis), RandRotate90 (p=0.2) and RandShiftIntensity (offsets 0.1, p=0.1).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from monai.transforms import Transform

from medimg_gfscreen.constants import HU_WINDOWS, SPACING_MM
from medimg_gfscreen.io import GFScreenFormatError

__all__ = ["LabelMapd", "hu_window", "infer_transforms", "train_transforms", "val_transforms"]


def hu_window(region: str | Sequence[float]) -> tuple[float, float]:
    """``'abdomen'`` / ``'chest'`` or an explicit ``(a_min, a_max)`` in HU."""
    if isinstance(region, str):
        if region not in HU_WINDOWS:
            raise GFScreenFormatError(
                f"unknown region {region!r}; known: {', '.join(HU_WINDOWS)} or [a_min, a_max]"
            )
        return HU_WINDOWS[region]
    a_min, a_max = (float(v) for v in region)
    if not a_min < a_max:
        raise GFScreenFormatError(f"HU window {region}: need a_min < a_max")
    return a_min, a_max


class LabelMapd(Transform):
    """Maps label values to {0, 1} with ``mapping`` (e.g. MSD ``{1: 0, 2: 1}``); 0 stays 0.

    A value that is neither 0 nor a key of ``mapping`` is an error naming the case: labels are
    never dropped silently. A MONAI ``Transform`` (deterministic), so ``CacheDataset`` caches it.
    """

    def __init__(self, key: str, mapping: Mapping[int, int]) -> None:
        self.key = key
        self.mapping = {int(k): int(v) for k, v in mapping.items()}

    def __call__(self, data: Mapping[Hashable, Any]) -> dict[Hashable, Any]:
        d = dict(data)
        label = d[self.key]
        values = torch.unique(torch.as_tensor(label)).round().long().tolist()
        unknown = sorted(set(values) - set(self.mapping) - {0})
        if unknown:
            case = d.get("name") or d.get(f"{self.key}_meta_dict", {}).get("filename_or_obj", "?")
            raise GFScreenFormatError(
                f"case {case!r}: label values {unknown} are not in the label map "
                f"{self.mapping} (field 'label_map')"
            )
        out = torch.zeros_like(torch.as_tensor(label))
        for src, dst in self.mapping.items():
            if dst:
                out[torch.as_tensor(label).round() == src] = dst
        if hasattr(label, "copy_meta_from"):
            from monai.data import MetaTensor

            out = MetaTensor(out, meta=label.meta, applied_operations=label.applied_operations)
        d[self.key] = out
        return d


def _base(
    keys: list[str],
    region: str | Sequence[float],
    roi_size: Sequence[int],
    label_map: Mapping[int, int] | None,
    spacing: Sequence[float] = SPACING_MM,
    crop_foreground: bool = True,
) -> list:
    from monai import transforms as T

    a_min, a_max = hu_window(region)
    modes = ["bilinear", "nearest"][: len(keys)]
    steps: list = [
        T.LoadImaged(keys=keys, image_only=True),
        T.EnsureChannelFirstd(keys=keys),
        T.Orientationd(keys=keys, axcodes="RAS", labels=(("L", "R"), ("P", "A"), ("I", "S"))),
        T.Spacingd(keys=keys, pixdim=tuple(spacing), mode=modes),
    ]
    if "label" in keys:
        steps.append(LabelMapd("label", label_map or {1: 1}))
    steps.append(
        T.ScaleIntensityRanged(
            keys=["image"], a_min=a_min, a_max=a_max, b_min=0.0, b_max=1.0, clip=True
        )
    )
    if crop_foreground:
        steps.append(T.CropForegroundd(keys=keys, source_key="image", allow_smaller=True))
    steps.append(T.SpatialPadd(keys=keys, spatial_size=tuple(roi_size)))
    return steps


def train_transforms(
    region: str | Sequence[float],
    roi_size: Sequence[int],
    num_samples: int = 4,
    label_map: Mapping[int, int] | None = None,
    spacing: Sequence[float] = SPACING_MM,
):
    """Deterministic part + random sub-volumes and augmentation; one item -> ``num_samples``."""
    from monai import transforms as T

    keys = ["image", "label"]
    return T.Compose(
        [
            *_base(keys, region, roi_size, label_map, spacing),
            # foreground / background voxel indices once, in the cached deterministic part
            T.FgBgToIndicesd(keys="label", image_key="image", image_threshold=0),
            T.RandCropByPosNegLabeld(
                keys=keys,
                label_key="label",
                spatial_size=tuple(roi_size),
                pos=1,
                neg=1,
                num_samples=num_samples,
                fg_indices_key="label_fg_indices",
                bg_indices_key="label_bg_indices",
            ),
            T.RandFlipd(keys=keys, prob=0.2, spatial_axis=0),
            T.RandFlipd(keys=keys, prob=0.2, spatial_axis=1),
            T.RandFlipd(keys=keys, prob=0.2, spatial_axis=2),
            T.RandRotate90d(keys=keys, prob=0.2, max_k=3),
            T.RandShiftIntensityd(keys=["image"], offsets=0.1, prob=0.1),
            T.DeleteItemsd(keys=["label_fg_indices", "label_bg_indices"]),
            T.ToTensord(keys=keys, track_meta=False),
        ]
    )


def val_transforms(
    region: str | Sequence[float],
    roi_size: Sequence[int],
    label_map: Mapping[int, int] | None = None,
    spacing: Sequence[float] = SPACING_MM,
):
    """Whole preprocessed volumes with labels (validation / test)."""
    from monai import transforms as T

    keys = ["image", "label"]
    return T.Compose([*_base(keys, region, roi_size, label_map, spacing)])


def infer_transforms(
    region: str | Sequence[float],
    roi_size: Sequence[int],
    spacing: Sequence[float] = SPACING_MM,
):
    """Image only, without the foreground crop, so the prediction can be inverted onto the input
    grid (``monai.transforms.Invertd``)."""
    from monai import transforms as T

    return T.Compose(_base(["image"], region, roi_size, None, spacing, crop_foreground=False))


def as_numpy(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
