"""Loader throughput: upstream-style row-by-row ``csv.reader`` vs ``rf_matid.io.load_dataset``.

Writes a random dataset in the released on-disk format (``write_sample``; frequency header
``freq.GHZ,real,imag`` over Hz values), then measures files/s, all in the same run, for

* upstream: ``csv.reader`` row by row + ``np.array(rows[1:], float32)`` per file, as upstream
  ``load_raw_data`` (time domain: plus ``[::3]`` and z-score, as ``TD_dataset``): the peer;
* first read: ``load_dataset`` with an empty cache (the rows of 32 files per pyarrow call,
  per-file checks, cache write), in 1 thread and in ``--threads`` threads (pyarrow releases the GIL);
* first read, numpy path: the same with pyarrow hidden (``np.loadtxt`` on the file's lines,
  the fallback when pyarrow is not installed);
* cached memmap: ``load_dataset`` on a warm cache, then a full pass over ``x`` (so every byte is read).

The first three are timed interleaved (each round calls each once), as wall time and as this
process's CPU time (the CPU ratio is not meaningful for the threaded read).

pyarrow is imported before timing (its one-off import, ~0.1-0.3 s, is not per file).

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

from rf_matid import csvfast
from rf_matid.constants import FREQ_GRID_HZ, TIME_POINTS
from rf_matid.io import (
    FREQ_DOMAIN_DIR,
    TIME_DOMAIN_DIR,
    UPSTREAM_FREQ_HEADER,
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
                root,
                Position(class_name, distance, angle),
                index,
                FREQ,
                s11,
                TIME,
                amplitude,
                freq_header=UPSTREAM_FREQ_HEADER,
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


def interleaved(functions: dict, repeats: int) -> dict[str, tuple[float, float]]:
    """Median (wall s, CPU s of this process) per function over ``repeats`` rounds; each round
    calls every function once in turn, so drifting machine load hits all of them alike."""
    wall: dict[str, list[float]] = {name: [] for name in functions}
    cpu: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            function()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    return {
        name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in functions
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--distances", type=int, default=5)
    parser.add_argument("--angles", type=int, default=3)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--threads", type=int, default=2, help="parse threads of the threaded first read"
    )
    args = parser.parse_args()

    assert csvfast._pyarrow_csv() is not None, "pyarrow is needed for the vectorised parse"
    workdir = Path(tempfile.mkdtemp(prefix="rfmatid_bench_"))
    try:
        start = time.perf_counter()
        n = build(workdir, args.classes, args.distances, args.angles, args.samples)
        print(f"wrote {n} samples (frequency + time CSVs) in {time.perf_counter() - start:.1f} s\n")
        rows = []
        for domain, subdir in (("frequency", FREQ_DOMAIN_DIR), ("time", TIME_DOMAIN_DIR)):
            files = sorted((workdir / subdir).glob("*/*.csv"))
            time_domain = domain == "time"

            def first_read(d=domain, threads=1) -> None:
                cache = workdir / f"cache-{d}"
                shutil.rmtree(cache, ignore_errors=True)
                load_dataset(workdir, d, cache_dir=cache, threads=threads)

            def numpy_first(d=domain) -> None:
                arrow_csv = csvfast._pyarrow_csv
                csvfast._pyarrow_csv = lambda: None  # hide pyarrow: the numpy fallback
                try:
                    first_read(d)
                finally:
                    csvfast._pyarrow_csv = arrow_csv

            def cached(d=domain) -> None:
                data = load_dataset(workdir, d, cache_dir=workdir / f"cache-{d}")
                float(np.abs(np.asarray(data.x)).sum())

            # the batched parse is what is measured: count its pyarrow calls once
            calls: list[int] = []
            arrow_rows = csvfast._arrow_rows

            def counting(*arguments, _rows=arrow_rows, _calls=calls, **options):
                _calls.append(1)
                return _rows(*arguments, **options)

            csvfast._arrow_rows = counting
            try:
                first_read()
            finally:
                csvfast._arrow_rows = arrow_rows
            print(f"{domain}: {len(files)} files parsed in {len(calls)} pyarrow calls")
            methods = {
                "upstream csv.reader": lambda f=files, t=time_domain: upstream_load(f, t),
                "load_dataset, first read (pyarrow parse, 1 thread)": first_read,
                f"load_dataset, first read (pyarrow parse, {args.threads} threads)": (
                    lambda d=domain: first_read(d, args.threads)
                ),
                "load_dataset, first read (numpy fallback, 1 thread)": numpy_first,
            }
            measured = interleaved(methods, args.repeats)
            measured["load_dataset, cached memmap"] = interleaved(
                {"cached": cached}, args.repeats * 3
            )["cached"]
            upstream, upstream_cpu = measured["upstream csv.reader"]
            for method, (seconds, cpu) in measured.items():
                rows.append(
                    (domain, method, len(files), seconds, upstream / seconds, upstream_cpu / cpu)
                )
        print()
        print("| domain | method | files | median wall s | files/s | x upstream | x upstream CPU |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for domain, method, count, seconds, ratio, cpu_ratio in rows:
            print(
                f"| {domain} | {method} | {count} | {seconds:.3f} | {count / seconds:,.0f} | "
                f"{ratio:.1f} | {cpu_ratio:.1f} |"
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
