from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rf_matid.classes import SUPERCLASSES, SYNTHETIC_CLASSES
from rf_matid.data import RFMatIDDataModule, parse_split_name
from rf_matid.io import TIME_LENGTH
from rf_matid.protocols import PROTOCOL_BINS


@pytest.mark.parametrize(
    ("name", "expected"),
    [("S1", ("S1", 0)), ("S2-mod2", ("S2", 2)), ("S3-mod1", ("S3", 1))],
)
def test_parse_split_name(name: str, expected: tuple[str, int]) -> None:
    assert parse_split_name(name) == expected


@pytest.mark.parametrize("name", ["S1-mod1", "S2", "S4-mod1", "S2-mod4", "s1"])
def test_parse_split_name_rejects(name: str) -> None:
    with pytest.raises(ValueError, match="split"):
        parse_split_name(name)


@pytest.mark.parametrize("protocol", ["P1", "P2", "P3", "P4", "P5"])
def test_seq_len_follows_protocol_and_batches_are_whitened(
    tiny_dataset: Path, protocol: str
) -> None:
    dm = RFMatIDDataModule(str(tiny_dataset), protocol=protocol, batch_size=8)
    assert dm.seq_len == PROTOCOL_BINS[protocol]
    assert dm.num_classes == 16 and dm.class_names == list(SYNTHETIC_CLASSES)
    batch = next(iter(dm.train_dataloader()))
    assert batch["x"].shape == (8, 2, PROTOCOL_BINS[protocol])
    assert batch["x"].dtype == torch.float32 and batch["y"].dtype == torch.long
    mean = batch["x"].mean(dim=-1)
    assert torch.allclose(mean, torch.zeros_like(mean), atol=1e-4)


@pytest.mark.parametrize(
    "split", ["S1", "S2-mod1", "S2-mod2", "S2-mod3", "S3-mod1", "S3-mod2", "S3-mod3"]
)
def test_splits_are_disjoint_and_cover_the_dataset(tiny_dataset: Path, split: str) -> None:
    dm = RFMatIDDataModule(str(tiny_dataset), split=split)
    dm.setup()
    parts = {name: set(ds.indices.tolist()) for name, ds in dm._datasets.items()}
    assert not parts["train"] & parts["test"] and not parts["train"] & parts["val"]
    assert not parts["val"] & parts["test"]
    assert all(parts.values())


def test_cross_distance_test_set_holds_only_near_distances(tiny_dataset: Path) -> None:
    dm = RFMatIDDataModule(str(tiny_dataset), split="S2-mod2")
    dm.setup()
    distances = np.asarray(dm._data.distance_mm)
    assert distances[dm._datasets["test"].indices].max() <= 700
    assert distances[dm._datasets["train"].indices].min() >= 750


def test_super_classes_mode(tiny_dataset: Path) -> None:
    dm = RFMatIDDataModule(str(tiny_dataset), application_mode="super_classes", batch_size=64)
    assert dm.class_names == list(SUPERCLASSES)
    labels = torch.cat([b["y"] for b in dm.train_dataloader()])
    assert set(labels.tolist()) == set(range(5))


def test_time_domain_batches(tiny_time_dataset: Path) -> None:
    dm = RFMatIDDataModule(str(tiny_time_dataset), domain="time", batch_size=4)
    assert dm.in_channels == 1 and dm.seq_len == TIME_LENGTH and dm.num_classes == 3
    batch = next(iter(dm.test_dataloader()))
    assert batch["x"].shape == (4, 1, TIME_LENGTH)


def test_invalid_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="protocol"):
        RFMatIDDataModule("x", protocol="P9")
    with pytest.raises(ValueError, match="application_mode"):
        RFMatIDDataModule("x", application_mode="coarse")
    with pytest.raises(ValueError, match="domain"):
        RFMatIDDataModule("x", domain="spatial")


def test_missing_data_dir_names_the_path(tmp_path: Path) -> None:
    dm = RFMatIDDataModule(str(tmp_path / "nowhere"))
    with pytest.raises(Exception, match="nowhere"):
        _ = dm.num_classes
