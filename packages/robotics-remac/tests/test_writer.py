"""``predict``'s writer orders chunks by their position in the split (the batch's ``index``),
not by arrival: under DDP the ranks' batches arrive interleaved and one is repeated, and the
loaders give Lightning no batch indices (issue 38; the two-process run is in test_ddp.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from robotics_remac.data import ChunkDataset, collect_demonstrations
from robotics_remac.writer import PredictionsWriter


def _batch(dataset: ChunkDataset, positions: list[int]) -> dict[str, torch.Tensor]:
    return dataset[positions]


def test_chunk_dataset_batches_carry_their_positions() -> None:
    dataset = ChunkDataset(collect_demonstrations(2, seed=0), horizon=8)
    batch = dataset[[5, 120, 7]]
    assert batch["index"].tolist() == [5, 120, 7]
    assert batch["frame"].tolist() == [5, 120 - len(dataset) // 2, 7]


def test_rows_are_kept_by_position_whatever_order_the_batches_come_in() -> None:
    dataset = ChunkDataset(collect_demonstrations(2, seed=0), horizon=8)
    writer = PredictionsWriter()
    trainer = SimpleNamespace(world_size=2)
    # rank 1's share (batches 1, 3) arriving before rank 0's; batch 1 twice (the sampler's pad)
    for positions in ([4, 5], [6, 7], [0, 1], [2, 3], [4, 5]):
        batch = _batch(dataset, positions)
        chunks = batch["actions"] * 0 + batch["index"][:, None, None].float()  # marks the row
        writer.write_on_batch_end(trainer, None, chunks, None, batch, 0, 0)
    rows = writer.rows
    assert sorted(rows) == list(range(8))  # each position once
    assert [int(rows[i][0][0, 0]) for i in sorted(rows)] == list(range(8))
    assert [int(rows[i][2]) for i in sorted(rows)] == list(range(8))  # frame_index


def test_a_batch_without_positions_is_refused_under_ddp_and_numbered_alone() -> None:
    chunks = torch.zeros(3, 8, 2)
    writer = PredictionsWriter()
    with pytest.raises(RuntimeError, match="position"):
        writer.write_on_batch_end(SimpleNamespace(world_size=2), None, chunks, None, {}, 0, 0)
    writer.write_on_batch_end(SimpleNamespace(world_size=1), None, chunks, None, {}, 0, 0)
    writer.write_on_batch_end(SimpleNamespace(world_size=1), None, chunks, None, {}, 1, 0)
    assert sorted(writer.rows) == list(range(6))  # one process: numbered in arrival order
