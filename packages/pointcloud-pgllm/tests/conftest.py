from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

SMALL_CLASSES = ["airplane", "bottle", "chair", "cup", "stool", "table"]


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """The encoders are many small kernels; on the shared 2-core machine one thread is faster."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def small_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ModelNet-like OFF tree: 6 classes x (5 train, 3 test), every 4th header glued."""
    from pointcloud_pgllm.synth import generate_dataset

    root = tmp_path_factory.mktemp("pgllm") / "tree"
    return generate_dataset(root, SMALL_CLASSES, n_train=5, n_test=3, seed=1, glued_fraction=0.25)
