"""MONAI preprocessing and augmentation (upstream ``utils/data_utils.py`` order).

LoadImaged (:class:`ReadImaged`: a file that cannot be read is one line naming it) ->
EnsureChannelFirstd -> CheckValuesd (NaN, integer labels, CT in HU) ->
Orientationd(RAS) -> Spacingd(1, 1, 3 mm) -> label map -> ScaleIntensityRanged(HU window ->
[0, 1], clipped) -> CropForegroundd(allow_smaller) -> SpatialPadd(roi); training adds
RandCropByPosNegLabeld(pos=1, neg=1, num_samples), flips (p=0.2 per axis), RandRotate90 (p=0.2)
and RandShiftIntensity (offsets 0.1, p=0.1); ``negatives="lesion_free"`` (:class:`LesionFreeNegativesd`,
a deviation the miniature uses) draws the negative crop centres only where the whole crop holds
no lesion voxel (``"tiles"`` also draws the positive centres anywhere a crop holds a lesion
voxel). Inference (``screen``, ``predict``) applies the same
deterministic chain to the image alone, so its tiles are the tiles ``validate`` / ``test`` see.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import torch
from monai.transforms import RandomizableTrait, Transform

from medimg_gfscreen.constants import HU_AIR_MAX, HU_TISSUE_MIN, HU_WINDOWS, SPACING_MM
from medimg_gfscreen.io import GFScreenFormatError

__all__ = [
    "NEGATIVES",
    "CheckValuesd",
    "LabelMapd",
    "LesionFreeNegativesd",
    "ReadImaged",
    "hu_window",
    "infer_transforms",
    "train_transforms",
    "val_transforms",
    "value_check_transforms",
]


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


def _case(data: Mapping[Hashable, Any], key: str) -> str:
    meta = getattr(data.get(key), "meta", {}) or {}
    return str(data.get("name") or meta.get("filename_or_obj", "?"))


class ReadImaged(Transform):
    """MONAI ``LoadImaged(keys, image_only=True)``, key by key, whose read errors become one
    :class:`GFScreenFormatError` naming the case, the field and the file: a truncated or corrupt
    ``.nii.gz`` (``EOFError: Compressed file ended before the end-of-stream marker was
    reached``, a zlib error) was a ~100-line traceback through MONAI, the DataLoader and
    Lightning. Only the voxel data are read here: the headers were checked before
    (:func:`medimg_gfscreen.io.check_case`)."""

    def __init__(self, keys: Sequence[str]) -> None:
        from monai.transforms import LoadImaged

        self.keys = list(keys)
        self.loaders = {key: LoadImaged(keys=[key], image_only=True) for key in self.keys}

    def __call__(self, data: Mapping[Hashable, Any]) -> dict[Hashable, Any]:
        d = dict(data)
        for key in self.keys:
            try:
                d = dict(self.loaders[key](d))
            except Exception as error:  # nibabel / gzip / zlib raise several types
                reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
                reason = f"{type(error).__name__}: {reason}" if reason else type(error).__name__
                case = data.get("name") or "?"
                raise GFScreenFormatError(
                    f"case {case!r}: {key} {data.get(key)} cannot be read ({reason}); a "
                    f"truncated or corrupt file? (field '{key}')"
                ) from None
        return d


class CheckValuesd(Transform):
    """Voxel checks at load time (cached with the deterministic part by ``PersistentDataset``,
    so a volume is decompressed for them once, not at every start):

    * the image has no NaN / inf voxel;
    * unless ``prenormalized`` or ``check_hu=False``, the image looks like CT in Hounsfield
      units: some voxel <= ``HU_AIR_MAX`` (-200 HU: air, lung; fat is about -100 HU) and some
      voxel >= ``HU_TISSUE_MIN`` (0 HU: soft tissue). A [0, 1] image, an MR image or a CT stored
      without its rescale intercept fails; a genuine CT cropped inside the body (no air) fails
      too, and passes with ``check_hu=False``, which keeps the HU window;
    * with ``prenormalized`` the image must lie in [0, 1] (it is used without the HU window);
    * the label (if any) holds finite, non-negative integers.

    Errors are :class:`GFScreenFormatError` naming the case, the file and the field.
    """

    def __init__(
        self,
        image_key: str = "image",
        label_key: str | None = "label",
        prenormalized: bool = False,
        check_hu: bool = True,
    ) -> None:
        self.image_key, self.label_key, self.prenormalized = image_key, label_key, prenormalized
        self.check_hu = check_hu

    def __call__(self, data: Mapping[Hashable, Any]) -> dict[Hashable, Any]:
        d = dict(data)
        image = torch.as_tensor(d[self.image_key])
        case = _case(d, self.image_key)
        where = f"case {case!r}: image"
        finite = torch.isfinite(image)
        if not bool(finite.all()):
            bad = int((~finite).sum())
            raise GFScreenFormatError(f"{where} has {bad} NaN/inf voxels")
        low, high = float(image.min()), float(image.max())
        if self.prenormalized and (low < 0.0 or high > 1.0):
            raise GFScreenFormatError(
                f"{where} values lie in [{low:.4g}, {high:.4g}], not in [0, 1] as "
                "prenormalized images must (field 'prenormalized'; CT in HU: leave it off)"
            )
        looks_like_hu = low <= HU_AIR_MAX and high >= HU_TISSUE_MIN
        if not self.prenormalized and self.check_hu and not looks_like_hu:
            raise GFScreenFormatError(
                f"{where} values lie in [{low:.4g}, {high:.4g}], which does not look like CT in "
                f"Hounsfield units (expected air/lung <= {HU_AIR_MAX:g} HU and tissue >= "
                f"{HU_TISSUE_MIN:g} HU); for images already scaled to [0, 1] set "
                "prenormalized (field 'prenormalized'); for a CT in HU without air in view turn "
                "the check off (field 'check_hu', screen --no-hu-check)"
            )
        if self.label_key and self.label_key in d:
            label = torch.as_tensor(d[self.label_key])
            if (
                not bool(torch.isfinite(label).all())
                or bool((label < 0).any())
                or bool((label != torch.round(label)).any())
            ):
                raise GFScreenFormatError(
                    f"case {_case(d, self.label_key)!r}: label has non-integer, negative or NaN "
                    "values (field 'label')"
                )
        return d


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
            case = _case(d, self.key)
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
    prenormalized: bool = False,
    check_hu: bool = True,
) -> list:
    """The deterministic chain shared by training, evaluation and inference (upstream order)."""
    from monai import transforms as T

    a_min, a_max = hu_window(region)
    modes = ["bilinear", "nearest"][: len(keys)]
    steps: list = [
        ReadImaged(keys),
        T.EnsureChannelFirstd(keys=keys),
        CheckValuesd("image", "label" if "label" in keys else None, prenormalized, check_hu),
        T.Orientationd(keys=keys, axcodes="RAS", labels=(("L", "R"), ("P", "A"), ("I", "S"))),
        T.Spacingd(keys=keys, pixdim=tuple(spacing), mode=modes),
    ]
    if "label" in keys:
        steps.append(LabelMapd("label", label_map or {1: 1}))
    if not prenormalized:
        steps.append(
            T.ScaleIntensityRanged(
                keys=["image"], a_min=a_min, a_max=a_max, b_min=0.0, b_max=1.0, clip=True
            )
        )
    steps.append(T.CropForegroundd(keys=keys, source_key="image", allow_smaller=True))
    steps.append(T.SpatialPadd(keys=keys, spatial_size=tuple(roi_size)))
    return steps


#: crop centres of the pos / neg sampling: ``upstream`` (RandCropByPosNegLabeld's own: positives
#: on lesion voxels, negatives on any body voxel outside a lesion, so a negative crop may still
#: reach a lesion), ``lesion_free`` (negatives: the whole crop free of lesion; positives
#: upstream's) or ``tiles`` (negatives as ``lesion_free``; positives: any centre whose crop holds
#: a lesion voxel, so the lesion lies anywhere in the crop, as in an inference tile)
NEGATIVES = ("upstream", "lesion_free", "tiles")


class LesionFreeNegativesd(Transform, RandomizableTrait):
    """Crop centres for ``RandCropByPosNegLabeld`` (``fg_indices_key`` / ``bg_indices_key``):
    negatives on body voxels (image > 0) whose whole ``roi_size`` crop holds no lesion voxel,
    among the centres the crop needs no shift for (MONAI moves a centre near the border
    inwards, which could bring a lesion in); where no such voxel exists the negatives fall back
    to upstream's (any body voxel outside a lesion). Positives on lesion voxels, or with
    ``positives="anywhere"`` on every such centre whose crop holds a lesion voxel (fallback:
    the lesion voxels). Flat indices of the spatial grid ``[X, Y, Z]``.

    Computed from the label on every draw, after ``PersistentDataset``'s cache: the
    ``RandomizableTrait`` marks it as not cacheable (a cached deterministic prefix written by
    the validation chain, :meth:`GFScreenDataModule.check_values`, would otherwise skip it and
    the crop fall back to upstream's centres silently, as before 2026-12-07)."""

    def __init__(self, roi_size: Sequence[int], positives: str = "lesion") -> None:
        if positives not in ("lesion", "anywhere"):
            raise ValueError(f"positives must be 'lesion' or 'anywhere', not {positives!r}")
        self.roi_size = tuple(int(r) for r in roi_size)
        self.positives = positives

    def __call__(self, data: Mapping[Hashable, Any]) -> dict[Hashable, Any]:
        import numpy as np
        from scipy import ndimage

        d = dict(data)
        label = np.asarray(d["label"])[0] > 0
        body = np.asarray(d["image"])[0] > 0
        near = ndimage.maximum_filter(label, size=self.roi_size, mode="constant")
        inner = np.zeros_like(body)
        box = tuple(
            slice(r // 2, max(n - (r - r // 2) + 1, r // 2))
            for n, r in zip(label.shape, self.roi_size, strict=True)
        )
        inner[box] = True
        negatives = np.flatnonzero(body & ~near & inner)
        if negatives.size == 0:
            negatives = np.flatnonzero(body & ~label)
        positives = np.flatnonzero(label)
        if self.positives == "anywhere" and positives.size:
            anywhere = np.flatnonzero(near & inner)
            positives = anywhere if anywhere.size else positives
        d["label_fg_indices"] = positives
        d["label_bg_indices"] = negatives
        return d


def train_transforms(
    region: str | Sequence[float],
    roi_size: Sequence[int],
    num_samples: int = 4,
    label_map: Mapping[int, int] | None = None,
    spacing: Sequence[float] = SPACING_MM,
    prenormalized: bool = False,
    check_hu: bool = True,
    negatives: str = "upstream",
    pos: int = 1,
    neg: int = 1,
):
    """Deterministic part + random sub-volumes and augmentation; one item -> ``num_samples``.
    ``pos`` / ``neg``: ``RandCropByPosNegLabeld``'s ratio of positive to negative crop centres
    (upstream 1 / 1).
    ``negatives``: :data:`NEGATIVES` (``lesion_free`` and ``tiles``: :class:`LesionFreeNegativesd`,
    after the cached prefix).

    The positive / negative crop centres are drawn from the label on the fly (as upstream):
    caching the voxel indices would store ~8 bytes per voxel per volume with the cache.
    """
    from monai import transforms as T

    if negatives not in NEGATIVES:
        raise ValueError(f"unknown negatives {negatives!r}; known: {', '.join(NEGATIVES)}")
    keys = ["image", "label"]
    centres: list = []
    indices: dict[str, str] = {}
    if negatives in ("lesion_free", "tiles"):
        positives = "anywhere" if negatives == "tiles" else "lesion"
        centres = [LesionFreeNegativesd(roi_size, positives)]
        indices = {"fg_indices_key": "label_fg_indices", "bg_indices_key": "label_bg_indices"}
    return T.Compose(
        [
            *_base(keys, region, roi_size, label_map, spacing, prenormalized, check_hu),
            *centres,
            T.RandCropByPosNegLabeld(
                keys=keys,
                label_key="label",
                spatial_size=tuple(roi_size),
                pos=pos,
                neg=neg,
                num_samples=num_samples,
                image_key="image",
                image_threshold=0,
                **indices,
            ),
            T.RandFlipd(keys=keys, prob=0.2, spatial_axis=0),
            T.RandFlipd(keys=keys, prob=0.2, spatial_axis=1),
            T.RandFlipd(keys=keys, prob=0.2, spatial_axis=2),
            T.RandRotate90d(keys=keys, prob=0.2, max_k=3),
            T.RandShiftIntensityd(keys=["image"], offsets=0.1, prob=0.1),
            T.ToTensord(keys=keys, track_meta=False),
        ]
    )


def val_transforms(
    region: str | Sequence[float],
    roi_size: Sequence[int],
    label_map: Mapping[int, int] | None = None,
    spacing: Sequence[float] = SPACING_MM,
    prenormalized: bool = False,
    check_hu: bool = True,
):
    """Whole preprocessed volumes with labels (validation / test)."""
    from monai import transforms as T

    keys = ["image", "label"]
    return T.Compose(_base(keys, region, roi_size, label_map, spacing, prenormalized, check_hu))


def infer_transforms(
    region: str | Sequence[float],
    roi_size: Sequence[int],
    spacing: Sequence[float] = SPACING_MM,
    prenormalized: bool = False,
    check_hu: bool = True,
):
    """The image alone through the same chain as validation (foreground crop included), so that
    ``screen`` / ``predict`` see the tiles ``test`` sees; every step is invertible
    (``monai.transforms.Invertd`` maps a mask back onto the input grid)."""
    from monai import transforms as T

    return T.Compose(_base(["image"], region, roi_size, None, spacing, prenormalized, check_hu))


def value_check_transforms(prenormalized: bool = False, check_hu: bool = True, label: bool = True):
    """Load + :class:`CheckValuesd` alone: the voxel checks ``predict`` runs in the main process
    when DataLoader workers are used (a worker's error reaches the main process re-wrapped,
    without the case it names)."""
    from monai import transforms as T

    keys = ["image", "label"] if label else ["image"]
    return T.Compose(
        [
            ReadImaged(keys),
            T.EnsureChannelFirstd(keys=keys),
            CheckValuesd("image", "label" if label else None, prenormalized, check_hu),
        ]
    )
