"""Synthetic generator throughput: samples/s in memory and to disk, with ratios to named peers.

Peers measured in the same run:
- slab reflection: the scikit-rf ``DefinedGammaZ0`` line cascade, one network per sample, vs the
  vectorised transmission-line recursion (``multilayer_reflection``) on the same draws;
- simulation: ``simulate_s11`` called once per sample vs one ``simulate_batch`` call;
- dataset writing: ``generate_dataset`` with vs without the time-domain CSVs.

Usage: ``uv run --frozen python packages/rf-matid/benchmarks/bench_generator.py [--repeats 3]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from iclr26_common.timing import best_time
from rf_matid import materials, synth
from rf_matid.classes import SYNTHETIC_CLASSES
from rf_matid.constants import ANGLES_DEG, DISTANCES_MM, FREQ_GRID_HZ
from rf_matid.synth_dataset import generate_dataset


def slab_inputs(n: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per-sample (eps [L, F], thickness [L]) for n samples cycling through the 16 classes."""
    rng = np.random.default_rng(seed)
    names = [list(SYNTHETIC_CLASSES)[i % len(SYNTHETIC_CLASSES)] for i in range(n)]
    inputs = []
    for name in names:
        layers = materials.MATERIAL_CLASSES[name].layers
        eps = np.stack(
            [materials.MATERIALS[lay.material].permittivity(FREQ_GRID_HZ) for lay in layers]
        )
        thickness = np.array([rng.uniform(*lay.thickness_mm) * 1e-3 for lay in layers])
        inputs.append((eps, thickness))
    return inputs


def vectorised_slabs(inputs: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Recursion on stacked inputs, grouped by layer count (as the generator does)."""
    out = np.empty((len(inputs), FREQ_GRID_HZ.size), dtype=np.complex128)
    for n_layers in sorted({eps.shape[0] for eps, _ in inputs}):
        rows = [i for i, (eps, _) in enumerate(inputs) if eps.shape[0] == n_layers]
        eps = np.stack([inputs[i][0] for i in rows])
        thickness = np.stack([inputs[i][1] for i in rows])
        out[rows] = materials.multilayer_reflection(eps, thickness, FREQ_GRID_HZ)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slab-samples", type=int, default=64)
    parser.add_argument("--sim-samples", type=int, default=512)
    parser.add_argument("--distances", type=int, default=10, help="miniature dataset distances")
    parser.add_argument("--angles", type=int, default=5, help="miniature dataset angles")
    parser.add_argument("--per-position", type=int, default=2)
    args = parser.parse_args()
    rows: list[tuple[str, int, float, str]] = []

    inputs = slab_inputs(args.slab_samples, seed=0)
    t_skrf = best_time(
        lambda: [materials.multilayer_reflection_skrf(e, t, FREQ_GRID_HZ) for e, t in inputs],
        args.repeats,
    )
    t_vec = best_time(lambda: vectorised_slabs(inputs), args.repeats)
    reference = np.stack(
        [materials.multilayer_reflection_skrf(e, t, FREQ_GRID_HZ) for e, t in inputs]
    )
    max_err = float(np.max(np.abs(vectorised_slabs(inputs) - reference)))
    n = len(inputs)
    rows.append(("slab Γ: scikit-rf cascade per sample (peer)", n, n / t_skrf, "1.0x"))
    rows.append(("slab Γ: vectorised recursion", n, n / t_vec, f"{t_skrf / t_vec:.1f}x"))

    names = [list(SYNTHETIC_CLASSES)[i % 16] for i in range(args.sim_samples)]
    rng_dist = np.random.default_rng(1)
    distances = rng_dist.choice(DISTANCES_MM, args.sim_samples)
    angles = rng_dist.choice(ANGLES_DEG, args.sim_samples)
    n_single = max(args.sim_samples // 4, 1)

    def per_sample() -> None:
        rng = np.random.default_rng(0)
        for i in range(n_single):
            synth.simulate_s11(names[i], distances[i], angles[i], rng)

    t_single = best_time(per_sample, args.repeats) / n_single
    t_batch = best_time(
        lambda: synth.simulate_batch(names, distances, angles, np.random.default_rng(0)),
        args.repeats,
    ) / len(names)
    s11 = synth.simulate_batch(names, distances, angles, np.random.default_rng(0))
    t_time = best_time(lambda: synth.frequency_to_time(FREQ_GRID_HZ, s11), args.repeats)
    rows.append(("S11: simulate_s11 per sample (peer)", n_single, 1 / t_single, "1.0x"))
    rows.append(("S11: simulate_batch", len(names), 1 / t_batch, f"{t_single / t_batch:.1f}x"))
    rows.append(("time domain: frequency_to_time", len(names), len(names) / t_time, "-"))

    n_dataset = len(SYNTHETIC_CLASSES) * args.distances * args.angles * args.per_position
    distance_set = list(DISTANCES_MM[:: max(len(DISTANCES_MM) // args.distances, 1)])
    distance_set = distance_set[: args.distances]
    angle_set = list(ANGLES_DEG[::2])[: args.angles]
    wall: dict[bool, float] = {}
    for write_time in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            generate_dataset(
                Path(tmp) / "ds",
                distances_mm=distance_set,
                angles_deg=angle_set,
                samples_per_position=args.per_position,
                seed=0,
                write_time=write_time,
            )
            wall[write_time] = time.perf_counter() - start
    rows.append(
        (
            f"generate_dataset, frequency CSVs only ({wall[False]:.1f} s)",
            n_dataset,
            n_dataset / wall[False],
            "1.0x",
        )
    )
    rows.append(
        (
            f"generate_dataset, + time CSVs ({wall[True]:.1f} s)",
            n_dataset,
            n_dataset / wall[True],
            f"{wall[False] / wall[True]:.2f}x",
        )
    )

    print(f"max |Γ_vectorised - Γ_scikit-rf| = {max_err:.2e}\n")
    print("| stage | samples | samples/s | ratio vs peer |")
    print("|---|---:|---:|---:|")
    for stage, count, rate, ratio in rows:
        print(f"| {stage} | {count} | {rate:,.0f} | {ratio} |")


if __name__ == "__main__":
    main()
