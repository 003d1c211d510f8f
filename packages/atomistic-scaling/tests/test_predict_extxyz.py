"""``predict`` names every structure it predicts (issue 39): next to ``predictions.pt`` it writes
``predictions.extxyz`` with each structure's source file and frame, the predicted and the
reference energy and forces. At HEAD d9942d3 ``predict`` wrote only ``predictions.pt``, whose
rows say which structure they are only by their position in the (shuffled) split: every test
here fails there (no ``predictions.extxyz``)."""

from __future__ import annotations

from pathlib import Path

import ase.io
import numpy as np
import pytest
import torch
from ase import Atoms

from atomistic_scaling.cli import main
from atomistic_scaling.io import write_extxyz
from atomistic_scaling.synth import generate_structures
from iclr26_common.testing import assert_one_line_error, run_main


def _write(path: Path, n: int, seed: int) -> Path:
    return write_extxyz(path, generate_structures(n, seed=seed))


def _predict(
    tmp_path: Path, capsys: pytest.CaptureFixture, *data: str, folder: str = "run"
) -> list:
    out = tmp_path / folder
    args = [
        "predict",
        "--config",
        "tiny",
        "--trainer.logger=false",  # the run folder is default_root_dir
        f"--trainer.default_root_dir={out}",
        "--trainer.enable_progress_bar=false",
        *data,
    ]
    run = run_main(main, args, capsys, cwd=tmp_path)
    assert run.code == 0, run.err[-3000:]
    assert f"wrote {out / 'predictions.extxyz'}" in run.out
    frames = ase.io.read(out / "predictions.extxyz", ":")
    saved = torch.load(out / "predictions.pt", weights_only=True)
    # the predictions are the ones of predictions.pt, in its order
    assert [f.info["split_index"] for f in frames] == saved["index"].tolist()
    np.testing.assert_allclose(
        [f.info["pred_energy"] for f in frames], saved["energy"].double().numpy(), rtol=1e-6
    )
    for frame, forces in zip(frames, saved["forces"], strict=True):
        np.testing.assert_allclose(frame.arrays["pred_forces"], forces.double(), atol=1e-6)
    return frames


