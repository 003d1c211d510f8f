"""Lightning wrappers for ``llm-methods mbok finetune`` (LightningCLI ``fit``).

:class:`BooleanDistillModule` holds the frozen FP teacher (not a submodule: it is not saved or
optimised) and a student whose chosen linears are MBOK (or OneBit-STE) layers; one training step
is one :func:`~llm_methods.mbok.distill.distill_loss` step with manual optimisation: the
Boolean optimiser flips weights of every kernel, AdamW updates the scales (MBOK) or AdamW the
latent weights and vectors (OneBit). At the end of fit the deployable layers are written to
``save_to`` (safetensors). :class:`BooleanTextDataModule` gives fixed-length token chunks of a
text file or of the offline pydoc corpus.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader

from llm_methods.mbok import distill
from llm_methods.mbok.data import pydoc_split, read_texts, token_chunks
from llm_methods.mbok.optim import BooleanOptimizer

__all__ = ["BooleanDistillModule", "BooleanTextDataModule", "cached_lm"]


@functools.lru_cache(maxsize=2)
def cached_lm(spec: str) -> Any:
    """One :func:`load_lm` per spec and process (the data module needs its tokenizer, the
    module its weights); fp32 so that the Boolean / AdamW updates are exact. On the workspace's
    device (:func:`~iclr26_common.device.choose_device`); the Trainer moves the student to its
    accelerator (``--trainer.accelerator``) and :meth:`BooleanDistillModule.training_step`
    moves the teacher after it."""
    from llm_methods.lm import load_lm

    return load_lm(spec, dtype="float32")


class BooleanDistillModule(L.LightningModule):
    def __init__(
        self,
        model: str = "smollm2",
        method: str = "mbok",
        k: int = 2,
        layers: list[str] | None = None,
        blocks: str = "all",
        bool_lr: float = 0.01,
        scale_lr: float = 2e-5,
        latent_lr: float = 4e-4,
        kl_weight: float = 1.0,
        mse_weight: float = 10.0,
        tau: float = 1.0,
        save_to: str | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        if method not in ("mbok", "onebit"):
            raise ValueError(f"finetune method must be 'mbok' or 'onebit', got {method!r}")
        if method == "mbok" and k < 1:
            raise ValueError(f"number of Boolean kernels K must be >= 1, got {k}")
        self.automatic_optimization = False
        teacher = cached_lm(model).model
        self._teacher = [teacher]  # a list: not registered as a submodule
        self.student = copy.deepcopy(teacher)
        self.names = distill.select_linears(self.student, layers or ["all"], blocks)
        self.layers = distill.compress_model(self.student, self.names, method, k=k)
        for p in self.student.parameters():
            p.requires_grad_(False)
        for module in self.layers.values():
            for p in module.parameters():
                p.requires_grad_(True)
        self.cfg = distill.DistillConfig(
            bool_lr=bool_lr,
            scale_lr=scale_lr,
            latent_lr=latent_lr,
            kl_weight=kl_weight,
            mse_weight=mse_weight,
            tau=tau,
        )
        self.from_block = distill.first_block(self.names)
        self._bool: BooleanOptimizer | None = None
        self.student.train()

    def configure_optimizers(self) -> Any:
        opts = distill.make_optimizers(self.layers, self.cfg)
        self._bool = next((o for o in opts if isinstance(o, BooleanOptimizer)), None)
        return [o for o in opts if not isinstance(o, BooleanOptimizer)]

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        teacher = self._teacher[0].to(self.device)
        t_out = distill.teacher_outputs(teacher, batch, self.from_block, self.cfg.tau)
        loss, parts = distill.distill_loss(self.student, batch, t_out, self.from_block, self.cfg)
        opt = self.optimizers()
        opt.zero_grad()
        if self._bool is not None:
            self._bool.zero_grad()
        self.manual_backward(loss)
        opt.step()
        if self._bool is not None:
            parts["flips"] = float(self._bool.step())
        self.log_dict({f"train_{k}": v for k, v in parts.items()}, prog_bar=True)
        return loss.detach()

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self.log(
            "val_ppl", distill.perplexity_of(self.student, [batch]), prog_bar=True, sync_dist=True
        )

    def on_fit_end(self) -> None:
        if self.hparams.save_to and self.trainer.is_global_zero:
            path = Path(self.hparams.save_to)
            meta = {k: self.hparams[k] for k in ("model", "method", "k", "blocks")}
            size = distill.save_compressed(self.layers, path, meta)
            summary = distill.stored_summary(distill.deployable(self.layers))
            print(
                f"saved {len(self.layers)} compressed layers to {path} ({size} B file, "
                f"{summary['bits_per_weight']:.3f} bits/weight)"
            )


class BooleanTextDataModule(L.LightningDataModule):
    """Token chunks of ``train_file`` / ``val_file`` (.txt or .jsonl ``text``), or the pydoc
    train / held-out topics when a file is not given."""

    def __init__(
        self,
        model: str = "smollm2",
        train_file: str | None = None,
        val_file: str | None = None,
        seq_len: int = 128,
        batch_size: int = 2,
        max_train_chunks: int | None = 64,
        max_val_chunks: int | None = 16,
    ) -> None:
        super().__init__()
        if seq_len < 2 or batch_size < 1:
            raise ValueError(
                f"seq_len must be >= 2 and batch_size >= 1, got {seq_len}, {batch_size}"
            )
        self.model, self.seq_len, self.batch_size = model, seq_len, batch_size
        self.files = (train_file, val_file)
        self.limits = (max_train_chunks, max_val_chunks)
        self.chunks: list[list[list[int]]] = []

    def setup(self, stage: str | None = None) -> None:
        if self.chunks:
            return
        tokenizer = cached_lm(self.model).tokenizer
        pydoc = pydoc_split()
        for j, (path, limit) in enumerate(zip(self.files, self.limits, strict=True)):
            texts = read_texts(path) if path else pydoc[j]
            source = str(path) if path else ("pydoc train topics", "pydoc test topics")[j]
            self.chunks.append(token_chunks(tokenizer, texts, self.seq_len, limit, 0, source))

    def _loader(self, chunks: list[list[int]], shuffle: bool) -> DataLoader:
        def collate(rows: list[list[int]]) -> dict[str, torch.Tensor]:
            ids = torch.tensor(rows, dtype=torch.long)
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

        return DataLoader(chunks, batch_size=self.batch_size, shuffle=shuffle, collate_fn=collate)  # type: ignore[arg-type]

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.chunks[0], True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.chunks[1], False)
