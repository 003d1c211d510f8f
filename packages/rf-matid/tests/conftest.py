from __future__ import annotations

from pathlib import Path

import pytest

TINY_DISTANCES = list(range(200, 2001, 300))  # 7 distances: every S2 mod has train and test
TINY_ANGLES = list(range(0, 11, 2))  # 6 angles: every S3 mod has train and test
TIME_CLASSES = ["brick01", "glass01", "wood03"]


@pytest.fixture(scope="session", autouse=True)
def private_cache_root(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The workspace cache (``ICLR26_CACHE``) in a temporary folder for the whole session, so
    tests never write into ``~/.cache/iclr26``; subprocesses inherit it."""
    with pytest.MonkeyPatch.context() as patch:
        root = tmp_path_factory.mktemp("iclr26-cache")
        patch.setenv("ICLR26_CACHE", str(root))
        yield root


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """16 classes × 7 distances × 6 angles × 1 sample, frequency CSVs only (672 spectra)."""
    from rf_matid.synth_dataset import generate_dataset

    root = tmp_path_factory.mktemp("rf-matid-tiny")
    return generate_dataset(
        root, distances_mm=TINY_DISTANCES, angles_deg=TINY_ANGLES, seed=0, write_time=False
    )


@pytest.fixture(scope="session")
def tiny_time_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 classes × 7 distances × 6 angles with frequency and time CSVs."""
    from rf_matid.synth_dataset import generate_dataset

    root = tmp_path_factory.mktemp("rf-matid-tiny-time")
    return generate_dataset(
        root,
        classes=TIME_CLASSES,
        distances_mm=TINY_DISTANCES,
        angles_deg=TINY_ANGLES,
        seed=1,
        write_time=True,
    )


@pytest.fixture
def small_dataset(tmp_path: Path) -> Path:
    """A fresh 2 classes × 7 distances × 6 angles root (84 spectra, frequency CSVs only).

    Function-scoped, so a test may add bad files to it.
    """
    from rf_matid.synth_dataset import generate_dataset

    return generate_dataset(
        tmp_path / "small",
        classes=["brick01", "wood02"],
        distances_mm=TINY_DISTANCES,
        angles_deg=TINY_ANGLES,
        seed=2,
        write_time=False,
    )


@pytest.fixture
def benchmark_row():  # type: ignore[no-untyped-def]
    """A factory of made-up benchmark cells for tests that need rows without training:
    ``benchmark_row(**fields)`` is a :class:`rf_matid.benchmark.BenchmarkRow` of an mlp on P1/S1,
    seed 0, 1 epoch, 10/2/5 train/val/test spectra, accuracies 0.5, 0.1 s of training, with
    ``fields`` in place of any of these (or of the optional fields)."""
    from rf_matid.benchmark import BenchmarkRow

    defaults = {
        "arch": "mlp",
        "protocol": "P1",
        "split": "S1",
        "application_mode": "all_classes",
        "seed": 0,
        "epochs": 1,
        "n_train": 10,
        "n_val": 2,
        "n_test": 5,
        "accuracy": 0.5,
        "macro_f1": 0.5,
        "val_accuracy": 0.5,
        "train_seconds": 0.1,
    }

    def make(**fields: object) -> BenchmarkRow:
        return BenchmarkRow(**{**defaults, **fields})  # type: ignore[arg-type]

    return make
