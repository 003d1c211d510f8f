"""Training-path tensors follow the model's device. The shape-only "meta" device stands in for
a GPU: a stray CPU tensor meeting a meta tensor raises, as it would meeting a CUDA tensor."""

from __future__ import annotations

import pytest
import torch
from ase import Atoms
from torch_geometric.loader import DataLoader

from atomistic_scaling import lit_module, sweep
from atomistic_scaling.data import AtomsGraphDataset
from atomistic_scaling.lit_module import ForceFieldModule

META = torch.device("meta")


@pytest.mark.parametrize("arch", ["mpnn", "l1"])
def test_rotation_augmentation_rotates_on_the_batchs_device(
    arch: str, structures: list[Atoms], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[torch.device, torch.device]] = []
    real = lit_module.rotate_batch

    def spy(batch, rotation: torch.Tensor):  # type: ignore[no-untyped-def]
        seen.append((rotation.device, batch.pos.device))
        return real(batch, rotation)

    monkeypatch.setattr(lit_module, "rotate_batch", spy)
    module = ForceFieldModule(arch=arch, width=8, num_layers=1, rotation_augmentation=True)
    batch = next(iter(DataLoader(AtomsGraphDataset(structures[:2], 4.5), 2))).to(META)
    assert module.to(META).training_step(batch, 0).device == META
    assert seen == [(META, META)]


def test_evaluate_moves_each_batch_to_the_module(
    structures: list[Atoms], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[torch.device] = []

    def loss_on_cpu(pred: dict, batch) -> tuple:  # type: ignore[no-untyped-def]
        seen.append(batch.pos.device)  # meta tensors have no values to average: stand in
        return torch.zeros(()), torch.zeros(()), torch.zeros(())

    monkeypatch.setattr(sweep, "force_field_loss", loss_on_cpu)
    module = ForceFieldModule(arch="mpnn", width=8, num_layers=1).to(META)
    out = sweep.evaluate(module, DataLoader(AtomsGraphDataset(structures[:4], 4.5), 2))
    assert out == {"loss": 0.0, "energy_term": 0.0, "force_term": 0.0}
    assert seen == [META, META]
