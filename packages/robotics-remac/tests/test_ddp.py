"""Multi-process training through Lightning: the tiny ``fit`` under DDP on two CPU processes
(gloo), run through the console script in a subprocess since ranks > 0 re-run its command line
(:func:`iclr26_common.testing.run_ddp`: exit 0, two processes, epoch metrics reduced)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from iclr26_common.testing import only_file, run_ddp


@pytest.mark.slow
def test_tiny_fit_under_ddp_on_two_cpu_processes(tmp_path: Path) -> None:
    args = [
        "fit",
        "--config",
        "tiny",
        "--trainer.enable_checkpointing=true",
        f"--trainer.default_root_dir={tmp_path}",
    ]
    run_ddp("robotics-remac", args, tmp_path)
    # rank 0 alone writes: one config (no config-1.yaml from rank 1) and one checkpoint
    assert only_file(tmp_path, "config*.yaml").name == "config.yaml"
    ckpt = only_file(tmp_path, "*.ckpt")
    # tiny: 4 training episodes x 113 chunks = 452 chunks in batches of 64 are 8 steps on one
    # process; Lightning's distributed sampler gives each rank half of them
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    assert state["global_step"] == 4
