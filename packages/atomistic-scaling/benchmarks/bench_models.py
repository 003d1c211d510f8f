"""Throughput of our ℓ=0/1/2 force fields vs mace-torch's MACE at the same ℓ_max.

Measures atoms·steps/s of energy + forces evaluation (MD-like inference) on the same EMT
structures, one process, one run. MACE computes conservative forces by autograd, so the
like-with-like ratio is ours-conservative / MACE; ours-direct (the paper's training setting)
is listed for reference only. MACE at ℓ=0 uses hidden irreps 16x0e with max_ell=3 (scalar
features, spherical harmonics up to 3 in the messages: MACE's own ℓ=0 setting; max_ell=0 does
not build). MACE is optional (``mace-torch`` pins e3nn 0.4.4,
so run this in its own environment, see BENCHMARKS.md); without it only our models are timed.

    python benchmarks/bench_models.py [--structures 32] [--repeats 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import platform

import numpy as np
import torch
from torch_geometric.data import Batch

from atomistic_scaling.graph import atoms_to_graph
from atomistic_scaling.model import ForceField, count_parameters
from atomistic_scaling.synth import generate_structures
from iclr26_common.timing import best_time

OURS = {"invariant": 0, "l1": 1, "l2": 2}
WIDTH = 16
CUTOFF = 4.5
#: MACE with scalar hidden features needs spherical harmonics in its messages (max_ell=0 fails
#: in the symmetric contraction); 3 is MACE's default.
MACE_MIN_MAX_ELL = 3


def _ours(batch: Batch, arch: str, conservative: bool, repeats: int) -> tuple[float, int]:
    model = ForceField(arch, width=WIDTH, num_layers=2, cutoff=CUTOFF, conservative=conservative)
    model.eval()

    def step() -> None:
        with torch.set_grad_enabled(conservative):
            model(batch)["forces"].sum().item()

    return best_time(step, repeats, warmup=True), count_parameters(model)


def _mace(structures, lmax: int, repeats: int) -> tuple[float, int] | None:
    try:
        from e3nn import o3
        from mace import data as mace_data
        from mace.modules import MACE, interaction_classes
        from mace.tools import AtomicNumberTable, torch_geometric
    except ImportError:
        return None
    zs = sorted({int(z) for a in structures for z in a.numbers})
    table = AtomicNumberTable(zs)
    model = MACE(
        r_max=CUTOFF,
        num_bessel=8,
        num_polynomial_cutoff=6,
        max_ell=MACE_MIN_MAX_ELL if lmax == 0 else lmax,
        interaction_cls=interaction_classes["RealAgnosticResidualInteractionBlock"],
        interaction_cls_first=interaction_classes["RealAgnosticResidualInteractionBlock"],
        num_interactions=2,
        num_elements=len(zs),
        hidden_irreps=o3.Irreps(
            "+".join(f"{WIDTH}x{ell}{'eo'[ell % 2]}" for ell in range(lmax + 1))
        ),
        MLP_irreps=o3.Irreps("16x0e"),
        atomic_energies=np.zeros(len(zs)),
        avg_num_neighbors=20.0,
        atomic_numbers=zs,
        correlation=2,
        gate=torch.nn.functional.silu,
    )
    configs = [mace_data.config_from_atoms(a) for a in structures]
    loader = torch_geometric.dataloader.DataLoader(
        [mace_data.AtomicData.from_config(c, z_table=table, cutoff=CUTOFF) for c in configs],
        batch_size=len(configs),
        shuffle=False,
    )
    batch = next(iter(loader)).to_dict()

    def step() -> None:
        model(batch, training=False, compute_force=True)["forces"].sum().item()

    return best_time(step, repeats, warmup=True), sum(p.numel() for p in model.parameters())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--structures", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    ns = parser.parse_args()
    torch.set_num_threads(ns.threads)
    structures = generate_structures(ns.structures, seed=0)
    n_atoms = sum(len(a) for a in structures)
    batch = Batch.from_data_list([atoms_to_graph(a, CUTOFF) for a in structures])
    rows = []
    for arch, lmax in OURS.items():
        for conservative in (False, True):
            seconds, n = _ours(batch, arch, conservative, ns.repeats)
            rows.append(
                {
                    "model": f"ours-{arch}" + ("-cons" if conservative else "-direct"),
                    "lmax": lmax,
                    "params": n,
                    "atoms_steps_per_s": n_atoms / seconds,
                }
            )
        try:
            mace = _mace(structures, lmax, ns.repeats)
        except Exception as error:  # report and go on: one ℓ_max MACE cannot build
            print(f"mace lmax={lmax}: failed: {type(error).__name__}: {error}")
            mace = None
        if mace is not None:
            rows.append(
                {
                    "model": "mace",
                    "lmax": lmax,
                    "params": mace[1],
                    "atoms_steps_per_s": n_atoms / mace[0],
                }
            )
    by_l = {}
    for row in rows:
        by_l.setdefault(row["lmax"], {})[row["model"]] = row["atoms_steps_per_s"]
    for lmax, entries in by_l.items():
        if "mace" in entries:
            for name, value in entries.items():
                if name != "mace":
                    kind = "like with like" if name.endswith("-cons") else "not comparable"
                    print(f"lmax={lmax}: {name} / mace = {value / entries['mace']:.2f} ({kind})")
    for row in rows:
        print(
            f"{row['model']:22s} lmax={row['lmax']} N={row['params']:6d} "
            f"{row['atoms_steps_per_s']:10.0f} atoms·steps/s"
        )
    print(
        json.dumps(
            {
                "machine": platform.processor() or platform.machine(),
                "threads": ns.threads,
                "atoms": n_atoms,
                "torch": torch.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
