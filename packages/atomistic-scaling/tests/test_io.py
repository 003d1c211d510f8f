from __future__ import annotations

from pathlib import Path

import ase.db
import ase.io
import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk
from ase.calculators.singlepoint import SinglePointCalculator

from atomistic_scaling.io import (
    AtomisticFormatError,
    LabelFallbackWarning,
    read_structures,
    write_extxyz,
)

CU_BODY = "Cu 0 0 0 0.1 0 0\nCu 1.8 1.8 0 -0.1 0 0\n"
PROPS = 'Properties=species:S:1:pos:R:3:REF_forces:R:3 REF_energy=-1.0 pbc="T T T"'


def _frame(lattice: str | None, body: str = CU_BODY) -> str:
    head = f'Lattice="{lattice}" ' if lattice is not None else ""
    return f"{body.count(chr(10))}\n{head}{PROPS}\n{body}"


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
    with pytest.raises(FileExistsError) as info:
        write_extxyz(tmp_path / "d.xyz", structures[:1])
    # common's wording (iclr26_common.outputs.check_out_file), issue 36
    assert str(info.value) == f"{tmp_path / 'd.xyz'}: exists; pass --overwrite to replace it"


def _plain(atoms: Atoms, energy: float, forces: np.ndarray) -> Atoms:
    atoms = atoms.copy()
    atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces)
    return atoms


def test_plain_energy_forces_keys_and_trajectory(tmp_path: Path) -> None:
    atoms = bulk("Cu", "fcc", a=3.6).repeat(2)
    forces = np.arange(len(atoms) * 3, dtype=float).reshape(-1, 3)
    for name in ("plain.xyz", "plain.traj"):
        ase.io.write(tmp_path / name, [_plain(atoms, -1.5, forces)])
        with pytest.warns(LabelFallbackWarning):
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
    with pytest.raises(AtomisticFormatError, match=r"junk\.xyz: frame 0: cannot parse"):
        read_structures(tmp_path / "junk.xyz")
    with pytest.raises(FileNotFoundError, match=r"missing\.xyz"):
        read_structures(tmp_path / "missing.xyz")


def test_parse_error_names_the_frame(tmp_path: Path) -> None:
    """An 8-number Lattice in frame 2 is reported with the file and frame (before: the file
    only, from a whole-file ase.io.read)."""
    good = _frame("3.6 0 0 0 3.6 0 0 0 3.6")
    (tmp_path / "lat8.xyz").write_text(good + good + _frame("3.6 0 0 0 3.6 0 0 0"))
    with pytest.raises(AtomisticFormatError, match=r"lat8\.xyz: frame 2: cannot parse: .*9-long"):
        read_structures(tmp_path / "lat8.xyz")


@pytest.mark.parametrize(
    ("name", "lattice"), [("missing", None), ("singular", "3.6 0 0 3.6 0 0 0 0 3.6")]
)
def test_missing_or_singular_periodic_cell_names_file_and_frame(
    tmp_path: Path, name: str, lattice: str | None
) -> None:
    """Before: read silently, then a bare 'periodic structure with a singular cell' from the
    neighbour list, without file or frame."""
    good = _frame("3.6 0 0 0 3.6 0 0 0 3.6")
    (tmp_path / f"{name}.xyz").write_text(good + _frame(lattice))
    with pytest.raises(AtomisticFormatError, match=rf"{name}\.xyz: frame 1: periodic .* singular"):
        read_structures(tmp_path / f"{name}.xyz")


def test_atomic_number_out_of_range_is_refused(tmp_path: Path) -> None:
    """Z = 100 used to pass the reader and end in an IndexError in the embedding."""
    atoms = bulk("Cu", "fcc", a=3.6).repeat(2)
    atoms.numbers[3] = 100
    atoms.info["REF_energy"] = -1.0
    atoms.arrays["REF_forces"] = np.zeros((len(atoms), 3))
    ase.io.write(tmp_path / "fm.xyz", atoms, format="extxyz")
    with pytest.raises(AtomisticFormatError, match=r"fm\.xyz: frame 0: atomic numbers \[100\]"):
        read_structures(tmp_path / "fm.xyz")


