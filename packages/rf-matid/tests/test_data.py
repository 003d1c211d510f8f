from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from rf_matid.classes import SUPERCLASSES, SYNTHETIC_CLASSES
from rf_matid.data import RFMatIDDataModule, parse_split_name
from rf_matid.io import FREQ_DOMAIN_DIR, TIME_LENGTH, RFMatIDFormatError, position_folder_name
from rf_matid.protocols import PROTOCOL_BINS


@pytest.mark.parametrize(
    ("name", "expected"),
    [("S1", ("S1", 0)), ("S2-mod2", ("S2", 2)), ("S3-mod1", ("S3", 1))],
)
def test_parse_split_name(name: str, expected: tuple[str, int]) -> None:
    assert parse_split_name(name) == expected


@pytest.mark.parametrize(
    "name", ["S1-mod1", "S2", "S4-mod1", "S2-mod4", "s1", "S2-mod", "S2-modx", "S2-mod0"]
)
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
    with pytest.raises(RFMatIDFormatError, match="not a directory") as info:
        _ = dm.num_classes
    assert info.value.path == str(tmp_path / "nowhere")


def test_split_seed_not_seed_drives_the_split(tiny_dataset: Path) -> None:
    def indices(**kwargs) -> dict[str, np.ndarray]:
        dm = RFMatIDDataModule(str(tiny_dataset), split="S2-mod1", batch_size=16, **kwargs)
        dm.setup()
        return {part: ds.indices for part, ds in dm._datasets.items()}

    first = indices(seed=1, split_seed=7)
    second = indices(seed=2, split_seed=7)
    for part in ("train", "val", "test"):
        np.testing.assert_array_equal(first[part], second[part])
    assert not np.array_equal(indices(seed=1, split_seed=8)["val"], first["val"])
    shuffled = [
        next(iter(RFMatIDDataModule(str(tiny_dataset), seed=s, batch_size=16).train_dataloader()))
        for s in (1, 2)
    ]
    assert not torch.equal(shuffled[0]["y"], shuffled[1]["y"])  # seed still shuffles


def add_folder(root: Path, name: str) -> Path:
    """Copy one sample of ``root`` into a new position folder called ``name``."""
    source = next((root / FREQ_DOMAIN_DIR).glob("*/*.csv"))
    folder = root / FREQ_DOMAIN_DIR / name
    folder.mkdir()
    shutil.copy(source, folder / "0000.csv")
    return folder


@pytest.mark.parametrize(
    "name",
    [
        "ms46131a-4To43.5GHz-2048-brick01-200mm-zdeg",  # malformed angle
        "ms46131a-4To43.5GHz-2048-brick-01-200mm-0deg",  # '-' in the class name
    ],
)
def test_skip_bad_works_through_the_datamodule(
    small_dataset: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    bad = add_folder(small_dataset, name)
    with pytest.raises(RFMatIDFormatError) as info:
        _ = RFMatIDDataModule(str(small_dataset)).num_classes
    assert info.value.path == str(bad)
    with caplog.at_level(logging.WARNING, logger="rf_matid"):
        dm = RFMatIDDataModule(str(small_dataset), skip_bad=True, batch_size=8)
        assert dm.class_names == ["brick01", "wood02"] and dm.seq_len == 2048
        assert sum(dm.split_sizes().values()) == 84
    assert bad.name in caplog.text
    recorded = [path for path, _ in dm.skipped]
    assert str(bad) in recorded  # the folder, from summarize()
    assert f"{FREQ_DOMAIN_DIR}/{bad.name}/0000.csv" in recorded  # its sample, from the loader


def test_skip_bad_keeps_the_vocabulary_when_a_class_is_all_bad(
    small_dataset: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for csv in (small_dataset / FREQ_DOMAIN_DIR).glob("*wood02*/*.csv"):
        csv.write_text("freq_hz,real,imag\n4e9,x,0\n")
    dm = RFMatIDDataModule(str(small_dataset), skip_bad=True, batch_size=8)
    with caplog.at_level(logging.WARNING, logger="rf_matid"):
        dm.setup()
    assert dm.class_names == ["brick01", "wood02"] and "wood02" in caplog.text
    labels = torch.cat([batch["y"] for batch in dm.train_dataloader()])
    assert set(labels.tolist()) == {0}  # brick01 keeps index 0
    assert len(dm.skipped) == 42
    with pytest.raises(RFMatIDFormatError):
        RFMatIDDataModule(str(small_dataset)).setup()


def test_super_classes_unknown_class_names_its_folder(small_dataset: Path) -> None:
    folder = add_folder(small_dataset, position_folder_name("metal01", 200, 0))
    assert RFMatIDDataModule(str(small_dataset)).num_classes == 3  # fine-grained: any name
    for skip_bad in (False, True):
        dm = RFMatIDDataModule(
            str(small_dataset), application_mode="super_classes", skip_bad=skip_bad
        )
        with pytest.raises(RFMatIDFormatError, match="no known superclass prefix") as info:
            _ = dm.num_classes
        assert (info.value.path, info.value.field) == (str(folder), "class_name")
