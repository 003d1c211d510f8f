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
        "--trainer.max_epochs=2",
        "--trainer.max_steps=-1",
        "--trainer.enable_checkpointing=true",
        f"--trainer.default_root_dir={tmp_path}",
        *DDP_CPU_ARGS,
    ]
    proc = run_console_script("atomistic-scaling", args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Starting with 2 processes" in proc.stderr
    assert "sync_dist" not in proc.stderr  # epoch-level val metrics are reduced over ranks
    # rank 0 alone writes: one config (no config-1.yaml from rank 1) and one checkpoint
    assert sorted(p.name for p in tmp_path.rglob("config*.yaml")) == ["config.yaml"]
    (ckpt,) = tmp_path.rglob("*.ckpt")
    # 32 training structures (tiny: 40, 10 % val, 10 % test) in batches of 8: 4 steps per epoch
    # on one process; the DistributedSampler gives each rank half, so 2 epochs take 4 steps
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    assert state["global_step"] == 4 and state["epoch"] == 1
