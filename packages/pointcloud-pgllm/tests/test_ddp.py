"""Multi-process training through Lightning: the tiny ``fit`` under DDP on two CPU processes
(gloo), run through the console script in a subprocess since ranks > 0 re-run its command line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from iclr26_common.testing import DDP_CPU_ARGS, run_console_script


@pytest.mark.slow
def test_tiny_fit_under_ddp_on_two_cpu_processes(tmp_path: Path) -> None:
    args = [
        "fit",
        "--config",
        "tiny",
        "--trainer.enable_checkpointing=true",
        f"--trainer.default_root_dir={tmp_path}",
        *DDP_CPU_ARGS,
    ]
    proc = run_console_script("pointcloud-pgllm", args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Starting with 2 processes" in proc.stderr
    assert "sync_dist" not in proc.stderr  # epoch-level val metrics are reduced over ranks
    # rank 0 alone writes: one config (no config-1.yaml from rank 1) and one checkpoint
    assert sorted(p.name for p in tmp_path.rglob("config*.yaml")) == ["config.yaml"]
    (ckpt,) = tmp_path.rglob("*.ckpt")
    # tiny: 13 classes x 3 clouds, one per class held out -> 26 training clouds in batches of 8
    # are 4 steps on one process; the DistributedSampler gives each rank 13, i.e. 2 batches
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    assert state["global_step"] == 2
