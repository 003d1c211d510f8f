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


def test_module_validates_hyperparameters() -> None:
    with pytest.raises(ValueError, match="t_max"):
        ScisorLitModule(t_max=1.0)
    with pytest.raises(ValueError, match="background"):
        ScisorLitModule(background=[1.0] * 19)
