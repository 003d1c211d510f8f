"""A synthetic RF-MatID dataset on disk: the generator's spectra (:mod:`rf_matid.synth`) written
in the upstream folder/CSV format through :func:`rf_matid.io.write_sample`.

Every sample has its own random generator, keyed by (seed, class, distance, angle, repeat)
(:func:`sample_rng`), so a sample does not depend on which other samples are written.
"""

from __future__ import annotations

import shutil
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rf_matid.classes import SYNTHETIC_CLASSES
from rf_matid.constants import ANGLES_DEG, DISTANCES_MM, FREQ_GRID_HZ
from rf_matid.materials import material_class
from rf_matid.synth import DEFAULT_SETUP, MonostaticSetup, frequency_to_time, simulate_batch

__all__ = ["generate_dataset", "remove_generated", "sample_rng"]


def sample_rng(
    seed: int, class_name: str, distance_mm: int, angle_deg: int, index: int
) -> np.random.Generator:
    """Generator of one sample, independent of which other samples are generated."""
    key = (zlib.crc32(class_name.encode()), int(distance_mm), int(angle_deg), int(index))
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=key))


def remove_generated(out_dir: str | Path) -> None:
    """Remove the domain trees a generation writes (``frequency_domain/`` (or the older
    ``freq_domain/``) and ``time_domain/``) from ``out_dir``: ``rf-matid synth --overwrite``
    replaces an earlier synthetic dataset this way; other files stay."""
    from rf_matid.io import FREQ_DOMAIN_DIRS, TIME_DOMAIN_DIR

    for sub in (*FREQ_DOMAIN_DIRS, TIME_DOMAIN_DIR):
        if (Path(out_dir) / sub).is_dir():
            shutil.rmtree(Path(out_dir) / sub)


def _int_list(name: str, values: Sequence[int] | None, default: Sequence[int]) -> list[int]:
    items = list(default if values is None else values)
    if not items:
        raise ValueError(f"{name} must not be empty")
    for value in items:
        if isinstance(value, bool) or int(value) != value or value < 0:
            raise ValueError(f"{name} must hold non-negative integers, got {value!r}")
    if len(set(items)) != len(items):
        raise ValueError(f"{name} has duplicates: {items}")
    return [int(v) for v in items]


def generate_dataset(
    out_dir: str | Path,
    classes: Sequence[str] | None = None,
    distances_mm: Sequence[int] | None = None,
    angles_deg: Sequence[int] | None = None,
    samples_per_position: int = 1,
    seed: int = 0,
    write_time: bool = True,
    setup: MonostaticSetup = DEFAULT_SETUP,
    chunk_size: int = 256,
    freq_header: str | None = None,
) -> Path:
    """Write a synthetic dataset in the upstream format via ``rf_matid.io.write_sample``.

    Defaults: all 16 classes, distances 200-2000 mm step 50, angles 0-10 deg. Sample ``i`` at
    (class, distance, angle) depends only on (seed, class, distance, angle, i) (``sample_rng``).
    ``freq_header``: the frequency CSVs' header, ``rf_matid.io.FREQ_HEADER`` (default,
    ``freq_hz,real,imag``) or ``UPSTREAM_FREQ_HEADER`` (``freq.GHZ,real,imag`` over the same Hz
    values, as the released files). Refuses an ``out_dir`` that already holds samples, so runs
    never mix. Returns ``out_dir``.
    """
    from rf_matid.constants import FOLDER_PREFIX
    from rf_matid.io import (
        FREQ_DOMAIN_DIRS,
        FREQ_HEADER,
        TIME_DOMAIN_DIR,
        Position,
        write_sample,
    )

    freq_header = FREQ_HEADER if freq_header is None else freq_header

    names = list(SYNTHETIC_CLASSES) if classes is None else list(classes)
    if not names or len(set(names)) != len(names):
        raise ValueError(f"classes must be non-empty without duplicates, got {names}")
    for name in names:
        material_class(name)
    distances = _int_list("distances_mm", distances_mm, DISTANCES_MM)
    angles = _int_list("angles_deg", angles_deg, ANGLES_DEG)
    if any(d == 0 for d in distances) or any(a >= 90 for a in angles):
        raise ValueError("distances_mm must be > 0 and angles_deg < 90")
    if isinstance(samples_per_position, bool) or int(samples_per_position) < 1:
        raise ValueError(f"samples_per_position must be >= 1, got {samples_per_position!r}")
    root = Path(out_dir)
    for sub in (*FREQ_DOMAIN_DIRS, TIME_DOMAIN_DIR):
        if (root / sub).is_dir() and any((root / sub).iterdir()):
            raise FileExistsError(f"{root / sub} already holds samples; use an empty out_dir")
    if root.is_dir() and any(p.name.startswith(FOLDER_PREFIX) for p in root.iterdir()):
        raise FileExistsError(f"{root} already holds position folders; use an empty out_dir")
    root.mkdir(parents=True, exist_ok=True)

    jobs = [
        (Position(name, distance, angle), index)
        for name in sorted(names)
        for distance in distances
        for angle in angles
        for index in range(int(samples_per_position))
    ]
    freq = FREQ_GRID_HZ
    for start in range(0, len(jobs), chunk_size):
        chunk = jobs[start : start + chunk_size]
        rngs = [
            sample_rng(seed, p.class_name, p.distance_mm, p.angle_deg, index) for p, index in chunk
        ]
        s11 = simulate_batch(
            [p.class_name for p, _ in chunk],
            [p.distance_mm for p, _ in chunk],
            [p.angle_deg for p, _ in chunk],
            rngs,
            freq,
            setup,
        )
        if write_time:
            time_ps, amplitude = frequency_to_time(freq, s11)
        for row, (position, index) in enumerate(chunk):
            if write_time:
                write_sample(
                    root, position, index, freq, s11[row], time_ps, amplitude[row], freq_header
                )
            else:
                write_sample(root, position, index, freq, s11[row], freq_header=freq_header)
    return root
