from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rf_matid.splits import ALL_ANGLES_DEG, ALL_DISTANCES_MM, SPLITS, make_split, normalize_split

CONFIGS = [("S1", 0)] + [(split, mod) for split in ("S2", "S3") for mod in (1, 2, 3)]


def full_grid(samples_per_position: int = 2) -> tuple[np.ndarray, np.ndarray]:
    rows = [
        (d, a)
        for d, a in itertools.product(ALL_DISTANCES_MM, ALL_ANGLES_DEG)
        for _ in range(samples_per_position)
    ]
    distances, angles = np.array(rows).T
    return distances.astype(np.int32), angles.astype(np.int32)


README = Path(__file__).resolve().parents[1] / "README.md"


def documented_positions(cell: str, everything: tuple[int, ...]) -> set[int] | None:
    """Positions of one README split-table cell ('250, 400 mm', '200–700 mm', '≥ 750 mm', '3–10°');
    None for 'other distances/angles' (the complement of the test set)."""
    text = cell.replace("mm", "").replace("°", "").strip()
    if text.startswith("other"):
        return None
    if text.startswith(("≥", "≤")):
        bound = int(text[1:])
        return {v for v in everything if (v >= bound if text[0] == "≥" else v <= bound)}
    if "–" in text:
        low, high = (int(part) for part in text.split("–"))
        return {v for v in everything if low <= v <= high}
    return {int(part) for part in text.split(",")}


def test_split_tables_match_the_documented_tables() -> None:
    section = README.read_text(encoding="utf-8").split("### Splits", 1)[1].split("\n#", 1)[0]
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith(("| S2-mod", "| S3-mod"))
    ]
    assert len(rows) == 6
    for name, train_cell, test_cell in rows:
        key, mod = name.split("-mod")
        everything = ALL_DISTANCES_MM if key == "S2" else ALL_ANGLES_DEG
        test = documented_positions(test_cell, everything)
        train = documented_positions(train_cell, everything)
        assert test is not None
        assert set(SPLITS[key][int(mod)]["test"]) == test, name
        assert set(SPLITS[key][int(mod)]["train"]) == (
            set(everything) - test if train is None else train
        ), name


def test_split_tables_partition_the_positions() -> None:
    for key, everything in (("S2", ALL_DISTANCES_MM), ("S3", ALL_ANGLES_DEG)):
        for table in SPLITS[key].values():
            assert not set(table["train"]) & set(table["test"])
            assert set(table["train"]) | set(table["test"]) == set(everything)


@pytest.mark.parametrize(("split", "mod"), CONFIGS)
def test_parts_are_disjoint_and_cover_all(split: str, mod: int) -> None:
    distances, angles = full_grid()
    parts = make_split(distances, angles, split, mod)
    assert set(parts) == {"train", "val", "test"}
    merged = np.concatenate(list(parts.values()))
    assert all(part.dtype == np.int64 and len(part) > 0 for part in parts.values())
    assert len(np.unique(merged)) == len(merged) == len(distances)


def test_s1_train_is_upstream_random_split_and_val_test_partition_upstream_val() -> None:
    distances, angles = full_grid()
    n = len(distances)
    upstream_train, upstream_val = torch.utils.data.random_split(
        range(n), [int(0.7 * n), n - int(0.7 * n)], generator=torch.Generator().manual_seed(42)
    )
    parts = make_split(distances, angles, "S1", 0)
    np.testing.assert_array_equal(parts["train"], np.sort(list(upstream_train.indices)))
    val_order = list(upstream_val.indices)
    np.testing.assert_array_equal(parts["val"], np.sort(val_order[: len(val_order) // 3]))
    np.testing.assert_array_equal(parts["test"], np.sort(val_order[len(val_order) // 3 :]))
    assert len(parts["train"]) == int(0.7 * n)


@pytest.mark.parametrize(("split", "mod"), CONFIGS[1:])
def test_cross_splits_use_exact_position_sets(split: str, mod: int) -> None:
    distances, angles = full_grid()
    parts = make_split(distances, angles, split, mod)
    values = distances if split == "S2" else angles
    table = SPLITS[split][mod]
    assert set(values[parts["test"]]) == set(table["test"])
    assert set(values[parts["train"]]) == set(table["train"])
    assert set(values[parts["val"]]) <= set(table["train"])
    pool = len(parts["train"]) + len(parts["val"])
    assert len(parts["val"]) == round(0.1 * pool)
    expected_test = len(table["test"]) * (11 if split == "S2" else 37) * 2
    assert len(parts["test"]) == expected_test


def test_seed_controls_hold_out_and_is_deterministic() -> None:
    distances, angles = full_grid()
    first = make_split(distances, angles, "S2", 1, seed=7)
    again = make_split(distances, angles, "S2", 1, seed=7)
    other = make_split(distances, angles, "S2", 1, seed=8)
    np.testing.assert_array_equal(first["val"], again["val"])
    np.testing.assert_array_equal(first["test"], other["test"])
    assert not np.array_equal(first["val"], other["val"])


def test_off_table_positions_belong_to_no_part() -> None:
    distances = np.array([200, 225, 250, 300, 2050])
    angles = np.array([0, 0, 0, 0, 0])
    parts = make_split(distances, angles, "S2", 1)
    merged = np.concatenate(list(parts.values()))
    assert set(merged) == {0, 2, 3}
    assert list(parts["test"]) == [2]
    assert len(make_split(distances, angles, "S1", 0)["train"]) == 3


def test_aliases_and_errors() -> None:
    assert normalize_split("cross_distance_split", "mod2") == ("S2", 2)
    assert normalize_split("random_split", 0) == ("S1", 0)
    distances, angles = full_grid(1)
    with pytest.raises(ValueError, match="only mod 0"):
        make_split(distances, angles, "S1", 1)
    with pytest.raises(ValueError, match="mods"):
        make_split(distances, angles, "S3", 4)
    with pytest.raises(ValueError, match="unknown split"):
        make_split(distances, angles, "S4", 1)
    with pytest.raises(ValueError, match="equal length"):
        make_split(distances, angles[:-1], "S1", 0)
    with pytest.raises(ValueError, match="empty"):
        make_split(np.array([]), np.array([]), "S1", 0)


@given(
    n=st.integers(1, 300),
    split_mod=st.sampled_from(CONFIGS),
    seed=st.integers(0, 2**31 - 1),
)
@settings(max_examples=60, deadline=None)
def test_property_disjoint_cover(n: int, split_mod: tuple[str, int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    distances = rng.choice(ALL_DISTANCES_MM, size=n)
    angles = rng.choice(ALL_ANGLES_DEG, size=n)
    split, mod = split_mod
    parts = make_split(distances, angles, split, mod, seed=seed)
    merged = np.concatenate(list(parts.values()))
    assert len(np.unique(merged)) == len(merged) == n
    if split != "S1":
        values = distances if split == "S2" else angles
        assert np.isin(values[parts["test"]], SPLITS[split][mod]["test"]).all()
        assert np.isin(values[parts["val"]], SPLITS[split][mod]["train"]).all()
