"""Real architectures driven through their own libraries, behind the ``arch`` knob.

``arch="nequip"``: a NequIP GNN (Batzner et al. 2022) built with ``nequip``'s public model
builder :func:`nequip.model.NequIPGNNModel` (nequip 0.19; the optional extra
``atomistic-scaling[peers]``), with ``l_max``, ``num_features = width``, ``num_layers``,
``r_max = cutoff`` and ``num_bessels = num_rbf`` from our knobs. It is used as an energy model
(``do_derivatives=False``): it receives our edge vectors ``r_ij`` (E, 3) and returns per-atom
energies; :class:`atomistic_scaling.model.ForceField` adds the per-element references and takes
``F = -dE/dpos`` (and the stress) by autograd, so a NequIP peer is always conservative, as
NequIP is. Its type embedding has one row per element 1..MAX_Z-1, like our own models'.
"""

from __future__ import annotations

import contextlib
import random
import warnings

import numpy as np
import torch
from torch import Tensor, nn

from atomistic_scaling.constants import MAX_Z, NEIGHBOR_NORM

__all__ = ["NEQUIP_RADIAL_WIDTH_PER_FEATURE", "NequIPEnergy", "nequip_available"]

#: Hidden width of NequIP's radial MLP per feature channel: 4 x width (= nequip's default 128
#: at width 32), so that N grows with the width knob as our models' does.
NEQUIP_RADIAL_WIDTH_PER_FEATURE = 4


def nequip_available() -> bool:
    """Whether the optional ``nequip`` package can be imported."""
    try:
        import nequip  # noqa: F401
    except ImportError:
        return False
    return True


def _init_nequip_global_state() -> None:
    """nequip's builders require its global state, whose first initialisation also seeds every
    RNG with 123 and sets torch's default dtype to float64: both are restored here, so that
    building a NequIP peer does not change the caller's random streams or dtype. Its other
    process-wide settings stay (TorchScript fusion strategy, e3nn optimisation flags, torch
    multiprocessing sharing strategy, two torch._dynamo flags)."""
    from nequip.utils.global_state import global_state_initialized, set_global_state

    if global_state_initialized():
        return
    dtype = torch.get_default_dtype()
    legacy = np.random.get_state()  # noqa: NPY002 -- nequip reseeds numpy's global RNG
    states = (torch.random.get_rng_state(), legacy, random.getstate())
    try:
        set_global_state()
    finally:
        torch.set_default_dtype(dtype)
        torch.random.set_rng_state(states[0])
        np.random.set_state(states[1])  # noqa: NPY002
        random.setstate(states[2])


@contextlib.contextmanager
def _e3nn_defaults_restored():
    """nequip's builder leaves e3nn's ``jit_mode`` at "script", which makes every e3nn module
    built afterwards (our l1-l3 models) TorchScript and impossible to deep-copy: restore it."""
    import e3nn

    saved = e3nn.get_optimization_defaults()
    try:
        yield
    finally:
        e3nn.set_optimization_defaults(**saved)


class NequIPEnergy(nn.Module):
    """Per-atom energies (N,) of a nequip ``NequIPGNNModel`` from atomic numbers ``z`` (N,),
    bond vectors ``vec`` (E, 3) = ``pos[j] + shift - pos[i]`` and our ``edge_index`` (2, E) as
    (j, i); nequip's edges are (center, neighbour), i.e. ours flipped."""

    def __init__(self, width: int, num_layers: int, l_max: int, cutoff: float, num_rbf: int):
        super().__init__()
        if not nequip_available():
            raise ValueError(
                "arch 'nequip' needs the optional nequip package: "
                "pip install 'atomistic-scaling[peers]'"
            )
        from ase.data import chemical_symbols
        from nequip.model import NequIPGNNModel

        seed = int(torch.randint(0, 2**31 - 1, (1,)))  # from the caller's seeded stream
        with _e3nn_defaults_restored(), warnings.catch_warnings():
            _init_nequip_global_state()
            warnings.filterwarnings("ignore", message=".*per_type_energy.*")
            self.model = NequIPGNNModel(
                seed=seed,
                model_dtype="float32",
                r_max=float(cutoff),
                type_names=list(chemical_symbols[1:MAX_Z]),
                num_layers=num_layers,
                l_max=l_max,
                parity=False,
                num_features=width,
                radial_mlp_width=NEQUIP_RADIAL_WIDTH_PER_FEATURE * width,
                num_bessels=num_rbf,
                avg_num_neighbors=NEIGHBOR_NORM,  # the same message normalisation as ours
                per_type_energy_scales=1.0,
                per_type_energy_shifts=0.0,  # the references are ForceField's buffer
                do_derivatives=False,
            )

    def forward(self, z: Tensor, vec: Tensor, edge_index: Tensor, atom_batch: Tensor) -> Tensor:
        data = {
            "pos": torch.zeros(z.shape[0], 3, dtype=vec.dtype, device=vec.device),
            "edge_index": edge_index.flip(0),
            "edge_vectors": vec,
            "atom_types": z - 1,
            "batch": atom_batch,
            "num_atoms": torch.bincount(atom_batch),
        }
        return self.model(data)["atomic_energy"].squeeze(-1).to(vec.dtype)
