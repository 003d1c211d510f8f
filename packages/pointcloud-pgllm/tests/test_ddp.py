"""Multi-process runs through Lightning: the tiny ``fit`` and ``predict`` under DDP on two CPU
processes (gloo), run through the console script in a subprocess since ranks > 0 re-run its
command line."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from iclr26_common.testing import ddp_fit_checkpoint, only_file, run_ddp


@pytest.mark.slow
def test_tiny_fit_under_ddp_on_two_cpu_processes(tmp_path: Path) -> None:
    # tiny: 13 classes x 3 clouds, one per class held out -> 26 training clouds in batches of 8
    # are 4 steps on one process; the DistributedSampler gives each rank 13, i.e. 2 batches
    state = ddp_fit_checkpoint("pointcloud-pgllm", tmp_path)
    assert state["global_step"] == 2


@pytest.mark.slow
def test_tiny_predict_under_ddp_writes_one_file_with_every_cloud(tmp_path: Path) -> None:
    """Under DDP each rank predicts half of the split (13 of tiny's 26 test clouds): rank 0
    gathers both halves through common's BatchPredictionWriter and writes the one
    ``predictions.csv`` (no second file from rank 1), row for row the one-process predict's:
    the same cloud ids, labels, predicted classes and probabilities."""
    from pointcloud_pgllm.cli import run_lightning_cli

    ddp_dir, single_dir = tmp_path / "ddp", tmp_path / "single"
    ddp_dir.mkdir()
    # no logger: the run folder is default_root_dir itself (tiny keeps a logger)
    args = ["predict", "--config", "tiny", "--trainer.accelerator=cpu", "--trainer.logger=false"]
    run_ddp("pointcloud-pgllm", [*args, f"--trainer.default_root_dir={ddp_dir}"], ddp_dir)
    ddp_rows = _rows(only_file(ddp_dir, "predictions*.csv"))
    run_lightning_cli([*args, f"--trainer.default_root_dir={single_dir}"])
    single_rows = _rows(single_dir / "predictions.csv")
    assert [int(r["row"]) for r in ddp_rows] == list(range(26))  # 13 classes x 2 test clouds
    assert [r["source"] for r in ddp_rows] == [r["source"] for r in single_rows]
    assert len({r["source"] for r in ddp_rows}) == 26  # one id per cloud
    assert [r["label"] for r in ddp_rows] == [r["label"] for r in single_rows]
    assert [r["predicted"] for r in ddp_rows] == [r["predicted"] for r in single_rows]
    names = [k for k in single_rows[0] if k.startswith("prob_")]
    assert len(names) == 13
    ddp_probs = np.array([[float(r[k]) for k in names] for r in ddp_rows])
    single_probs = np.array([[float(r[k]) for k in names] for r in single_rows])
    np.testing.assert_allclose(ddp_probs, single_probs, atol=2e-6)  # written with 6 decimals


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))
