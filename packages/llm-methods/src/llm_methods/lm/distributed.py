"""Multi-process (Lightning DDP) helpers shared by the llm-methods LightningModules."""

from __future__ import annotations

from typing import Any

__all__ = ["data_rank", "rank_seed"]

#: A prime: rank r's stream starts at ``seed + RANK_STRIDE * r``, far from neighbouring seeds.
RANK_STRIDE = 7919


def data_rank(module: Any) -> int:
    """The global rank of the process running ``module`` (a LightningModule or
    LightningDataModule), 0 when no Trainer is attached."""
    trainer = getattr(module, "trainer", None)
    return int(trainer.global_rank) if trainer is not None else 0


def rank_seed(seed: int, rank: int) -> int:
    """The seed of rank ``rank``'s own endless data stream: ``seed`` itself on rank 0 (so a
    single-process run draws what it always drew), a different stream on every other rank (so
    ``--trainer.devices N`` trains on N different batches per step, not N copies of one)."""
    return seed if rank == 0 else seed + RANK_STRIDE * rank