def test_predict_extxyz_names_each_test_file_frame(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Separate test files: every frame of them, in order, under the file name as given, with its
    own reference energy, forces and positions."""
    train = _write(tmp_path / "train.xyz", 12, seed=3)
    test = _write(tmp_path / "new.xyz", 5, seed=4)
    frames = _predict(
        tmp_path, capsys, f"--data.train_files=[{train.name}]", f"--data.test_files=[{test.name}]"
    )
    reference = ase.io.read(test, ":")
    assert [f.info["source_file"] for f in frames] == [test.name] * 5  # the user's path, as given
    assert [f.info["frame"] for f in frames] == list(range(5))
    for frame, ref in zip(frames, reference, strict=True):
        assert frame.info["ref_energy"] == pytest.approx(ref.info["REF_energy"], abs=1e-8)
        np.testing.assert_allclose(frame.arrays["ref_forces"], ref.arrays["REF_forces"], atol=1e-7)
        np.testing.assert_allclose(frame.positions, ref.positions, atol=1e-7)
        assert frame.get_chemical_symbols() == ref.get_chemical_symbols()


def test_predict_extxyz_ids_survive_the_shuffled_split_and_rotation(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The test fraction of two shuffled training files, each structure rotated: the ids still
    point at the frame the prediction is for (same elements, same reference energy, same
    interatomic distances, forces rotated with the positions)."""
    files = [_write(tmp_path / "a.xyz", 12, seed=3), _write(tmp_path / "b.xyz", 12, seed=5)]
    frames = _predict(
        tmp_path,
        capsys,
        f"--data.train_files=[{files[0]},{files[1]}]",
        "--data.test_fraction=0.25",
        "--data.random_orientation=true",
    )
    assert len(frames) == 6
    ids = [(f.info["source_file"], f.info["frame"]) for f in frames]
    assert len(set(ids)) == 6 and {source for source, _ in ids} <= {str(p) for p in files}
    sources = {str(p): ase.io.read(p, ":") for p in files}
    for frame, (source, index) in zip(frames, ids, strict=True):
        ref = sources[source][index]
        assert frame.get_chemical_symbols() == ref.get_chemical_symbols()
        assert frame.info["ref_energy"] == pytest.approx(ref.info["REF_energy"], abs=1e-8)
        np.testing.assert_allclose(
            frame.get_all_distances(mic=True), ref.get_all_distances(mic=True), atol=1e-5
        )
        np.testing.assert_allclose(  # |F_i| is rotation invariant
            np.linalg.norm(frame.arrays["ref_forces"], axis=1),
            np.linalg.norm(ref.arrays["REF_forces"], axis=1),
            atol=1e-6,
        )


def test_predict_refuses_an_existing_extxyz_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A ``predictions.extxyz`` in the run folder is one line naming it, and nothing is written
    (no ``predictions.pt`` either)."""
    out = tmp_path / "run"
    out.mkdir()
    existing = out / "predictions.extxyz"
    existing.write_text("mine\n")
    args = ["predict", "--config", "tiny", "--trainer.logger=false"]
    line = assert_one_line_error(
        main, [*args, f"--trainer.default_root_dir={out}"], capsys, drop_earlier=True
    )
    assert f"{existing}: exists" in line and "pass --overwrite" in line, line
    assert existing.read_text() == "mine\n" and sorted(p.name for p in out.iterdir()) == [
        "predictions.extxyz"
    ]
    # --overwrite replaces it, as every other command's (d875146: no such option: refused for good)
    assert main([*args, f"--trainer.default_root_dir={out}", "--overwrite"]) == 0
    assert existing.read_text().splitlines()[0].strip().isdigit()  # an extxyz: the atom count
    assert (out / "predictions.pt").is_file()
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in out.iterdir())


def test_predict_needs_no_labels(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Issue 39 review: ``predict`` on new structures without ``REF_energy`` failed with
    ``unlab.xyz: frame 0: missing energy key 'REF_energy'``. With ``--data.test_files`` it reads
    only those files (no training files given here: the references are the checkpoint's), and a
    frame without labels gets its ids and predictions and no reference columns. The predictions
    are those of the same structures with labels (labels never enter a prediction)."""
    labelled = _write(tmp_path / "new.xyz", 5, seed=4)
    reference = ase.io.read(labelled, ":")

    def bare(atoms: Atoms, keep_labels: bool) -> Atoms:
        out = Atoms(
            numbers=atoms.numbers, positions=atoms.positions, cell=atoms.cell, pbc=atoms.pbc
        )
        if keep_labels:
            out.info["REF_energy"] = atoms.info["REF_energy"]
            out.arrays["REF_forces"] = atoms.arrays["REF_forces"]
        return out

    ase.io.write(tmp_path / "unlab.xyz", [bare(a, False) for a in reference], format="extxyz")
    mixed = [bare(a, i < 2) for i, a in enumerate(reference)]  # frames 0, 1 labelled
    ase.io.write(tmp_path / "mixed.xyz", mixed, format="extxyz")
    with_labels = _predict(tmp_path, capsys, f"--data.test_files=[{labelled.name}]", folder="a")
    frames = _predict(tmp_path, capsys, "--data.test_files=[unlab.xyz,mixed.xyz]", folder="b")
    assert [(f.info["source_file"], f.info["frame"]) for f in frames] == [
        (name, i) for name in ("unlab.xyz", "mixed.xyz") for i in range(5)
    ]
    for frame, labelled_frame in zip(frames, with_labels * 2, strict=True):
        assert frame.info["pred_energy"] == pytest.approx(labelled_frame.info["pred_energy"])
        np.testing.assert_allclose(
            frame.arrays["pred_forces"], labelled_frame.arrays["pred_forces"], atol=1e-6
        )
    has_ref = [("ref_energy" in f.info, "ref_forces" in f.arrays) for f in frames]
    assert has_ref == [(False, False)] * 5 + [(True, True)] * 2 + [(False, False)] * 3
    for frame, ref in zip(frames[5:7], reference[:2], strict=True):
        assert frame.info["ref_energy"] == pytest.approx(ref.info["REF_energy"], abs=1e-8)
        np.testing.assert_allclose(frame.arrays["ref_forces"], ref.arrays["REF_forces"], atol=1e-7)


def test_a_predict_data_module_reads_no_training_data(tmp_path: Path) -> None:
    """``setup("predict")`` with test files reads those only: no training or validation
    structures (none generated either), labels optional; ``setup("fit")`` still requires them."""
    from atomistic_scaling.data import AtomisticDataModule
    from atomistic_scaling.io import AtomisticFormatError

    frames = [
        Atoms(numbers=a.numbers, positions=a.positions, cell=a.cell, pbc=a.pbc)
        for a in generate_structures(3, seed=4)
    ]
    ase.io.write(tmp_path / "unlab.xyz", frames, format="extxyz")
    module = AtomisticDataModule(test_files=[str(tmp_path / "unlab.xyz")])
    module.setup("predict")
    assert module.train_structures is None and module.val_structures == []
    assert len(module.test_set) == 3 and not any("energy" in a.info for a in module.test_structures)
    assert not hasattr(module.test_set[0], "energy")
    with pytest.raises(AtomisticFormatError, match="frame 0: missing energy key 'REF_energy'"):
        AtomisticDataModule(train_files=[str(tmp_path / "unlab.xyz")]).setup("fit")
