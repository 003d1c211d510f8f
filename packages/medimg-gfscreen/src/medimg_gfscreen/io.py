"""Readers and checks for the real data layouts: NIfTI volumes, Decathlon datalists, MSD task
folders (``dataset.json`` + ``imagesTr/`` + ``labelsTr/``) and FLARE / nnU-Net folders
(``*_0000.nii.gz`` images with same-stem masks).

Every bad input raises :class:`GFScreenFormatError` naming the file (and the case and field).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common.textio import input_file, read_text

__all__ = [
    "NIFTI_SUFFIXES",
    "GFScreenFormatError",
    "case_name",
    "check_case",
    "check_nifti_path",
    "discover_cases",
    "file_stamp",
    "load_datalist",
    "parse_label_map",
    "read_nifti",
    "spatial_shape",
    "write_datalist",
]

NIFTI_SUFFIXES = (".nii.gz", ".nii")
AFFINE_ATOL = 1e-3  # mm: image and label affines must agree to this


class GFScreenFormatError(ValueError):
    """Bad input data: the message names the file and, where known, the case and field."""


def check_nifti_path(path: Path, what: str = "image", case: str | None = None) -> Path:
    """Raises unless ``path`` is an existing file (:func:`iclr26_common.textio.input_file`: a
    folder is named as one) named like a NIfTI file (``.nii`` / ``.nii.gz``)."""
    path = Path(path)
    where = f"case {case!r}: " if case else ""
    if not path.name.endswith(NIFTI_SUFFIXES):
        raise GFScreenFormatError(f"{where}{what} {path} is not a NIfTI file (.nii or .nii.gz)")
    try:
        return input_file(path, f"{what} file", error=GFScreenFormatError)
    except GFScreenFormatError as error:
        raise GFScreenFormatError(f"{where}{error}") from None


def case_name(path: Path) -> str:
    """Case id from a file name: ``liver_3_0000.nii.gz`` -> ``liver_3`` (nnU-Net channel suffix
    dropped), ``liver_3.nii.gz`` -> ``liver_3``."""
    name = Path(path).name
    for suffix in NIFTI_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if name.endswith("_0000"):
        name = name[: -len("_0000")]
    return name


def spatial_shape(shape: Sequence[int]) -> tuple[int, ...] | None:
    """The 3-D spatial shape of a NIfTI shape, or None: ``(X, Y, Z)`` and ``(X, Y, Z, 1, ...)``
    (a trailing singleton time / channel axis, which MONAI's ``EnsureChannelFirstd`` turns into
    the channel) are volumes; anything else is not."""
    shape = tuple(int(v) for v in shape)
    if len(shape) >= 3 and all(v == 1 for v in shape[3:]):
        return shape[:3]
    return None


def read_nifti(path: Path, what: str = "image", case: str | None = None):
    """Loads a NIfTI header with nibabel (the voxel data stay on disk, compressed); errors name the
    file. A 3-D volume or one with trailing singleton axes ``(X, Y, Z, 1)`` is accepted."""
    import nibabel as nib

    path = check_nifti_path(path, what, case)
    where = f"case {case!r}: " if case else ""
    try:
        img = nib.load(str(path))
    except Exception as error:  # nibabel raises several types for corrupt files
        raise GFScreenFormatError(
            f"{where}{what} {path} cannot be read as NIfTI: {error}"
        ) from None
    if spatial_shape(img.shape) is None:
        raise GFScreenFormatError(
            f"{where}{what} {path} has shape {tuple(img.shape)}; expected a 3-D volume "
            "(X, Y, Z) or (X, Y, Z, 1)"
        )
    return img


def check_case(item: Mapping[str, Any], require_label: bool = True) -> None:
    """Validates one datalist entry ``{image, label, name}`` from the NIfTI headers alone (no
    voxel is decompressed): the image is a NIfTI volume, the label exists (when
    ``require_label``), and image and label agree in spatial shape and affine (1e-3 mm).

    The voxel values (NaN / inf, integer labels, CT intensities in HU) are checked when a volume
    is loaded (:class:`medimg_gfscreen.transforms.CheckValuesd`), once per case with the cache.
    Raises :class:`GFScreenFormatError` naming the case, the file and the field.
    """
    case = str(item.get("name") or case_name(Path(str(item.get("image", "?")))))
    if "image" not in item:
        raise GFScreenFormatError(f"case {case!r}: datalist entry has no 'image' field")
    image = read_nifti(Path(str(item["image"])), "image", case)
    if item.get("label") is None:
        if require_label:
            raise GFScreenFormatError(
                f"case {case!r}: no label for image {item['image']} (field 'label' missing)"
            )
        return
    label = read_nifti(Path(str(item["label"])), "label", case)
    if spatial_shape(label.shape) != spatial_shape(image.shape):
        raise GFScreenFormatError(
            f"case {case!r}: label {item['label']} shape {tuple(label.shape)} differs from "
            f"image {item['image']} shape {tuple(image.shape)}"
        )
    if not np.allclose(label.affine, image.affine, atol=AFFINE_ATOL):
        raise GFScreenFormatError(
            f"case {case!r}: label {item['label']} affine differs from image "
            f"{item['image']} affine (field 'affine', tolerance {AFFINE_ATOL} mm)"
        )


def file_stamp(path: str | Path) -> str:
    """``size:mtime_ns`` of a file: added to a datalist entry so that the on-disk cache
    (``PersistentDataset``, keyed by the entry) is recomputed when the file changes."""
    stat = Path(path).stat()
    return f"{stat.st_size}:{stat.st_mtime_ns}"


def parse_label_map(value: Mapping[Any, Any] | str | None) -> dict[int, int]:
    """``{source label: target label}``, e.g. MSD liver ``{1: 0, 2: 1}`` (tumour -> lesion).

    Accepts a mapping or a string ``"1:0,2:1"``. ``None`` -> ``{1: 1}`` (binary masks). Targets
    must be 0 or 1; label 0 always maps to 0.
    """
    if value is None:
        return {1: 1}
    if isinstance(value, str):
        pairs = [part.split(":") for part in value.split(",") if part.strip()]
        try:
            value = {int(a): int(b) for a, b in pairs}
        except ValueError:
            raise GFScreenFormatError(
                f"label map {value!r}: expected 'source:target,...' with integers"
            ) from None
    mapping = {int(k): int(v) for k, v in dict(value).items()}
    if not mapping or any(v not in (0, 1) for v in mapping.values()):
        raise GFScreenFormatError(f"label map {mapping}: targets must be 0 or 1")
    mapping.pop(0, None)
    return mapping


def _json_object(path: Path, what: str) -> dict:
    """The JSON object in ``path`` (UTF-8); anything else is one line naming the file."""
    try:
        raw = json.loads(read_text(path, what, error=GFScreenFormatError))
    except json.JSONDecodeError as error:
        raise GFScreenFormatError(f"{path}: not valid JSON: {error}") from None
    if not isinstance(raw, dict):
        raise GFScreenFormatError(f"{path}: not a JSON object")
    return raw


def load_datalist(path: Path, key: str = "training", base_dir: Path | None = None) -> list[dict]:
    """Reads a Decathlon datalist with MONAI's ``load_decathlon_datalist``; relative paths are
    resolved against ``base_dir`` (default: the JSON's folder). Adds ``name`` when missing.
    A missing file, a folder and bytes that are not UTF-8 are one line naming the file
    (:mod:`iclr26_common.textio`)."""
    from monai.data import load_decathlon_datalist

    path = input_file(path, "datalist file", error=GFScreenFormatError)
    raw = _json_object(path, "datalist file")
    if key not in raw:
        raise GFScreenFormatError(
            f"datalist {path} has no {key!r} list (keys: {', '.join(sorted(raw)) or 'none'})"
        )
    for index, entry in enumerate(raw[key]):
        if not isinstance(entry, dict) or "image" not in entry:
            raise GFScreenFormatError(f"datalist {path}: {key}[{index}] has no 'image' field")
    items = load_decathlon_datalist(
        str(path), is_segmentation=True, data_list_key=key, base_dir=str(base_dir or path.parent)
    )
    for item in items:
        item.setdefault("name", case_name(Path(item["image"])))
    return items


def _strip(name: str) -> str:
    return case_name(Path(name))


def discover_cases(root: Path) -> list[dict[str, str]]:
    """Pairs images and masks of an MSD task folder or a FLARE / nnU-Net folder.

    MSD: ``dataset.json`` with ``training: [{image, label}]`` (paths relative to ``root``).
    Otherwise images are ``imagesTr/*`` (or ``images/*``), masks ``labelsTr/*`` (or
    ``labels/*``), paired by case id (``X_0000.nii.gz`` <-> ``X.nii.gz``). Images without a mask
    are an error naming them; masks without an image too.
    """
    root = Path(root)
    if root.is_file():
        raise GFScreenFormatError(f"data folder {root} is a file; give a folder")
    if not root.is_dir():
        raise GFScreenFormatError(f"data folder {root} does not exist")
    dataset_json = root / "dataset.json"
    if dataset_json.is_file():
        meta = _json_object(dataset_json, "dataset.json")
        cases = []
        for index, entry in enumerate(meta.get("training", [])):
            if not isinstance(entry, dict) or "image" not in entry or "label" not in entry:
                raise GFScreenFormatError(
                    f"{dataset_json}: training[{index}] needs 'image' and 'label' fields"
                )
            image = (root / entry["image"]).resolve()
            label = (root / entry["label"]).resolve()
            # MSD lists 'imagesTr/x.nii.gz' while the file on disk may be 'x_0000.nii.gz'
            if not image.exists():
                alt = image.with_name(_strip(image.name) + "_0000.nii.gz")
                image = alt if alt.exists() else image
            cases.append({"image": str(image), "label": str(label), "name": _strip(image.name)})
        if cases:
            return cases
    image_dir = next((root / d for d in ("imagesTr", "images") if (root / d).is_dir()), None)
    label_dir = next((root / d for d in ("labelsTr", "labels") if (root / d).is_dir()), None)
    if image_dir is None or label_dir is None:
        raise GFScreenFormatError(
            f"data folder {root}: expected dataset.json or imagesTr/ + labelsTr/ "
            "(or images/ + labels/)"
        )
    images = {
        _strip(p.name): p for p in sorted(image_dir.iterdir()) if p.name.endswith(NIFTI_SUFFIXES)
    }
    labels = {
        _strip(p.name): p for p in sorted(label_dir.iterdir()) if p.name.endswith(NIFTI_SUFFIXES)
    }
    missing = sorted(set(images) - set(labels))
    if missing:
        raise GFScreenFormatError(
            f"{image_dir}: no mask in {label_dir} for case(s) {', '.join(missing[:5])}"
        )
    orphans = sorted(set(labels) - set(images))
    if orphans:
        raise GFScreenFormatError(
            f"{label_dir}: no image in {image_dir} for mask(s) {', '.join(orphans[:5])}"
        )
    if not images:
        raise GFScreenFormatError(f"{image_dir} holds no .nii/.nii.gz images")
    return [
        {"image": str(images[c].resolve()), "label": str(labels[c].resolve()), "name": c}
        for c in sorted(images)
    ]


def write_datalist(
    cases: Sequence[Mapping[str, str]],
    out: Path,
    folds: int = 1,
    fold: int = 0,
    val_fraction: float = 0.2,
    seed: int = 0,
    relative_to: Path | None = None,
    overwrite: bool = False,
) -> Path:
    """Writes a Decathlon datalist JSON ``{training: [...], validation: [...]}`` split with MONAI's
    ``partition_dataset`` (seeded, shuffled): ``folds > 1`` -> k folds as
    ``create_cross_validation_datalist`` makes them, ``fold`` is the validation fold and every
    entry carries its ``fold``; ``folds == 1`` -> a hold-out of ``round(val_fraction * n)`` cases
    (at least one, and at least one left for training).

    Every image and label must exist (MONAI ``check_missing_files``; missing files are an error
    naming them), and both lists must be non-empty (at least 2 cases, ``folds <= n``). Paths are
    written relative to ``relative_to`` (default: the JSON's folder) when they lie below it.
    """
    from monai.data import check_missing_files, partition_dataset

    from iclr26_common.outputs import check_out_file, write_text

    out = check_out_file(out, option="--out", overwrite=overwrite)
    n = len(cases)
    if folds < 1 or not 0 <= fold < folds:
        raise GFScreenFormatError(f"fold {fold} of {folds}: need folds >= 1 and 0 <= fold < folds")
    if n < 2 or folds > n:
        raise GFScreenFormatError(
            f"{n} case(s) cannot be split into training and validation"
            + (f" with {folds} folds" if folds > 1 else "")
            + " (need at least 2 cases and no more folds than cases)"
        )
    if not 0 < val_fraction < 1 and folds == 1:
        raise GFScreenFormatError(f"validation fraction {val_fraction}: need 0 < fraction < 1")
    items = [dict(case) for case in cases]
    missing = check_missing_files(items, keys=["image", "label"], allow_missing_keys=False)
    if missing:
        names = ", ".join(str(path) for path in missing[:5])
        raise GFScreenFormatError(
            f"{len(missing)} datalist file(s) do not exist: {names} (fields 'image' / 'label')"
        )
    for index, item in enumerate(items):
        item["_index"] = index
    if folds > 1:  # MONAI's k-fold partition (what create_cross_validation_datalist uses)
        parts = partition_dataset(items, num_partitions=folds, shuffle=True, seed=seed)
        fold_of = {item["_index"]: f for f, part in enumerate(parts) for item in part}
        val = parts[fold]
        train = [item for f, part in enumerate(parts) if f != fold for item in part]
    else:
        n_val = min(max(round(val_fraction * n), 1), n - 1)
        train, val = partition_dataset(items, ratios=[n - n_val, n_val], shuffle=True, seed=seed)
        fold_of = {}
    base = Path(relative_to or out.parent).resolve()

    def rel(path: str) -> str:
        p = Path(path).resolve()
        try:
            return str(p.relative_to(base))
        except ValueError:
            return str(p)

    def entry(item: Mapping[str, Any]) -> dict[str, Any]:
        row: dict[str, Any] = {
            "image": rel(item["image"]),
            "label": rel(item["label"]),
            "name": item["name"],
        }
        if folds > 1:
            row["fold"] = fold_of[item["_index"]]
        return row

    payload = {
        "training": [entry(item) for item in sorted(train, key=lambda i: i["_index"])],
        "validation": [entry(item) for item in sorted(val, key=lambda i: i["_index"])],
    }
    if not payload["training"] or not payload["validation"]:  # pragma: no cover - guarded above
        raise GFScreenFormatError(f"{out}: the split left an empty training or validation list")
    write_text(out, json.dumps(payload, indent=2) + "\n")
    return out
