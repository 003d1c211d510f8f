from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bio_scisor.data import ScisorDataModule
from bio_scisor.io import ScisorFormatError, write_fasta
from bio_scisor.lit_module import ScisorLitModule, load_checkpoint


def test_datamodule_reads_a_fasta_and_splits(tmp_path: Path) -> None:
    write_fasta(tmp_path / "f.fasta", [(f"s{i}", "ACDEFGHIK"[: 3 + i % 6]) for i in range(20)])
    dm = ScisorDataModule(train_path=str(tmp_path / "f.fasta"), val_fraction=0.2, batch_size=4)
    dm.setup("fit")
    assert len(dm.train_set) == 16 and len(dm.val_set) == 4
    x0, lengths = next(iter(dm.train_dataloader()))
    assert x0.shape[0] == 4 and x0.shape[1] == int(lengths.max())


def test_datamodule_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        ScisorDataModule()
    write_fasta(tmp_path / "one.fasta", [("a", "ACD")])
    dm = ScisorDataModule(train_path=str(tmp_path / "one.fasta"))
    with pytest.raises(ScisorFormatError, match="at least 2 sequences"):
        dm.setup("fit")


def test_checkpoint_round_trip_keeps_schedule_and_background(tiny_module, tiny_ckpt) -> None:
    loaded = load_checkpoint(tiny_ckpt)
    assert loaded.hparams.t_max == 0.3 and loaded.hparams.alpha_power == 1.1
    torch.testing.assert_close(loaded.background, tiny_module.background)
    for a, b in zip(loaded.state_dict().values(), tiny_module.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)


def test_checkpoint_of_another_model_is_one_error_naming_the_file(
    tmp_path: Path, tiny_module
) -> None:
    """Another model's checkpoint raised TypeError (unknown hyperparameter) or RuntimeError
    (weights of another shape) from inside the module; now a ScisorFormatError naming the file.
    The other model is a tiny LightningModule with hyperparameters and weights of its own."""
    import lightning as L

    class Other(L.LightningModule):
        def __init__(self, horizon: int = 4) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.head = torch.nn.Linear(3, horizon)

    other = Other()
    foreign = tmp_path / "foreign.ckpt"
    torch.save({"hyper_parameters": dict(other.hparams), "state_dict": other.state_dict()}, foreign)
    with pytest.raises(ScisorFormatError, match=r"foreign\.ckpt: not a bio-scisor Lightning"):
        load_checkpoint(foreign)
    # our hyperparameters with another model's weights: load_state_dict's RuntimeError
    mixed = tmp_path / "mixed.ckpt"
    torch.save(
        {"hyper_parameters": dict(tiny_module.hparams), "state_dict": other.state_dict()}, mixed
    )
    with pytest.raises(ScisorFormatError, match=r"mixed\.ckpt: not a bio-scisor Lightning"):
        load_checkpoint(mixed)
    # hyperparameters that are not a mapping
    odd = tmp_path / "odd.ckpt"
    torch.save({"hyper_parameters": [1, 2], "state_dict": other.state_dict()}, odd)
    with pytest.raises(ScisorFormatError, match=r"odd\.ckpt: not a bio-scisor Lightning"):
        load_checkpoint(odd)


def test_module_validates_hyperparameters() -> None:
    with pytest.raises(ValueError, match="t_max"):
        ScisorLitModule(t_max=1.0)
    with pytest.raises(ValueError, match="background"):
        ScisorLitModule(background=[1.0] * 19)
