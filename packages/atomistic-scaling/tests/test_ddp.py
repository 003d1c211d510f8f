"""Multi-process training through Lightning: the tiny ``fit`` under DDP on two CPU processes
(gloo), run through the console script in a subprocess since ranks > 0 re-run its command line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from iclr26_common.testing import ddp_fit_checkpoint, only_file, run_ddp


@pytest.mark.slow
def test_tiny_fit_under_ddp_on_two_cpu_processes(tmp_path: Path) -> None:
    # two processes, no sync_dist warning: epoch-level val metrics are reduced over ranks
    # 32 training structures (tiny: 40, 10 % val, 10 % test) in batches of 8: 4 steps per epoch
    # on one process; the DistributedSampler gives each rank half, so 2 epochs take 4 steps
    state = ddp_fit_checkpoint(
        "atomistic-scaling", tmp_path, ["--trainer.max_epochs=2", "--trainer.max_steps=-1"]
    )
    assert state["global_step"] == 4 and state["epoch"] == 1


@pytest.mark.slow
def test_tiny_predict_under_ddp_writes_one_file_with_every_structure(tmp_path: Path) -> None:
    """Under DDP each rank predicts half of the split: rank 0 gathers both halves and writes
    the one ``predictions.pt`` (no second file from rank 1), equal to a one-process predict."""
    from atomistic_scaling.cli import run_lightning_cli

    ddp_dir, single_dir = tmp_path / "ddp", tmp_path / "single"
    ddp_dir.mkdir()
    # no logger: the run folder is default_root_dir itself (tiny keeps a logger since issue 36)
    args = ["predict", "--config", "tiny", "--trainer.accelerator=cpu", "--trainer.logger=false"]
    run_ddp("atomistic-scaling", [*args, f"--trainer.default_root_dir={ddp_dir}"], ddp_dir)
    saved = torch.load(only_file(ddp_dir, "predictions*.pt"), weights_only=True)
    run_lightning_cli([*args, f"--trainer.default_root_dir={single_dir}"])
    single = torch.load(single_dir / "predictions.pt", weights_only=True)
    assert saved["index"].tolist() == [0, 1, 2, 3]  # tiny: 4 test structures, 2 per rank
    torch.testing.assert_close(saved["energy"], single["energy"])
    torch.testing.assert_close(saved["n_atoms"], single["n_atoms"])
    for ddp_forces, single_forces in zip(saved["forces"], single["forces"], strict=True):
        torch.testing.assert_close(ddp_forces, single_forces)
