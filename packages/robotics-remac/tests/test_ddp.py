"""Multi-process training through Lightning: the tiny ``fit`` under DDP on two CPU processes
(gloo), run through the console script in a subprocess since ranks > 0 re-run its command line
(:func:`iclr26_common.testing.run_ddp`: exit 0, two processes, epoch metrics reduced)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iclr26_common.testing import ddp_fit_checkpoint


@pytest.mark.slow
def test_tiny_fit_under_ddp_on_two_cpu_processes(tmp_path: Path) -> None:
    # tiny: 4 training episodes x 113 chunks = 452 chunks in batches of 64 are 8 steps on one
    # process; Lightning's distributed sampler gives each rank half of them
    state = ddp_fit_checkpoint("robotics-remac", tmp_path)
    assert state["global_step"] == 4
