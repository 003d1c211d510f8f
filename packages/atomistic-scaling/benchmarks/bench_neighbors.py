"""Neighbour-list build time: vesin (ours) vs ``ase.neighborlist.primitive_neighbor_list``.

python benchmarks/bench_neighbors.py [--repeats 5]
"""

from __future__ import annotations

import argparse

from ase.build import bulk

from atomistic_scaling.graph import neighbor_list, neighbor_list_ase
from iclr26_common.timing import best_time

CUTOFF = 4.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    ns = parser.parse_args()
    print(f"{'atoms':>7s} {'vesin ms':>9s} {'ase ms':>9s} {'ase/vesin':>9s}")
    for rep in (2, 3, 5, 8, 12):
        atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat(rep)
        atoms.rattle(0.05, seed=0)
        t_v = best_time(lambda a=atoms: neighbor_list(a, CUTOFF), ns.repeats, warmup=True)
        t_a = best_time(lambda a=atoms: neighbor_list_ase(a, CUTOFF), ns.repeats, warmup=True)
        print(f"{len(atoms):7d} {1e3 * t_v:9.2f} {1e3 * t_a:9.2f} {t_a / t_v:9.1f}")


if __name__ == "__main__":
    main()
