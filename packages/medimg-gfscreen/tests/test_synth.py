from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

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
