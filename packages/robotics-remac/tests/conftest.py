from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """The policies here are tiny: intra-op threads only add synchronisation (on a loaded 2-core
    machine two threads made this suite 4x slower). Restored after each test."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 expert episodes written in the LeRobot v2.1 layout."""
    from robotics_remac.data import collect_demonstrations
    from robotics_remac.dataset_writer import write_lerobot_dataset

    root = tmp_path_factory.mktemp("remac-demos") / "demos"
    return write_lerobot_dataset(root, collect_demonstrations(6, seed=3))
