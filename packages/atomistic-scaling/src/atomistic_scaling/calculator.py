"""ASE calculator wrapping a trained force field (like MACE's ``MACECalculator``).

Energy and forces always; stress only for a conservative model (``F = -dE/dx``,
``σ = (1/V) dE/dε``), since a direct force head has no energy derivative to give one.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import torch
from ase import Atoms
from ase.calculators.calculator import Calculator, all_changes
from ase.data import chemical_symbols
from ase.stress import full_3x3_to_voigt_6_stress

from atomistic_scaling._pyg import Batch
from atomistic_scaling.graph import atoms_to_graph
from atomistic_scaling.io import AtomisticFormatError
from atomistic_scaling.model import ForceField
from iclr26_common.checkpoints import load_weights_only

__all__ = ["ForceFieldCalculator", "load_force_field"]


def load_force_field(checkpoint: str | Path) -> ForceField:
    """The :class:`ForceField` of a Lightning checkpoint of
    :class:`~atomistic_scaling.lit_module.ForceFieldModule` (``weights_only=True``).

    Raises ``FileNotFoundError`` for a missing file and :class:`AtomisticFormatError` (one line
    naming the file) for one that is not a readable ForceFieldModule checkpoint: another
    package's checkpoint (naming both), or one whose hyper-parameters or weights are missing or
    do not build a :class:`ForceField`."""
    path = Path(checkpoint)
    # Loaded on the CPU on purpose: ASE drives one small structure at a time from numpy, where a
    # GPU only adds transfers; a caller may still move the returned model (see calculate()).
    ckpt = load_weights_only(
        path, error=AtomisticFormatError, map_location="cpu", package="atomistic_scaling"
    )
    try:
        hp = ckpt["hyper_parameters"]
        state = {k.removeprefix("model."): v for k, v in ckpt["state_dict"].items()}
        names = ("arch", "width", "num_layers", "cutoff", "num_rbf", "conservative")
        args = [hp[name] for name in names]
        # checkpoints of version <= 0.3 lack l_max (no nequip arch then)
        args.append(hp.get("l_max", 1))
    except (KeyError, TypeError, AttributeError) as error:
        missing = f" (no {error})" if isinstance(error, KeyError) else ""
        raise AtomisticFormatError(f"{path}: not a ForceFieldModule checkpoint{missing}") from None
    try:
        model = ForceField(*args)
    except (TypeError, ValueError) as error:
        raise AtomisticFormatError(
            f"{path}: its hyper-parameters do not build a ForceField: {error}"
        ) from None
    if "trained_elements" not in state and "atomic_energies" in state:
        # checkpoints of version <= 0.2 lack the buffer: the elements with a fitted reference
        state["trained_elements"] = state["atomic_energies"] != 0
    try:
        model.load_state_dict(state)
    except RuntimeError as error:
        first = str(error).strip().splitlines()[0]
        raise AtomisticFormatError(f"{path}: weights do not fit the model: {first}") from None
    return model


class ForceFieldCalculator(Calculator):
    """ASE calculator for a :class:`ForceField` (or a checkpoint path).

    Args:
        model: the model or a ``.ckpt`` path. A model object is copied (the calculator's copy is
            converted to ``dtype`` and eval mode; the caller's model is left as it was).
        dtype: ``torch.float64`` (for MD energy conservation) or ``torch.float32``; default
            float64, float32 for ``arch="nequip"`` (nequip's model computes in float32 only, so
            float64 is refused for it).

    A structure with an element that was not in the model's training data is refused with a
    ``ValueError`` naming the elements (the model has no reference energy or embedding learned
    for them, so any prediction would be arbitrary).
    """

    def __init__(
        self, model: ForceField | str | Path, dtype: torch.dtype | None = None, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        model = (
            load_force_field(model) if not isinstance(model, ForceField) else copy.deepcopy(model)
        )
        if dtype is None:
            dtype = torch.float32 if model.arch == "nequip" else torch.float64
        if model.arch == "nequip" and dtype != torch.float32:
            raise ValueError(f"arch 'nequip' computes in float32 only, not {dtype}")
        self.model = model.to(dtype).eval()
        self.dtype = dtype
        self.implemented_properties = ["energy", "free_energy", "forces"] + (
            ["stress"] if model.conservative else []
        )

    def calculate(
        self, atoms: Atoms | None = None, properties=("energy",), system_changes=all_changes
    ) -> None:
        super().calculate(atoms, properties, system_changes)
        assert self.atoms is not None
        want_stress = "stress" in properties
        if want_stress and not self.model.conservative:
            raise NotImplementedError("stress needs a conservative model (conservative=True)")
        if want_stress and not np.all(self.atoms.pbc):
            raise ValueError("stress needs a fully periodic structure")
        unseen = self.model.unseen_elements(self.atoms.numbers)
        if unseen:
            names = ", ".join(
                chemical_symbols[z] if z < len(chemical_symbols) else str(z) for z in unseen
            )
            raise ValueError(
                f"elements never seen in training: {names}; this model cannot predict them"
            )
        graph = atoms_to_graph(self.atoms, self.model.cutoff, dtype=self.dtype)
        batch = Batch.from_data_list([graph]).to(self.model.atomic_energies.device)
        with torch.set_grad_enabled(self.model.conservative):
            out = self.model(batch, compute_stress=want_stress)
        energy = float(out["energy"].detach()[0])
        self.results["energy"] = energy
        self.results["free_energy"] = energy
        self.results["forces"] = out["forces"].detach().cpu().numpy().astype(np.float64)
        if want_stress:
            stress = out["stress"].detach().cpu().numpy()[0].astype(np.float64)
            self.results["stress"] = full_3x3_to_voigt_6_stress(stress)
