"""Multi-process training through Lightning: the tiny ``fit`` under DDP on two CPU processes
(gloo), run through the console script in a subprocess since ranks > 0 re-run its command line
(:func:`iclr26_common.testing.run_ddp`: exit 0, two processes, epoch metrics reduced)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from iclr26_common.testing import ddp_fit_checkpoint, only_file, run_ddp


@pytest.mark.slow
def test_tiny_fit_under_ddp_on_two_cpu_processes(tmp_path: Path) -> None:
    # tiny: 4 training episodes x 113 chunks = 452 chunks in batches of 64 are 8 steps on one
    # process; Lightning's distributed sampler gives each rank half of them
    state = ddp_fit_checkpoint("robotics-remac", tmp_path)
    assert state["global_step"] == 4


@pytest.mark.slow
def test_tiny_predict_under_ddp_writes_one_file_with_every_chunk_in_order(tmp_path: Path) -> None:
    """Issue 38: under DDP each process wrote its own ``predictions.rank{R}.pt``. Now each rank
    samples its share, rank 0 writes the one ``predictions.pt`` (no file from rank 1) with every
    chunk of the split once, in the split's order: the same ids as a one-process predict. The
    loaders give Lightning no batch indices, and the distributed sampler deals whole batches
    round-robin (rank 0: batches 0, 2, ...; rank 1: 1, 3, ...) and repeats one to even the
    ranks (``all``: 6 x 113 chunks in batches of 64 are 11 batches), so numbering each rank's
    rows in arrival order would interleave, drop or repeat chunks."""
    from robotics_remac.cli import run_lightning_cli

    ddp_dir, single_dir = tmp_path / "ddp", tmp_path / "single"
    ddp_dir.mkdir()
    args = ["predict", "--config", "tiny", "--split", "all", "--trainer.accelerator=cpu"]
    run_ddp("robotics-remac", [*args, f"--trainer.default_root_dir={ddp_dir}"], ddp_dir)
    saved = torch.load(only_file(ddp_dir, "predictions*.pt"), weights_only=True)
    run_lightning_cli([*args, f"--trainer.default_root_dir={single_dir}"])
    single = torch.load(single_dir / "predictions.pt", weights_only=True)
    assert saved["split"] == single["split"] == "all"
    assert len(saved["chunks"]) == len(single["chunks"]) == 6 * 113
    assert saved["chunks"].shape == single["chunks"].shape
    assert torch.isfinite(saved["chunks"]).all()
    # the dataset's order: episode by episode, frames 0..112 in each (not rank by rank)
    assert saved["episode_index"].tolist() == single["episode_index"].tolist()
    assert saved["frame_index"].tolist() == single["frame_index"].tolist()
    assert saved["frame_index"][:113].tolist() == list(range(113))
    assert saved["episode_index"].unique_consecutive().tolist() == list(range(6))
