"""Data splits S1-S3 of RF-MatID (upstream ``dataset/split_config.py`` and ``utils.get_dataloaders``).

Upstream builds only train and "val"; "val" is what the paper reports on. Here every split also has
a held-out test set:

* S1 (random): upstream ``random_split(full, [int(0.7 N), N - int(0.7 N)], Generator().manual_seed(42))``
  over the loader's sample order. train = upstream train (identical indices); upstream val is cut
  into val = its first third (``len // 3`` in permutation order) and test = the rest.
* S2 (cross-distance) / S3 (cross-angle), mods 1-3: test = upstream's val positions (the
  out-of-distribution set upstream reports on); val = a seeded 10 % random hold-out of the samples
  at the training positions (upstream selects its checkpoint on the OOD set itself).
"""

from __future__ import annotations

import numpy as np
import torch

from rf_matid.constants import ANGLES_DEG, DISTANCES_MM

# The dataset's 37 distances and 11 angles (one definition, in rf_matid.constants).
ALL_DISTANCES_MM: tuple[int, ...] = DISTANCES_MM
ALL_ANGLES_DEG: tuple[int, ...] = ANGLES_DEG

S1_TRAIN_FRACTION = 0.7
VAL_FRACTION = 0.1

# Upstream Split_Spec_Generator lists; "test" is upstream's "val".
SPLITS: dict[str, dict[int, dict[str, tuple[int, ...]]]] = {
    "S2": {
        1: {
            "train": (
                200,
                300,
                350,
                450,
                500,
                600,
                650,
                750,
                800,
                850,
                950,
                1000,
                1100,
                1150,
                1250,
                1300,
                1400,
                1450,
                1500,
                1600,
                1650,
                1750,
                1800,
                1850,
                1950,
                2000,
            ),
            "test": (250, 400, 550, 700, 900, 1050, 1200, 1350, 1550, 1700, 1900),
        },
        2: {
            "train": tuple(range(750, 2001, 50)),
            "test": tuple(range(200, 701, 50)),
        },
        3: {
            "train": tuple(range(200, 1451, 50)),
            "test": tuple(range(1500, 2001, 50)),
        },
    },
    "S3": {
        1: {"train": (0, 1, 3, 4, 6, 7, 9, 10), "test": (2, 5, 8)},
        2: {"train": (3, 4, 5, 6, 7, 8, 9, 10), "test": (0, 1, 2)},
        3: {"train": (0, 1, 2, 3, 4, 5, 6, 7), "test": (8, 9, 10)},
    },
}

_ALIASES = {
    "s1": "S1",
    "random_split": "S1",
    "random": "S1",
    "s2": "S2",
    "cross_distance_split": "S2",
    "cross_distance": "S2",
    "s3": "S3",
    "cross_angle_split": "S3",
    "cross_angle": "S3",
}


def normalize_split(split: str, mod: int | str) -> tuple[str, int]:
    """Canonical ("S1", 0) / ("S2"|"S3", 1..3); accepts upstream names and "mod1"-style mods."""
    key = _ALIASES.get(str(split).strip().lower())
    if key is None:
        raise ValueError(f"unknown split {split!r}; expected 'S1', 'S2' or 'S3'")
    text = str(mod).strip().lower()
    text = text.removeprefix("mod")
    if not text.isdigit():
        raise ValueError(f"mod must be an integer (0 for S1, 1..3 for S2/S3), got {mod!r}")
    number = int(text)
    if key == "S1" and number != 0:
        raise ValueError(f"S1 (random split) has only mod 0, got {mod!r}")
    if key != "S1" and number not in SPLITS[key]:
        raise ValueError(f"{key} has mods {sorted(SPLITS[key])}, got {mod!r}")
    return key, number


def parse_split_name(name: str) -> tuple[str, int]:
    """Split name of the CLI and configs -> canonical pair: 'S1' -> ('S1', 0), 'S2-mod2' -> ('S2', 2).

    The name must be 'S1', 'S2-mod1..3' or 'S3-mod1..3'; ``normalize_split`` validates the pair.
    """
    split, separator, mod = str(name).partition("-mod")
    if split not in ("S1", "S2", "S3") or (separator and not mod.isdigit()):
        raise ValueError(f"split must be 'S1', 'S2-mod1..3' or 'S3-mod1..3', got {name!r}")
    try:
        return normalize_split(split, mod if separator else 0)
    except ValueError as error:
        raise ValueError(
            f"split must be 'S1', 'S2-mod1..3' or 'S3-mod1..3', got {name!r} ({error})"
        ) from None


def _randperm(n: int, seed: int) -> np.ndarray:
    generator = torch.Generator().manual_seed(seed)
    return torch.randperm(n, generator=generator).numpy().astype(np.int64)


def make_split(
    distance_mm: np.ndarray,
    angle_deg: np.ndarray,
    split: str,
    mod: int | str = 0,
    seed: int = 42,
) -> dict[str, np.ndarray]:
    """Index arrays {"train", "val", "test"} (int64, sorted, disjoint) over N samples.

    distance_mm [N] and angle_deg [N] are per sample in the loader's (sorted) order. For S1 the
    union is every sample; for S2/S3 it is every sample at a listed distance/angle (samples at
    positions outside upstream's tables belong to no part). ``seed`` (default upstream's 42) drives
    the S1 permutation and the S2/S3 validation hold-out.
    """
    distances = np.asarray(distance_mm).astype(np.int64)
    angles = np.asarray(angle_deg).astype(np.int64)
    if distances.ndim != 1 or distances.shape != angles.shape:
        raise ValueError(
            f"distance_mm and angle_deg must be 1-D of equal length, got {distances.shape} and "
            f"{angles.shape}"
        )
    key, number = normalize_split(split, mod)
    n = distances.shape[0]
    if n == 0:
        raise ValueError("cannot split an empty dataset")

    if key == "S1":
        permutation = _randperm(n, seed)
        n_train = int(S1_TRAIN_FRACTION * n)
        upstream_val = permutation[n_train:]
        n_val = len(upstream_val) // 3
        parts = {
            "train": permutation[:n_train],
            "val": upstream_val[:n_val],
            "test": upstream_val[n_val:],
        }
    else:
        values = distances if key == "S2" else angles
        table = SPLITS[key][number]
        train_pool = np.flatnonzero(np.isin(values, table["train"]))
        test = np.flatnonzero(np.isin(values, table["test"]))
        shuffled = train_pool[_randperm(len(train_pool), seed)]
        n_val = max(1, round(VAL_FRACTION * len(train_pool))) if len(train_pool) > 1 else 0
        parts = {"train": shuffled[n_val:], "val": shuffled[:n_val], "test": test}
    return {name: np.sort(indices).astype(np.int64) for name, indices in parts.items()}
