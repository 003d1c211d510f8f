from __future__ import annotations

from pathlib import Path

import pytest
from ase import Atoms

from atomistic_scaling.synth import generate_structures


@pytest.fixture(scope="session")
def structures() -> list[Atoms]:
    return generate_structures(12, seed=3)


@pytest.fixture(scope="session")
def structures_xyz(tmp_path_factory: pytest.TempPathFactory, structures: list[Atoms]) -> Path:
    """The session's 12 structures as an extxyz file (REF_energy / REF_forces)."""
    from atomistic_scaling.io import write_extxyz

    return write_extxyz(tmp_path_factory.mktemp("xyz") / "structures.xyz", structures)
