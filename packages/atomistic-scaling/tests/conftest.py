from __future__ import annotations

import pytest
from ase import Atoms

from atomistic_scaling.synth import generate_structures


@pytest.fixture(scope="session")
def structures() -> list[Atoms]:
    return generate_structures(12, seed=3)
