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
        "--trainer.max_epochs=2",
        "--trainer.max_steps=-1",
        "--trainer.enable_checkpointing=true",
        f"--trainer.default_root_dir={tmp_path}",
    ]
    # two processes, no sync_dist warning: epoch-level val metrics are reduced over ranks
    run_ddp("atomistic-scaling", args, tmp_path)
    # rank 0 alone writes: one config (no config-1.yaml from rank 1) and one checkpoint
    assert only_file(tmp_path, "config*.yaml").name == "config.yaml"
    ckpt = only_file(tmp_path, "*.ckpt")
    # 32 training structures (tiny: 40, 10 % val, 10 % test) in batches of 8: 4 steps per epoch
    # on one process; the DistributedSampler gives each rank half, so 2 epochs take 4 steps
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    assert state["global_step"] == 4 and state["epoch"] == 1
