"""``GFScreenDataModule``: Decathlon datalists of NIfTI CT volumes through the MONAI pipeline.

Training batches are MONAI ``list_data_collate`` of ``batch_size`` volumes x ``num_samples``
sub-volumes (upstream: 4 x 4 = 16), consecutive per volume, so sub-volume ``i`` belongs to case
``i // num_samples``. Validation / test / predict batches are single whole volumes.

Every case is checked from its NIfTI headers before loading (:func:`medimg_gfscreen.io.
check_case`); voxel values are checked when a volume is first preprocessed, in ``setup`` in the
main process (before any DataLoader worker: a worker's error would reach the main process
re-wrapped, without the case it names). The deterministic part of
the pipeline (load, checks, orientation, spacing, window, crop) is cached on disk with MONAI's
``PersistentDataset`` as upstream, in a folder named after the preprocessing settings under
``cache_dir`` (default ``iclr26_common.cachedir.cache_root()/medimg-gfscreen``); each entry is
keyed by its file paths, sizes and modification times, so a changed file is preprocessed again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L

from medimg_gfscreen.constants import PAPER_ROI, SPACING_MM
from medimg_gfscreen.io import (
    NIFTI_SUFFIXES,
    GFScreenFormatError,
    case_name,
    check_case,
    file_stamp,
    load_datalist,
    parse_label_map,
)
from medimg_gfscreen.transforms import (
    NEGATIVES,
    hu_window,
    infer_transforms,
    train_transforms,
    val_transforms,
    value_check_transforms,
)

__all__ = ["GFScreenDataModule", "image_folder_items"]

CACHE_VERSION = 2  # bump when the cached part of the pipeline changes meaning


def image_folder_items(folder: Path) -> list[dict[str, str]]:
    """``{image, name}`` for every ``.nii`` / ``.nii.gz`` file in ``folder`` (sorted; no labels):
    what ``predict`` screens."""
    folder = Path(folder)
    if not folder.is_dir():
        raise GFScreenFormatError(f"image folder {folder} does not exist")
    images = sorted(p for p in folder.iterdir() if p.name.endswith(NIFTI_SUFFIXES))
    if not images:
        raise GFScreenFormatError(f"image folder {folder} holds no .nii / .nii.gz images")
    seen: dict[str, Path] = {}
    for image in images:
        name = case_name(image)
        if name in seen:  # both would be written to output_dir/<name>.nii.gz
            raise GFScreenFormatError(
                f"image folder {folder}: {seen[name].name} and {image.name} are both case "
                f"{name!r} (mask {name}.nii.gz); rename one"
            )
        seen[name] = image
    return [{"image": str(p.resolve()), "name": name} for name, p in seen.items()]


class GFScreenDataModule(L.LightningDataModule):
    """Args:
    datalist: Decathlon datalist JSON (``training`` / ``validation`` lists of
        ``{image, label, name}``); relative paths are resolved against ``base_dir`` (default: the
        JSON's folder).
    region: HU window, ``abdomen`` ([-175, 250]) or ``chest`` ([-900, 650]).
    roi_size: Focus / Glance sub-volume (paper 96x96x64 at 1x1x3 mm).
    num_samples: sub-volumes per volume (RandCropByPosNegLabeld, pos=1, neg=1).
    batch_size: volumes per training batch (sub-volumes per step = batch_size * num_samples).
    label_map: source label -> {0, 1}, e.g. ``{1: 0, 2: 1}`` for MSD liver / pancreas tumours,
        or the string ``"1:0,2:1"``. Default ``{1: 1}``.
    prenormalized: images are already scaled to [0, 1] (no HU window, no HU check); by default
        an image that does not look like CT in Hounsfield units is an error.
    check_hu: the HU plausibility check (some voxel <= -200 HU, some >= 0 HU); False keeps the
        HU window but accepts a CT without air in view (e.g. a field of view inside the body).
    test_key: datalist key of the test set (default: the validation key).
    predict_dir: folder of ``.nii`` / ``.nii.gz`` images for ``predict`` (no labels needed);
        default: the test list's images.
    output_dir: where ``predict`` writes one uint8 mask per image (``<case>.nii.gz``, on the
        input's grid); existing masks are refused (see :attr:`existing_masks`).
    cache_dir: on-disk cache of the preprocessed volumes (None: the workspace cache).
    check_cases: check every entry's NIfTI headers (shapes, affines, label present) first.
    negatives: crop centres of the pos / neg sampling (``transforms.NEGATIVES``): ``upstream``
        (RandCropByPosNegLabeld's: a negative crop may reach a lesion), ``lesion_free`` (a
        negative crop holds no lesion voxel) or ``tiles`` (as ``lesion_free``, and a positive
        crop holds a lesion voxel anywhere, as an inference tile does).
    pos, neg: ratio of positive to negative crop centres (``RandCropByPosNegLabeld``; upstream
        1 and 1).
    """

    def __init__(
        self,
        datalist: str = "datalist.json",
        base_dir: str | None = None,
        train_key: str = "training",
        val_key: str = "validation",
        test_key: str | None = None,
        region: str = "abdomen",
        roi_size: Sequence[int] = PAPER_ROI,
        num_samples: int = 4,
        batch_size: int = 4,
        label_map: Mapping[int, int] | str | None = None,
        spacing: Sequence[float] = SPACING_MM,
        prenormalized: bool = False,
        predict_dir: str | None = None,
        output_dir: str = "predictions",
        cache_dir: str | None = None,
        num_workers: int = 0,
        check_cases: bool = True,
        check_hu: bool = True,
        negatives: str = "upstream",
        pos: int = 1,
        neg: int = 1,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        hu_window(region)  # fail early on an unknown region
        if num_samples < 1 or batch_size < 1:
            raise GFScreenFormatError("num_samples and batch_size must be >= 1")
        self.datalist = Path(datalist)
        self.base_dir = Path(base_dir) if base_dir else None
        self.region = region
        self.roi_size = tuple(int(v) for v in roi_size)
        self.num_samples = int(num_samples)
        self.batch_size = int(batch_size)
        self.label_map = parse_label_map(label_map)
        self.spacing = tuple(float(v) for v in spacing)
        self.prenormalized = bool(prenormalized)
        self.predict_dir = Path(predict_dir) if predict_dir else None
        self.output_dir = Path(output_dir)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.num_workers = num_workers
        self.check_cases = check_cases
        self.check_hu = bool(check_hu)
        if negatives not in NEGATIVES:
            raise GFScreenFormatError(
                f"negatives must be one of {', '.join(NEGATIVES)}, not {negatives!r}"
            )
        self.negatives = negatives
        if pos < 0 or neg < 0 or pos + neg == 0:
            raise GFScreenFormatError(f"pos and neg must be >= 0, not both 0 (got {pos}, {neg})")
        self.pos, self.neg = int(pos), int(neg)
        self._checked: set[str] = set()
        self.train_key, self.val_key = train_key, val_key
        self.test_key = test_key or val_key
        self.items: dict[str, list[dict[str, Any]]] = {}
        self._infer: Any = None
        #: What ``predict`` does with a mask that exists in ``output_dir``: ``"refuse"`` (one
        #: line before anything runs), ``"replace"`` (``predict --overwrite``) or ``"skip"``
        #: (``predict --resume``: the image is not screened again). Not a constructor argument:
        #: the CLI sets it from its flags.
        self.existing_masks = "refuse"

    # ----- items -----
    def _items(self, key: str) -> list[dict[str, Any]]:
        if key not in self.items:
            items = load_datalist(self.datalist, key, self.base_dir)
            if not items:
                raise GFScreenFormatError(f"datalist {self.datalist}: {key!r} list is empty")
            if self.check_cases:
                for item in items:
                    check_case(item)
            self.items[key] = items
        return self.items[key]

    def predict_items(self) -> list[dict[str, Any]]:
        """Images to screen: ``predict_dir``'s files, else the test list's images (no labels)."""
        if "predict" not in self.items:
            if self.predict_dir is not None:
                items = image_folder_items(self.predict_dir)
            else:
                items = [
                    {"image": i["image"], "name": i["name"]} for i in self._items(self.test_key)
                ]
            if self.check_cases:
                for item in items:
                    check_case(item, require_label=False)
            self.items["predict"] = items
        return self.items["predict"]

    def mask_path(self, item: Mapping[str, Any]) -> Path:
        """Where ``predict`` writes the mask of ``item``: ``output_dir/<case>.nii.gz``."""
        return self.output_dir / f"{item['name']}.nii.gz"

    def mask_paths(self) -> list[Path]:
        """Where ``predict`` writes each image's mask: ``output_dir/<case>.nii.gz``."""
        return [self.mask_path(item) for item in self.predict_items()]

    def setup(self, stage: str | None = None) -> None:
        """Checks the stage's datalist entries (headers) and, in this process, their voxel values
        (:meth:`check_values`), so that bad data is one error naming the case before training."""
        keys = []
        if stage in (None, "fit"):
            keys.append(self.train_key)
        if stage in (None, "fit", "validate"):
            keys.append(self.val_key)
        if stage in (None, "test"):
            keys.append(self.test_key)
        for key in dict.fromkeys(keys):
            self.check_values(key)
        if stage == "predict":
            if self.existing_masks not in ("refuse", "replace", "skip"):
                raise ValueError(
                    f"existing_masks must be refuse/replace/skip, not {self.existing_masks!r}"
                )
            if self.existing_masks == "skip":  # resumed: the masks written before stay
                self.items["predict"] = [
                    item for item in self.predict_items() if not self.mask_path(item).exists()
                ]
            taken = [str(p) for p in self.mask_paths() if p.exists()]
            if taken and self.existing_masks == "refuse":
                raise FileExistsError(
                    f"{len(taken)} mask(s) exist, not replacing them: {', '.join(taken[:3])} "
                    "(field 'output_dir'; predict --overwrite replaces them, --resume keeps them)"
                )
            if self.num_workers > 0 and "predict" not in self._checked:
                check = value_check_transforms(self.prenormalized, self.check_hu, label=False)
                for item in self.predict_items():
                    check(dict(item))
                self._checked.add("predict")

    def check_values(self, key: str) -> None:
        """Runs the cached, deterministic part of the pipeline (voxel checks included) in this
        process for every entry of datalist list ``key`` that has no cache file yet, writing the
        ``PersistentDataset`` cache that the DataLoader (and its workers) then read. Entries
        already cached were checked when they were written: later starts test only that the
        cache files exist. Deterministic transforms only: the random state is not touched."""
        if key in self._checked:
            return
        dataset = self._dataset(self._items(key), self._base_transform())
        for item in dataset.data:
            digest = dataset.hash_func(item).decode("utf-8") + dataset.transform_hash
            if not (Path(dataset.cache_dir) / f"{digest}.pt").is_file():
                dataset._cachecheck(item)  # MONAI's cache fill (computes, checks, writes)
        self._checked.add(key)

    # ----- datasets -----
    def cache_folder(self) -> Path:
        """The on-disk cache of this preprocessing (region, spacing, ROI, label map, scaling)."""
        from iclr26_common.cachedir import cache_root, recipe_digest

        recipe = {
            "version": CACHE_VERSION,
            "region": self.region,
            "spacing": self.spacing,
            "roi": self.roi_size,
            "label_map": sorted(self.label_map.items()),
            "prenormalized": self.prenormalized,
        }
        if not self.check_hu:  # a cache written without the check must not serve a checked run
            recipe["check_hu"] = False
        root = self.cache_dir or cache_root() / "medimg-gfscreen"
        return root / f"persistent-{recipe_digest(recipe)}"

    def _dataset(self, items: list[dict[str, Any]], transform: Any):
        from monai.data import PersistentDataset

        stamped = [
            {
                **item,
                "stamp": ";".join(file_stamp(item[k]) for k in ("image", "label") if k in item),
            }
            for item in items
        ]
        folder = self.cache_folder()
        folder.mkdir(parents=True, exist_ok=True)
        return PersistentDataset(stamped, transform, cache_dir=folder)  # loads weights_only

    def _loader(self, dataset: Any, batch_size: int, shuffle: bool):
        from monai.data import DataLoader, list_data_collate

        # MONAI's DataLoader seeds the random transforms from torch's generator, per worker when
        # num_workers > 0 (torch's own gives every worker the same transform state)
        return DataLoader(
            dataset,
            batch_size=batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            collate_fn=list_data_collate,
        )

    def _base_transform(self):
        """The deterministic chain with labels (validation / test; the cached prefix of
        training's): what :meth:`check_values` runs into the cache."""
        return val_transforms(
            self.region,
            self.roi_size,
            self.label_map,
            self.spacing,
            self.prenormalized,
            self.check_hu,
        )

    def train_dataloader(self):
        transform = train_transforms(
            self.region,
            self.roi_size,
            self.num_samples,
            self.label_map,
            self.spacing,
            self.prenormalized,
            self.check_hu,
            self.negatives,
            self.pos,
            self.neg,
        )
        return self._loader(
            self._dataset(self._items(self.train_key), transform), self.batch_size, shuffle=True
        )

    def _whole_volumes(self, key: str):
        return self._loader(
            self._dataset(self._items(key), self._base_transform()), 1, shuffle=False
        )

    def val_dataloader(self):
        return self._whole_volumes(self.val_key)

    def test_dataloader(self):
        return self._whole_volumes(self.test_key)

    def infer_transform(self):
        """The image-only chain ``predict`` applies and inverts for the masks: one instance, since
        ``Invertd`` checks that the inverted transforms are the applied ones (by object id)."""
        if self._infer is None:
            self._infer = infer_transforms(
                self.region, self.roi_size, self.spacing, self.prenormalized, self.check_hu
            )
        return self._infer

    def predict_dataloader(self):
        from monai.data import Dataset

        # not cached: the inverse needs each image's transform record, and images are screened once
        dataset = Dataset(self.predict_items(), self.infer_transform())
        return self._loader(dataset, 1, shuffle=False)
