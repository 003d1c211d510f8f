"""Readers and checks for the real data layouts: NIfTI volumes, Decathlon datalists, MSD task
folders (``dataset.json`` + ``imagesTr/`` + ``labelsTr/``) and FLARE / nnU-Net folders
(``*_0000.nii.gz`` images with same-stem masks).

Every bad input raises :class:`GFScreenFormatError` naming the file (and the case and field).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "NIFTI_SUFFIXES",
    "GFScreenFormatError",
    "case_name",
    "check_case",
    "check_nifti_path",
    "discover_cases",
    "load_datalist",
    "parse_label_map",
    "read_nifti",
    "write_datalist",
]

NIFTI_SUFFIXES = (".nii.gz", ".nii")
AFFINE_ATOL = 1e-3  # mm: image and label affines must agree to this


class GFScreenFormatError(ValueError):
    """Bad input data: the message names the file and, where known, the case and field."""


def check_nifti_path(path: Path, what: str = "image", case: str | None = None) -> Path:
    """Raises unless ``path`` exists and is named like a NIfTI file (``.nii`` / ``.nii.gz``)."""
    path = Path(path)
    where = f"case {case!r}: " if case else ""
    if not path.name.endswith(NIFTI_SUFFIXES):
        raise GFScreenFormatError(f"{where}{what} {path} is not a NIfTI file (.nii or .nii.gz)")
    if not path.is_file():
        raise GFScreenFormatError(f"{where}{what} {path} does not exist")
    return path


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


def read_nifti(path: Path, what: str = "image", case: str | None = None):
    """Loads a NIfTI with nibabel (header + lazy data); errors name the file."""
    import nibabel as nib

    path = check_nifti_path(path, what, case)
    try:
        img = nib.load(str(path))
    except Exception as error:  # nibabel raises several types for corrupt files
        where = f"case {case!r}: " if case else ""
        raise GFScreenFormatError(
            f"{where}{what} {path} cannot be read as NIfTI: {error}"
        ) from None
    if len(img.shape) != 3:
        where = f"case {case!r}: " if case else ""
        raise GFScreenFormatError(
            f"{where}{what} {path} has shape {tuple(img.shape)}; expected a 3-D volume"
        )
    return img


def check_case(
    item: Mapping[str, Any], require_label: bool = True, check_values: bool = True
) -> None:
    """Validates one datalist entry ``{image, label, name}`` before MONAI loads it.

    Raises :class:`GFScreenFormatError` for a non-NIfTI or missing image, a missing label (when
    ``require_label``), image/label shapes or affines that differ, and NaN / inf voxels.
    """
    case = str(item.get("name") or case_name(Path(str(item.get("image", "?")))))
    if "image" not in item:
        raise GFScreenFormatError(f"case {case!r}: datalist entry has no 'image' field")
    image = read_nifti(Path(str(item["image"])), "image", case)
    label = None
    if item.get("label") is None:
        if require_label:
            raise GFScreenFormatError(
                f"case {case!r}: no label for image {item['image']} (field 'label' missing)"
            )
    else:
        label = read_nifti(Path(str(item["label"])), "label", case)
        if tuple(label.shape) != tuple(image.shape):
            raise GFScreenFormatError(
                f"case {case!r}: label {item['label']} shape {tuple(label.shape)} differs from "
                f"image {item['image']} shape {tuple(image.shape)}"
            )
        if not np.allclose(label.affine, image.affine, atol=AFFINE_ATOL):
            raise GFScreenFormatError(
                f"case {case!r}: label {item['label']} affine differs from image "
                f"{item['image']} affine (field 'affine', tolerance {AFFINE_ATOL} mm)"
            )
    if check_values:
        data = np.asanyarray(image.dataobj)
        if not np.isfinite(data).all():
            bad = int((~np.isfinite(data)).sum())
            raise GFScreenFormatError(
                f"case {case!r}: image {item['image']} has {bad} NaN/inf voxels"
            )
        if label is not None:
            lab = np.asanyarray(label.dataobj)
            if not np.isfinite(lab).all() or (lab < 0).any() or (lab != np.round(lab)).any():
                raise GFScreenFormatError(
                    f"case {case!r}: label {item['label']} has non-integer, negative or NaN values"
                )


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


def load_datalist(path: Path, key: str = "training", base_dir: Path | None = None) -> list[dict]:
    """Reads a Decathlon datalist with MONAI's ``load_decathlon_datalist``; relative paths are
    resolved against ``base_dir`` (default: the JSON's folder). Adds ``name`` when missing."""
    from monai.data import load_decathlon_datalist

    path = Path(path)
    if not path.is_file():
        raise GFScreenFormatError(f"datalist {path} does not exist")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise GFScreenFormatError(f"datalist {path} is not valid JSON: {error}") from None
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
    if not root.is_dir():
        raise GFScreenFormatError(f"data folder {root} does not exist")
    dataset_json = root / "dataset.json"
    if dataset_json.is_file():
        meta = json.loads(dataset_json.read_text())
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
    """Writes a Decathlon datalist JSON ``{training: [...], validation: [...]}``.

    ``folds > 1``: a seeded k-fold split, ``fold`` is the validation fold, and every entry also
    carries its ``fold`` index. ``folds == 1``: a seeded ``val_fraction`` hold-out. Paths are
    written relative to ``relative_to`` (default: the JSON's folder) when they lie below it.
    """
    out = Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; not overwriting it")
    if folds < 1 or not 0 <= fold < folds:
        raise GFScreenFormatError(f"fold {fold} of {folds}: need folds >= 1 and 0 <= fold < folds")
    base = Path(relative_to or out.parent).resolve()
    order = list(range(len(cases)))
    random.Random(seed).shuffle(order)
    if folds > 1:
        fold_of = {i: rank % folds for rank, i in enumerate(order)}
    else:
        n_val = round(val_fraction * len(cases)) if len(cases) > 1 else 0
        val = set(order[:n_val])
        fold_of = {i: (0 if i in val else 1) for i in order}
        fold = 0

    def rel(path: str) -> str:
        p = Path(path).resolve()
        try:
            return str(p.relative_to(base))
        except ValueError:
            return str(p)

    entries = []
    for i, case in enumerate(cases):
        entry = {"image": rel(case["image"]), "label": rel(case["label"]), "name": case["name"]}
        if folds > 1:
            entry["fold"] = fold_of[i]
        entries.append((fold_of[i], entry))
    payload = {
        "training": [e for f, e in entries if f != fold],
        "validation": [e for f, e in entries if f == fold],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2) + "\n")
    return out
