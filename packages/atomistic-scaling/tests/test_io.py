from __future__ import annotations

from pathlib import Path

import ase.db
import ase.io
import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk
from ase.calculators.singlepoint import SinglePointCalculator

from atomistic_scaling.io import AtomisticFormatError, read_structures, write_extxyz


def test_extxyz_round_trip(structures: list[Atoms], tmp_path: Path) -> None:
    path = write_extxyz(tmp_path / "d.xyz", structures)
    assert "REF_energy" in path.read_text()
    back = read_structures(path)
    assert len(back) == len(structures)
    for a, b in zip(structures, back, strict=True):
        assert a.info["energy"] == pytest.approx(b.info["energy"])
        np.testing.assert_allclose(a.arrays["forces"], b.arrays["forces"], atol=1e-7)
        np.testing.assert_allclose(a.cell[:], b.cell[:], atol=1e-7)
        assert list(a.pbc) == list(b.pbc)


def test_refuses_to_overwrite(structures: list[Atoms], tmp_path: Path) -> None:
    write_extxyz(tmp_path / "d.xyz", structures[:1])
    with pytest.raises(FileExistsError):
        write_extxyz(tmp_path / "d.xyz", structures[:1])


def _plain(atoms: Atoms, energy: float, forces: np.ndarray) -> Atoms:
    atoms = atoms.copy()
    atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces)
    return atoms


def test_plain_energy_forces_keys_and_trajectory(tmp_path: Path) -> None:
    atoms = bulk("Cu", "fcc", a=3.6).repeat(2)
    forces = np.arange(len(atoms) * 3, dtype=float).reshape(-1, 3)
    for name in ("plain.xyz", "plain.traj"):
        ase.io.write(tmp_path / name, [_plain(atoms, -1.5, forces)])
        (back,) = read_structures(tmp_path / name)
        assert back.info["energy"] == pytest.approx(-1.5)
        np.testing.assert_allclose(back.arrays["forces"], forces)


def test_custom_keys(structures: list[Atoms], tmp_path: Path) -> None:
    path = write_extxyz(tmp_path / "d.xyz", structures[:2], "dft_E", "dft_F")
    back = read_structures(path, "dft_E", "dft_F")
    assert back[1].info["energy"] == pytest.approx(structures[1].info["energy"])
    with pytest.raises(AtomisticFormatError, match=r"d\.xyz: frame 0: missing energy key 'REF_e"):
        read_structures(path)


def test_ase_database(structures: list[Atoms], tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    with ase.db.connect(path) as db:
        for atoms in structures[:3]:
            db.write(
                Atoms(atoms.numbers, atoms.positions, cell=atoms.cell, pbc=atoms.pbc),
                REF_energy=atoms.info["energy"],
                data={"REF_forces": atoms.arrays["forces"]},
            )
    back = read_structures(path)
    assert len(back) == 3
    np.testing.assert_allclose(back[2].arrays["forces"], structures[2].arrays["forces"])


def test_missing_forces_names_file_and_frame(structures: list[Atoms], tmp_path: Path) -> None:
    frames = [a.copy() for a in structures[:3]]
    for a, src in zip(frames, structures[:3], strict=True):
        a.info["REF_energy"] = src.info["energy"]
        a.arrays["REF_forces"] = src.arrays["forces"]
        a.info.pop("energy", None)
        a.arrays.pop("forces", None)
    del frames[2].arrays["REF_forces"]
    ase.io.write(tmp_path / "bad.xyz", frames, format="extxyz")
    with pytest.raises(AtomisticFormatError, match=r"bad\.xyz: frame 2: missing forces key"):
        read_structures(tmp_path / "bad.xyz")


def test_mismatched_atom_count_names_frame(structures: list[Atoms], tmp_path: Path) -> None:
    path = write_extxyz(tmp_path / "d.xyz", structures[:2])
    lines = path.read_text().splitlines()
    n0 = int(lines[0])
    lines[0] = str(n0 + 1)  # header claims one more atom than frame 0 has
    (tmp_path / "m.xyz").write_text("\n".join(lines) + "\n")
    with pytest.raises(AtomisticFormatError, match=r"m\.xyz"):
        read_structures(tmp_path / "m.xyz")


def test_nan_energy_and_malformed_text(tmp_path: Path) -> None:
    atoms = bulk("Al", "fcc", a=4.05)
    atoms.info["REF_energy"] = float("nan")
    atoms.arrays["REF_forces"] = np.zeros((1, 3))
    ase.io.write(tmp_path / "nan.xyz", atoms, format="extxyz")
    with pytest.raises(AtomisticFormatError, match=r"nan\.xyz: frame 0: energy .* not finite"):
        read_structures(tmp_path / "nan.xyz")
    (tmp_path / "junk.xyz").write_text("two\nnot a comment\nX 1 2\n")
    with pytest.raises(AtomisticFormatError, match=r"junk\.xyz: cannot parse"):
        read_structures(tmp_path / "junk.xyz")
    with pytest.raises(FileNotFoundError, match=r"missing\.xyz"):
        read_structures(tmp_path / "missing.xyz")
