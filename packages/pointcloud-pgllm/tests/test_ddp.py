"""Multi-process training through Lightning: the tiny ``fit`` under DDP on two CPU processes
(gloo), run through the console script in a subprocess since ranks > 0 re-run its command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from iclr26_common.testing import ddp_fit_checkpoint


@pytest.mark.slow
def test_tiny_fit_under_ddp_on_two_cpu_processes(tmp_path: Path) -> None:
    # tiny: 13 classes x 3 clouds, one per class held out -> 26 training clouds in batches of 8
    # are 4 steps on one process; the DistributedSampler gives each rank 13, i.e. 2 batches
    state = ddp_fit_checkpoint("pointcloud-pgllm", tmp_path)
    assert state["global_step"] == 2
