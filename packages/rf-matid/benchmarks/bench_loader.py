"""Loader throughput: upstream-style row-by-row ``csv.reader`` vs ``rf_matid.io.load_dataset``.

Writes a random dataset in the real on-disk format (``write_sample``), then measures files/s for

* upstream: ``csv.reader`` row by row + ``np.array(rows[1:], float32)`` per file, as upstream
  ``load_raw_data`` (time domain: plus ``[::3]`` and z-score, as ``TD_dataset``);
* first read: ``load_dataset`` with an empty cache (vectorised parse + cache write);
* cached memmap: ``load_dataset`` on a warm cache, then a full pass over ``x`` (so every byte is read).

Usage: ``uv run --frozen python packages/rf-matid/benchmarks/bench_loader.py [--samples 4]``.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from rf_matid.constants import FREQ_GRID_HZ, TIME_POINTS
from rf_matid.io import (
    FREQ_DOMAIN_DIR,
    TIME_DOMAIN_DIR,
    Position,
    load_dataset,
    write_sample,
)

FREQ = FREQ_GRID_HZ
TIME = np.arange(TIME_POINTS) * 0.5


def build(root: Path, classes: int, distances: int, angles: int, samples: int) -> int:
    rng = np.random.default_rng(0)
    count = 0
    grid = itertools.product(
        [f"brick{i:02d}" for i in range(1, classes + 1)],
        range(200, 200 + 50 * distances, 50),
        range(angles),
    )
    for class_name, distance, angle in grid:
        for index in range(samples):
            s11 = rng.normal(size=FREQ.size) + 1j * rng.normal(size=FREQ.size)
            amplitude = rng.normal(size=TIME.size)
            write_sample(
                root, Position(class_name, distance, angle), index, FREQ, s11, TIME, amplitude
            )
            count += 1
    return count


def upstream_load(files: list[Path], time_domain: bool) -> float:
    checksum = 0.0
    for path in files:
        rows = []
        with open(path) as handle:
            for row in csv.reader(handle):
                rows.append(row)
        table = np.array(rows[1:], dtype=np.float32)
        if time_domain:
            amplitude = table[:, 1][::3]
            amplitude = (amplitude - amplitude.mean()) / amplitude.std(ddof=1)
            checksum += float(amplitude[0])
        else:
            checksum += float(table[0, 1])
    return checksum


def timed(function, repeats: int) -> float:
    durations = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        durations.append(time.perf_counter() - start)
    return statistics.median(durations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--distances", type=int, default=5)
    parser.add_argument("--angles", type=int, default=3)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="rfmatid_bench_"))
    try:
        start = time.perf_counter()
        n = build(workdir, args.classes, args.distances, args.angles, args.samples)
        print(f"wrote {n} samples (frequency + time CSVs) in {time.perf_counter() - start:.1f} s\n")
        rows = []
        for domain, subdir in (("frequency", FREQ_DOMAIN_DIR), ("time", TIME_DOMAIN_DIR)):
            files = sorted((workdir / subdir).glob("*/*.csv"))
            time_domain = domain == "time"
            upstream = timed(lambda f=files, t=time_domain: upstream_load(f, t), args.repeats)

            def first_read(d=domain) -> None:
                cache = workdir / f"cache-{d}"
                shutil.rmtree(cache, ignore_errors=True)
                load_dataset(workdir, d, cache_dir=cache)

            first = timed(first_read, args.repeats)

            def cached(d=domain) -> None:
                data = load_dataset(workdir, d, cache_dir=workdir / f"cache-{d}")
                float(np.abs(np.asarray(data.x)).sum())

            cached_time = timed(cached, args.repeats * 3)
            for method, seconds in (
                ("upstream csv.reader", upstream),
                ("load_dataset, first read", first),
                ("load_dataset, cached memmap", cached_time),
            ):
                rows.append(
                    (domain, method, len(files), seconds, len(files) / seconds, upstream / seconds)
                )
        print("| domain | method | files | median s | files/s | x upstream |")
        print("|---|---|---:|---:|---:|---:|")
        for domain, method, count, seconds, rate, ratio in rows:
            print(f"| {domain} | {method} | {count} | {seconds:.3f} | {rate:,.0f} | {ratio:.1f} |")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
