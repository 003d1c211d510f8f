"""Multi-process training through Lightning: the tiny ``fit`` under DDP on two CPU processes
(gloo), run through the console script in a subprocess since ranks > 0 re-run its command line."""

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
    run_ddp("pointcloud-pgllm", args, tmp_path)  # rc 0, two processes, no sync_dist warning
    # rank 0 alone writes: one config (no config-1.yaml from rank 1) and one checkpoint
    assert only_file(tmp_path, "config*.yaml").name == "config.yaml"
    ckpt = only_file(tmp_path, "*.ckpt")
    # tiny: 13 classes x 3 clouds, one per class held out -> 26 training clouds in batches of 8
    # are 4 steps on one process; the DistributedSampler gives each rank 13, i.e. 2 batches
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    assert state["global_step"] == 2
