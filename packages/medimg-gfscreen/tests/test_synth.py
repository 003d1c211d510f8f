from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from medimg_gfscreen import synth
from medimg_gfscreen.synth import ORGAN_HU, generate_dataset, synth_case


def test_written_layout_and_types(synth_dir: Path) -> None:
    images = sorted((synth_dir / "imagesTr").glob("*_0000.nii.gz"))
    labels = sorted((synth_dir / "labelsTr").glob("*.nii.gz"))
    assert len(images) == len(labels) == 6
    img = nib.load(images[0])
    lab = nib.load(labels[0])
    assert img.get_data_dtype() == np.int16 and lab.get_data_dtype() == np.uint8
    assert np.allclose(img.header.get_zooms(), (1, 1, 3))
    assert np.allclose(img.affine, lab.affine)
    assert nib.aff2axcodes(img.affine) == ("R", "A", "S")
    datalist = json.loads((synth_dir / "datalist.json").read_text())
    assert len(datalist["training"]) + len(datalist["validation"]) == 6


def test_lesions_carry_contrast_and_healthy_cases_exist() -> None:
    rng = np.random.default_rng(0)
    cases = [synth_case(rng, (64, 64, 32)) for _ in range(20)]
    healthy = [c for c in cases if c.n_lesions == 0]
    assert 2 <= len(healthy) <= 12  # ~30 %
    assert all(c.label.sum() == 0 for c in healthy)
    lesion_cases = [c for c in cases if c.n_lesions]
    assert all(1 <= c.n_lesions <= 3 and c.label.any() for c in lesion_cases)
    image = cases[0].image
    assert image.min() < -900 and image.max() > 600  # air and the bone ring are present


def test_lesion_voxels_differ_from_organ_on_average() -> None:
    rng = np.random.default_rng(1)
    diffs = []
    for _ in range(10):
        case = synth_case(rng, (64, 64, 32), n_lesions=2)
        assert case.n_lesions >= 1 and case.label.any()
        diffs.append(np.abs(case.image[case.label == 1].astype(float).mean() - ORGAN_HU))
    assert np.median(diffs) > 20


def test_generate_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("")
    with pytest.raises(FileExistsError):
        generate_dataset(tmp_path / "x", n_cases=1)


def _mimic_offsets(style: str) -> tuple[np.ndarray, np.ndarray]:
    """The mimics' HU offsets of a healthy 64x64x32 case (and its body mask), drawn alone."""
    from medimg_gfscreen.synth import _grid, _mimics

    shape, spacing = (64, 64, 32), (1.0, 1.0, 3.0)
    x, y, z = _grid(shape, spacing)
    body = (x / 28.0) ** 2 + (y / 22.0) ** 2 + (z / 80.0) ** 2 <= 1.0
    testbed = synth.Testbed(mimics=1, mimic_style=style)
    offsets = _mimics(
        np.random.default_rng(3),
        [x, y, z],
        (0.0, 0.0, 0.0),
        (12.0, 10.0, 40.0),
        np.zeros(shape, dtype=np.uint8),
        testbed,
        np.broadcast_to(body, shape),
    )
    return offsets, np.broadcast_to(body, shape)


def test_anatomic_mimics_are_hypodense_cysts_and_enhancing_tubes() -> None:
    """``anatomic`` mimics differ from lesions as CT look-alikes do: the cyst is hypodense
    (fluid) and larger than any lesion (radius >= 7 mm, lesions <= 6 mm), the vessel enhancing
    and tubular: thin, and longer than any lesion's 12 mm diameter (a random 3-D direction
    across the body, inside it). ``lesion_contrast`` vessels lie in one or two slices."""
    offsets, body = _mimic_offsets("anatomic")
    cyst, vessel = offsets < 0, offsets > 0
    assert cyst.sum() >= 4 / 3 * np.pi * 7**3 / 3 * 0.9  # a sphere of radius >= 7 mm
    assert (offsets[cyst] <= -40).all() and (offsets[vessel] >= 40).all()
    assert vessel.any() and not (vessel & ~body).any()
    where = np.argwhere(vessel) * np.array([1.0, 1.0, 3.0])  # mm
    assert np.linalg.norm(where.max(0) - where.min(0)) > 3 * 12.0
    assert vessel.sum() < cyst.sum()  # thin
    flat, _ = _mimic_offsets("lesion_contrast")
    assert np.flatnonzero((flat != 0).any(axis=(0, 1))).size <= 2 + 7  # vessel + cyst slices


def test_testbed_refuses_an_unknown_mimic_style() -> None:
    with pytest.raises(ValueError, match="mimic_style"):
        synth.Testbed(mimic_style="random")


def test_faint_mimics_keep_the_shapes_and_change_only_the_contrast() -> None:
    """``mimic_contrast_hu`` (the testbed pilots' "mimics fainter than lesions"): the same
    random stream draws the same cyst and vessel, at contrasts inside the given range instead
    of a lesion's 40-60 HU."""
    from medimg_gfscreen.synth import _grid, _mimics

    shape, spacing = (64, 64, 32), (1.0, 1.0, 3.0)
    x, y, z = _grid(shape, spacing)
    body = np.broadcast_to((x / 28.0) ** 2 + (y / 22.0) ** 2 <= 1.0, shape)

    def offsets(testbed: synth.Testbed) -> np.ndarray:
        args = ((0.0, 0.0, 0.0), (12.0, 10.0, 40.0), np.zeros(shape, np.uint8), testbed, body)
        return _mimics(np.random.default_rng(5), [x, y, z], *args)

    lesion_like = offsets(synth.Testbed(mimics=1))
    faint = offsets(synth.Testbed(mimics=1, mimic_contrast_hu=(15.0, 25.0)))
    assert np.array_equal(lesion_like != 0, faint != 0) and faint.any()
    assert (np.abs(faint[faint != 0]) >= 15).all() and (np.abs(faint[faint != 0]) <= 25).all()
    assert (np.abs(lesion_like[lesion_like != 0]) >= 40).all()
    with pytest.raises(ValueError, match="mimic_contrast_hu"):
        synth.Testbed(mimic_contrast_hu=(30.0, 20.0))