def test_impossibly_close_atoms_are_refused(tmp_path: Path) -> None:
    """32 atoms in 1 Å³ (min distance ~0.1 Å) used to be accepted (391,590 edges at 4.5 Å)."""
    rng = np.random.default_rng(0)
    atoms = Atoms("Cu32", positions=rng.random((32, 3)), cell=np.eye(3), pbc=True)
    atoms.info["REF_energy"] = -1.0
    atoms.arrays["REF_forces"] = np.zeros((32, 3))
    ase.io.write(tmp_path / "dense.xyz", atoms, format="extxyz")
    with pytest.raises(
        AtomisticFormatError,
        match=r"dense\.xyz: frame 0: atoms \d+ and \d+ "
        r"are .* Å apart, closer than min_distance=0\.5",
    ):
        read_structures(tmp_path / "dense.xyz")
    with pytest.raises(AtomisticFormatError) as info:
        read_structures(tmp_path / "dense.xyz")
    assert "--data.min_distance" in str(info.value) and "--min_distance" in str(info.value)
    assert len(read_structures(tmp_path / "dense.xyz", min_distance=0)) == 1  # the named option
    fine = bulk("Cu", "fcc", a=3.6).repeat(2)  # nearest neighbours 2.55 Å
    fine.info["REF_energy"] = -1.0
    fine.arrays["REF_forces"] = np.zeros((len(fine), 3))
    ase.io.write(tmp_path / "fine.xyz", fine, format="extxyz")
    assert len(read_structures(tmp_path / "fine.xyz", min_distance=2.5)) == 1


def _labelled(atoms: Atoms, ref: bool) -> Atoms:
    atoms = atoms.copy()
    forces = np.full((len(atoms), 3), 0.25)
    if ref:
        atoms.info["REF_energy"] = -2.0
        atoms.arrays["REF_forces"] = forces
        return atoms
    return _plain(atoms, -3.0, forces)


def test_one_file_never_mixes_label_sources(tmp_path: Path) -> None:
    """Frame 1 lacks REF_ keys while frame 0 has them: before, frame 1 silently fell back to
    its plain energy/forces."""
    cell = bulk("Cu", "fcc", a=3.6).repeat(2)
    ase.io.write(tmp_path / "mixed.xyz", [_labelled(cell, True), _labelled(cell, False)])
    with pytest.raises(
        AtomisticFormatError,
        match=r"mixed\.xyz: frame 1: missing energy key "
        r"'REF_energy' that other frames of this file have",
    ):
        read_structures(tmp_path / "mixed.xyz")


def test_ref_energy_with_plain_forces_is_refused(tmp_path: Path) -> None:
    """Every frame has REF_energy but only plain forces: before, energy came from REF_energy and
    forces from the calculator's plain forces, two label sources in one file."""
    cell = bulk("Cu", "fcc", a=3.6).repeat(2)
    frames = [_labelled(cell, False), _labelled(cell, False)]
    for atoms in frames:
        atoms.info["REF_energy"] = -2.0
    ase.io.write(tmp_path / "pair.xyz", frames)
    with pytest.raises(
        AtomisticFormatError,
        match=r"pair\.xyz: the frames have 'REF_energy' but no 'REF_forces': refusing",
    ):
        read_structures(tmp_path / "pair.xyz")
    named = read_structures(tmp_path / "pair.xyz", forces_key="forces")  # named: as given
    assert [a.info["energy"] for a in named] == [-2.0, -2.0]


def test_whole_file_fallback_to_plain_keys_warns(tmp_path: Path) -> None:
    cell = bulk("Cu", "fcc", a=3.6).repeat(2)
    ase.io.write(tmp_path / "plain.xyz", [_labelled(cell, False), _labelled(cell, False)])
    with pytest.warns(LabelFallbackWarning, match=r"plain\.xyz: no frame has 'REF_energy'"):
        frames = read_structures(tmp_path / "plain.xyz")
    assert [a.info["energy"] for a in frames] == [-3.0, -3.0]


def test_missing_key_hint_names_flags_the_cli_accepts(tmp_path: Path) -> None:
    """The hint used to say '--energy-key', a flag no command has."""
    import re

    from atomistic_scaling.cli import sweep_parser

    atoms = bulk("Cu", "fcc", a=3.6)
    atoms.info["energy"] = -1.0
    atoms.arrays["forces"] = np.zeros((1, 3))
    path = write_extxyz(tmp_path / "d.xyz", [atoms], energy_key="E_dft")
    with pytest.raises(AtomisticFormatError) as info:
        read_structures(path)
    flags = re.findall(r"--[\w.]+", str(info.value))
    assert flags == ["--data.energy_key", "--energy_key"], str(info.value)
    sweep_flags = {a for action in sweep_parser()._actions for a in action.option_strings}
    assert "--energy_key" in sweep_flags
    from atomistic_scaling.data import AtomisticDataModule

    assert "energy_key" in AtomisticDataModule.__init__.__code__.co_varnames  # --data.energy_key
