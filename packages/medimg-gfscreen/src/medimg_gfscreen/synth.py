"""Synthetic abdominal CT with small lesions, written in the real layout.

Each case is an int16 HU volume on a RAS affine with spacing (1, 1, 3) mm: air (-1000 HU), a
body ellipsoid (~40 HU), a bone ring (~700 HU) inside the body wall, an organ ellipsoid
(~60 HU), 0-3 spherical lesions (radius 2-6 mm) at +-40-60 HU contrast to the organ with
partial-volume blur, and Gaussian noise (sigma 10-25 HU). About 30 % of cases are healthy
(label all 0). A :class:`Testbed` changes these draws (the experiment's: one small lesion per
lesion case, half the cases healthy, and **lesion mimics** in every case: bright or dark cysts
larger than any lesion and vessels, tubes at lesion contrast, both unlabelled, so a segmenter
can make false positives on healthy cases). Labels are uint8 (1 = lesion). Files follow
nnU-Net / MSD naming:
``imagesTr/<case>_0000.nii.gz``, ``labelsTr/<case>.nii.gz``, plus an MSD ``dataset.json`` and a
Decathlon ``datalist.json`` (``training`` / ``validation``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import ndimage

from medimg_gfscreen.constants import SPACING_MM
from medimg_gfscreen.io import write_datalist

__all__ = [
    "DEFAULT_TESTBED",
    "MIMIC_STYLES",
    "SynthCase",
    "Testbed",
    "generate_dataset",
    "synth_case",
]

AIR_HU = -1000.0
BODY_HU = 40.0
ORGAN_HU = 60.0
BONE_HU = 700.0
HEALTHY_FRACTION = 0.3
LESION_RADIUS_MM = (2.0, 6.0)
LESION_CONTRAST_HU = (40.0, 60.0)
NOISE_SIGMA_HU = (10.0, 25.0)
PARTIAL_VOLUME_SIGMA_MM = 0.8
CYST_RADIUS_MM = (7.0, 10.0)  # mimics: larger than any lesion, lesion contrast
VESSEL_RADIUS_MM = (1.0, 2.0)  # mimics: tubes across the organ at lesion contrast
#: how the mimics differ from lesions (:class:`Testbed` ``mimic_style``): ``lesion_contrast``
#: (cysts and in-plane vessels at either sign of a lesion's contrast) or ``anatomic`` (as on CT:
#: cysts hypodense, vessels enhancing 3-D tubes through the body)
MIMIC_STYLES = ("lesion_contrast", "anatomic")


@dataclass(frozen=True)
class Testbed:
    """How a synthetic case draws its lesions and mimics. The default is the generator of
    ``medimg-gfscreen synth`` (its random stream unchanged): 30 % healthy, 1-3 lesions of radius
    2-6 mm, no mimic. ``mimics``: cysts and vessels (``mimics`` of each) drawn in every case;
    ``mimic_style``: :data:`MIMIC_STYLES`; ``cyst_radius_mm``: the cysts' radius range;
    ``mimic_contrast_hu``: the mimics' contrast magnitude range (None: a lesion's,
    :data:`LESION_CONTRAST_HU`; the random stream is the same either way)."""

    healthy_fraction: float = HEALTHY_FRACTION
    max_lesions: int = 3
    lesion_radius_mm: tuple[float, float] = LESION_RADIUS_MM
    mimics: int = 0
    mimic_style: str = "lesion_contrast"
    cyst_radius_mm: tuple[float, float] = CYST_RADIUS_MM
    mimic_contrast_hu: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.mimic_style not in MIMIC_STYLES:
            raise ValueError(
                f"Testbed.mimic_style must be one of {', '.join(MIMIC_STYLES)}, "
                f"not {self.mimic_style!r}"
            )
        low, high = self.mimic_contrast_hu or LESION_CONTRAST_HU
        if not 0 <= low <= high:
            raise ValueError(
                f"Testbed.mimic_contrast_hu must be (low, high) with 0 <= low <= high, "
                f"not {self.mimic_contrast_hu!r}"
            )


DEFAULT_TESTBED = Testbed()


@dataclass
class SynthCase:
    image: np.ndarray  # int16 HU [X, Y, Z]
    label: np.ndarray  # uint8 {0, 1} [X, Y, Z]
    affine: np.ndarray  # 4x4 RAS
    n_lesions: int


def _grid(shape: tuple[int, int, int], spacing: tuple[float, float, float]) -> list[np.ndarray]:
    """Physical coordinates (mm) relative to the volume centre, broadcastable [X,1,1] etc."""
    return [
        ((np.arange(n, dtype=np.float32) - (n - 1) / 2) * s).reshape(
            [-1 if a == i else 1 for a in range(3)]
        )
        for i, (n, s) in enumerate(zip(shape, spacing, strict=True))
    ]


def synth_case(
    rng: np.random.Generator,
    shape: tuple[int, int, int] = (96, 96, 32),
    spacing: tuple[float, float, float] = SPACING_MM,
    n_lesions: int | None = None,
    testbed: Testbed = DEFAULT_TESTBED,
) -> SynthCase:
    """One synthetic CT ``[X, Y, Z]``; ``n_lesions`` None draws 0 with p =
    ``testbed.healthy_fraction``, else 1 to ``testbed.max_lesions``."""
    x, y, z = _grid(shape, spacing)
    ext = [n * s / 2 for n, s in zip(shape, spacing, strict=True)]
    # body: elliptic cylinder-ish ellipsoid filling most of the field of view
    body_r = (ext[0] * rng.uniform(0.78, 0.9), ext[1] * rng.uniform(0.62, 0.75), ext[2] * 1.6)
    body = (x / body_r[0]) ** 2 + (y / body_r[1]) ** 2 + (z / body_r[2]) ** 2
    image = np.full(shape, AIR_HU, dtype=np.float32)
    image[body <= 1.0] = BODY_HU
    # bone ring: a thin shell inside the body wall
    image[(body > 0.72) & (body <= 0.8)] = BONE_HU
    # organ: an off-centre ellipsoid inside the ring
    oc = (rng.uniform(-0.2, 0.2) * ext[0], rng.uniform(-0.15, 0.15) * ext[1], 0.0)
    organ_r = (body_r[0] * rng.uniform(0.4, 0.5), body_r[1] * rng.uniform(0.4, 0.5), ext[2] * 1.2)
    organ = (
        ((x - oc[0]) / organ_r[0]) ** 2
        + ((y - oc[1]) / organ_r[1]) ** 2
        + ((z - oc[2]) / organ_r[2]) ** 2
    )
    image[organ <= 1.0] = ORGAN_HU
    label = np.zeros(shape, dtype=np.uint8)
    if n_lesions is None:
        healthy = rng.random() < testbed.healthy_fraction
        n_lesions = 0 if healthy else int(rng.integers(1, testbed.max_lesions + 1))
    indicator = np.zeros(shape, dtype=np.float32)
    placed = 0
    for _ in range(50 * max(n_lesions, 1)):
        if placed >= n_lesions:
            break
        r = rng.uniform(*testbed.lesion_radius_mm)
        # centre inside the organ, at least r from its boundary (normalised radius <= 0.75)
        u = rng.uniform(-1, 1, size=3)
        if np.linalg.norm(u) > 0.75:
            continue
        c = [oc[i] + u[i] * organ_r[i] for i in range(3)]
        c[2] = min(max(c[2], -ext[2] + 2 * spacing[2]), ext[2] - 2 * spacing[2])
        # snap the z centre to a slice so that every lesion owns at least one labelled voxel
        c[2] = float(np.round(c[2] / spacing[2] - 0.5 * ((shape[2] - 1) % 2)) * spacing[2]) + (
            0.5 * spacing[2] * ((shape[2] - 1) % 2)
        )
        dist = np.sqrt((x - c[0]) ** 2 + (y - c[1]) ** 2 + (z - c[2]) ** 2)
        sphere = dist <= r
        if not sphere.any() or label[sphere].any():
            continue  # off-grid or touching another lesion: draw again
        sign = rng.choice([-1.0, 1.0])
        contrast = sign * rng.uniform(*LESION_CONTRAST_HU)
        indicator += contrast * sphere.astype(np.float32)
        label[sphere] = 1
        placed += 1
    if testbed.mimics:
        indicator += _mimics(rng, (x, y, z), oc, organ_r, label, testbed, body <= 1.0)
    if indicator.any():
        sigma = [PARTIAL_VOLUME_SIGMA_MM / s for s in spacing]
        image += ndimage.gaussian_filter(indicator, sigma=sigma)
    image += rng.normal(0.0, rng.uniform(*NOISE_SIGMA_HU), size=shape).astype(np.float32)
    image = np.clip(np.round(image), -1024, 3071).astype(np.int16)
    affine = np.diag([*spacing, 1.0]).astype(np.float64)
    affine[:3, 3] = [-(n - 1) / 2 * s for n, s in zip(shape, spacing, strict=True)]
    return SynthCase(image=image, label=label, affine=affine, n_lesions=placed)


def _mimics(
    rng: np.random.Generator,
    grid: list[np.ndarray],
    centre: tuple[float, float, float],
    organ_r: tuple[float, float, float],
    label: np.ndarray,
    testbed: Testbed,
    body: np.ndarray,
) -> np.ndarray:
    """Unlabelled lesion mimics in the organ (HU offsets ``[X, Y, Z]``): ``testbed.mimics`` cysts
    (spheres of radius ``testbed.cyst_radius_mm``) and as many vessels (tubes of radius
    :data:`VESSEL_RADIUS_MM` through the organ centre region). ``lesion_contrast`` style: each at
    either sign of a lesion's contrast (+-:data:`LESION_CONTRAST_HU`), vessels in-plane over the
    slices within 1.5 mm. ``anatomic`` style (how CT look-alikes differ from small tumours):
    cysts hypodense (-:data:`LESION_CONTRAST_HU`, fluid), vessels enhancing
    (+:data:`LESION_CONTRAST_HU`) along a random 3-D direction across the whole body (``body``
    mask), so they run through several slices. ``testbed.mimic_contrast_hu`` replaces the
    contrast range (e.g. mimics fainter than lesions). Voxels of a lesion keep its contrast."""
    x, y, z = grid
    out = np.zeros(label.shape, dtype=np.float32)
    anatomic = testbed.mimic_style == "anatomic"
    for kind in ("cyst", "vessel") * testbed.mimics:
        u = rng.uniform(-0.6, 0.6, size=3)
        c = [centre[i] + u[i] * organ_r[i] for i in range(3)]
        if kind == "cyst":
            shape = np.sqrt((x - c[0]) ** 2 + (y - c[1]) ** 2 + (z - c[2]) ** 2) <= rng.uniform(
                *testbed.cyst_radius_mm
            )
        elif anatomic:
            axis = rng.normal(size=3)
            axis /= np.linalg.norm(axis)
            p = [x - c[0], y - c[1], z - c[2]]
            along = p[0] * axis[0] + p[1] * axis[1] + p[2] * axis[2]
            d2 = p[0] ** 2 + p[1] ** 2 + p[2] ** 2 - along**2
            shape = (d2 <= rng.uniform(*VESSEL_RADIUS_MM) ** 2) & body
        else:
            angle = rng.uniform(0, np.pi)
            d = np.abs(-(x - c[0]) * np.sin(angle) + (y - c[1]) * np.cos(angle))
            shape = (d <= rng.uniform(*VESSEL_RADIUS_MM)) & (np.abs(z - c[2]) <= 1.5)
        if anatomic:
            sign = -1.0 if kind == "cyst" else 1.0
        else:
            sign = rng.choice([-1.0, 1.0])
        contrast = sign * rng.uniform(*(testbed.mimic_contrast_hu or LESION_CONTRAST_HU))
        out[shape & (label == 0) & (out == 0)] = contrast
    return out


def generate_dataset(
    out: Path,
    n_cases: int = 12,
    shape: tuple[int, int, int] = (96, 96, 32),
    seed: int = 0,
    val_fraction: float = 0.25,
    prefix: str = "synth",
    overwrite: bool = False,
    testbed: Testbed = DEFAULT_TESTBED,
    first_case: int = 0,
    lesions_per_case: list[int] | None = None,
) -> Path:
    """Writes ``n_cases`` synthetic cases under ``out`` (new or empty folder, or any folder with
    ``overwrite``: same-named files are replaced); returns the path of ``out/datalist.json``.
    ``testbed``: how lesions and mimics are drawn (:class:`Testbed`); ``first_case``: the index
    of the first case name (``{prefix}_{i:03d}``); ``lesions_per_case``: each case's lesion count
    (default: drawn, :func:`synth_case`).
    Files are written with mode 0644."""
    import os

    import nibabel as nib

    from iclr26_common.outputs import FILE_MODE, PARTIAL_MARKER, write_text

    out = Path(out)
    # a folder the CLI marked partial while it works counts as empty
    if out.exists() and not overwrite and any(p.name != PARTIAL_MARKER for p in out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty; not writing into it")
    if n_cases < 2:
        raise ValueError(f"n_cases must be >= 2 (training and validation), got {n_cases}")
    (out / "imagesTr").mkdir(parents=True, exist_ok=True)
    (out / "labelsTr").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n_cases):
        wanted = None if lesions_per_case is None else lesions_per_case[i]
        case = synth_case(rng, shape, n_lesions=wanted, testbed=testbed)
        name = f"{prefix}_{first_case + i:03d}"
        image_path = out / "imagesTr" / f"{name}_0000.nii.gz"
        label_path = out / "labelsTr" / f"{name}.nii.gz"
        img = nib.Nifti1Image(case.image, case.affine)
        img.header.set_xyzt_units("mm")
        nib.save(img, str(image_path))
        lab = nib.Nifti1Image(case.label, case.affine)
        lab.header.set_xyzt_units("mm")
        nib.save(lab, str(label_path))
        for path in (image_path, label_path):
            os.chmod(path, FILE_MODE)
        cases.append(
            {"image": str(image_path), "label": str(label_path), "name": name, "n": case.n_lesions}
        )
    meta = {
        "name": "GFScreenSynthetic",
        "description": "synthetic CT with small lesions (medimg-gfscreen synth)",
        "tensorImageSize": "3D",
        "modality": {"0": "CT"},
        "labels": {"0": "background", "1": "lesion"},
        "numTraining": n_cases,
        "training": [
            {"image": f"./imagesTr/{c['name']}.nii.gz", "label": f"./labelsTr/{c['name']}.nii.gz"}
            for c in cases
        ],
        "lesions_per_case": {c["name"]: c["n"] for c in cases},
    }
    write_text(out / "dataset.json", json.dumps(meta, indent=2) + "\n")
    return write_datalist(
        cases, out / "datalist.json", val_fraction=val_fraction, seed=seed, overwrite=overwrite
    )
