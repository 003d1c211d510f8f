"""LightningModules: PERK's outer loop (meta-training) and the FT-ICR baseline, on BabiLong.

Batches are lists of :class:`~llm_methods.perk.data.BabiRecord` (``BabiLongDataModule``).
``PERKModule`` trains the LoRA init, the token-weight MLP and the LSLRs with AdamW (1e-5 by
default, the paper's outer learning rate) on the outer answer loss after the inner loop;
``ICRModule`` fine-tunes the model (rsLoRA of the same shape, or fully) to answer with the whole
context in the prompt. Both use upstream's outer optimiser (AdamW β = (0.9, 0.95), weight decay
0.01 except on the LSLRs, cosine schedule after a 3 % linear warm-up). Both log
``train/loss``, ``val/loss``, ``val/acc`` and ``test/acc`` (exact match of the ``<output>``
answer, greedy decoding).

The base model is a spec (``smollm2``, ``zoo:NAME``, an HF folder) or ``tiny`` (an untrained
2-layer Llama with a BPE tokenizer fitted on generated BabiLong text: for tests and demos).
"""

from __future__ import annotations

import inspect
import random
from pathlib import Path
from typing import Any

import lightning as L
import torch

from llm_methods.lm.errors import LMError
from llm_methods.perk.data import BabiRecord, is_correct, synth_babilong
from llm_methods.perk.icr import ICR
from llm_methods.perk.model import LORA_DROPOUT, LORA_TARGETS, PERK

__all__ = ["ICRModule", "PERKModule", "load_base", "load_checkpoint"]

TARGETS = list(LORA_TARGETS)


def load_base(spec: str, dtype: str | None = None) -> tuple[Any, Any]:
    """(tokenizer, HF causal LM) for a model spec (on :func:`~iclr26_common.device.choose_device`'s
    device) or ``tiny``; the model is a submodule of the LightningModule, so the Trainer moves
    it to its accelerator."""
    if spec == "tiny":
        from llm_methods.zoo.models import tiny_lm

        texts = [
            " ".join(r.context) + f" {r.question} {r.answer}"
            for r in synth_babilong(30, n_segments=6, seed=12345)
        ]
        lm = tiny_lm(texts, vocab_size=320, n_layers=2, hidden=32, heads=2, max_len=512)
        return lm.tokenizer, lm.model.train()
    from llm_methods.lm import load_lm

    lm = load_lm(spec, dtype=dtype or "float32")
    return lm.tokenizer, lm.model.train()  # no dropout in the supported families; Lightning mode


class _QAModule(L.LightningModule):
    METHOD = ""

    def __init__(self, lr: float, weight_decay: float, max_new_tokens: int) -> None:
        super().__init__()
        if lr <= 0:
            raise LMError(f"lr must be > 0, got {lr}")
        if max_new_tokens < 1:
            raise LMError("max_new_tokens must be >= 1")
        self.loss_history: list[float] = []  # training losses, one per step
        self.doc_rng = random.Random(0)  # training: a random doc_{i} numbering per record

    def record_loss(self, rec: BabiRecord) -> torch.Tensor:
        raise NotImplementedError

    def predict_record(self, rec: BabiRecord) -> str:
        raise NotImplementedError

    def training_step(self, batch: list[BabiRecord], batch_idx: int) -> torch.Tensor:
        loss = torch.stack([self.record_loss(r) for r in batch]).mean()
        self.log("train/loss", loss, batch_size=len(batch), prog_bar=True)
        self.loss_history.append(float(loss.detach()))
        return loss

    def _eval(self, batch: list[BabiRecord], stage: str) -> None:
        # the inner loop needs autograd even in validation / test (Lightning's inference mode)
        with torch.inference_mode(False), torch.enable_grad():
            texts = [self.predict_record(r) for r in batch]
            loss = torch.stack([self.record_loss(r).detach() for r in batch]).mean()
        acc = sum(is_correct(t, r.answer) for t, r in zip(texts, batch, strict=True)) / len(batch)
        self.log_dict(
            {f"{stage}/loss": loss, f"{stage}/acc": float(acc)},
            batch_size=len(batch),
            prog_bar=stage == "val",
            sync_dist=True,
        )

    def validation_step(self, batch: list[BabiRecord], batch_idx: int) -> None:
        self._eval(batch, "val")

    def test_step(self, batch: list[BabiRecord], batch_idx: int) -> None:
        self._eval(batch, "test")

    def _no_decay(self) -> set[int]:
        """Parameters trained without weight decay (PERK: the LSLRs)."""
        return set()

    def configure_optimizers(self) -> Any:
        """Upstream's outer optimiser: AdamW (β = (0.9, 0.95), eps 1e−8) with weight decay on
        everything but the LSLRs, cosine decay after a linear warm-up of ``warmup`` of the
        steps (upstream 0.03), one scheduler step per optimiser step."""
        from transformers import get_cosine_schedule_with_warmup

        skip = self._no_decay()
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [
            {
                "params": [p for p in params if id(p) not in skip],
                "weight_decay": self.hparams.weight_decay,
            },
            {"params": [p for p in params if id(p) in skip], "weight_decay": 0.0},
        ]
        opt = torch.optim.AdamW(
            [g for g in groups if g["params"]], lr=self.hparams.lr, betas=(0.9, 0.95), eps=1e-8
        )
        if self._trainer is None:  # no Trainer: no step count for the schedule
            return opt
        total = max(1, int(self.trainer.estimated_stepping_batches))
        sched = get_cosine_schedule_with_warmup(opt, round(self.hparams.warmup * total), total)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["perk_method"] = self.METHOD


class PERKModule(_QAModule):
    """PERK outer loop. Args: ``model`` (spec), LoRA ``r``/``alpha``/``target_modules``
    (rsLoRA), inner-loop ``inner_steps``/``first_order_steps``/``lslr_init``/``accumulation``,
    outer ``lr`` (paper 1e-5) and ``weight_decay``, ``max_new_tokens`` for evaluation."""

    METHOD = "perk"

    def __init__(
        self,
        model: str = "tiny",
        r: int = 8,
        alpha: int = 16,
        target_modules: list[str] | None = None,
        inner_steps: int = 4,
        first_order_steps: int = 2,
        lslr_init: float = 5e-5,
        accumulation: int = 4,
        lr: float = 1e-5,
        weight_decay: float = 0.01,
        max_new_tokens: int = 32,
        dtype: str | None = None,
        lora_dropout: float = LORA_DROPOUT,
        warmup: float = 0.03,
    ) -> None:
        super().__init__(lr, weight_decay, max_new_tokens)
        self.save_hyperparameters()
        tokenizer, base = load_base(model, dtype)
        self.perk = PERK(
            base,
            tokenizer,
            r=r,
            alpha=alpha,
            target_modules=target_modules or TARGETS,
            inner_steps=inner_steps,
            first_order_steps=first_order_steps,
            lslr_init=lslr_init,
            accumulation=accumulation,
            lora_dropout=lora_dropout,
        )

    def _no_decay(self) -> set[int]:
        return {id(self.perk.lslr)}

    def record_loss(self, rec: BabiRecord) -> torch.Tensor:
        train = torch.is_grad_enabled() and self.training
        ids = None
        if train:  # upstream numbers the training documents in a random order
            ids = list(range(len(rec.context)))
            self.doc_rng.shuffle(ids)
        fast = self.perk.adapt(rec.context, train=train, doc_ids=ids)
        return self.perk.outer_loss(fast, len(rec.context), rec.question, rec.answer, rec.support)

    def predict_record(self, rec: BabiRecord) -> str:
        fast = self.perk.adapt(rec.context, train=False)
        return self.perk.answer(fast, len(rec.context), rec.question, self.hparams.max_new_tokens)


class ICRModule(_QAModule):
    """FT-ICR baseline: the same base model and rsLoRA shape (``lora=False``: full fine-tuning),
    trained to answer with the whole context in the prompt."""

    METHOD = "ficr"

    def __init__(
        self,
        model: str = "tiny",
        r: int = 8,
        alpha: int = 16,
        target_modules: list[str] | None = None,
        lora: bool = True,
        lr: float = 1e-5,
        weight_decay: float = 0.01,
        max_new_tokens: int = 32,
        dtype: str | None = None,
        lora_dropout: float = LORA_DROPOUT,
        warmup: float = 0.03,
    ) -> None:
        super().__init__(lr, weight_decay, max_new_tokens)
        self.save_hyperparameters()
        tokenizer, base = load_base(model, dtype)
        self.icr = ICR(
            base,
            tokenizer,
            r=r,
            alpha=alpha,
            target_modules=target_modules or TARGETS,
            lora=lora,
            lora_dropout=lora_dropout,
        )

    def record_loss(self, rec: BabiRecord) -> torch.Tensor:
        return self.icr.loss(rec.context, rec.question, rec.answer, rec.support)

    def predict_record(self, rec: BabiRecord) -> str:
        return self.icr.answer(rec.context, rec.question, self.hparams.max_new_tokens)


def load_checkpoint(path: str | Path, *, option: str | None = None) -> _QAModule:
    """A ``PERKModule`` or ``ICRModule`` from a Lightning checkpoint (``weights_only=True``).

    One-line :class:`~llm_methods.lm.errors.LMError` for a file that is not a readable
    checkpoint, one of another package or method (its ``iclr26_model`` stamp or
    ``_class_path`` names the other package and class: ``a checkpoint of llm-methods.remix
    (llm_methods.remix.lit_module.ReMixModule), not of llm-methods.perk``), and one that
    names neither PERK nor FT-ICR (a missing file: ``FileNotFoundError``). ``option``: the
    command-line option that gave ``path`` (``"--model"``): every message then starts with it
    (``"--model PATH: ..."``), as ``--ckpt_path``'s do."""
    from iclr26_common.checkpoints import foreign_owner, load_weights_only

    path = Path(path)
    ckpt = load_weights_only(path, "PERK / FT-ICR checkpoint", error=LMError, option=option)
    named = f"{option} {path}" if option else str(path)
    foreign = foreign_owner(ckpt, "llm_methods.perk")
    if foreign is not None:  # another package's (or method's) model, named by its fit
        owner, class_path = foreign
        raise LMError(
            f"{named}: a checkpoint of {owner.replace('_', '-')} ({class_path}), not of "
            "llm-methods.perk (PERKModule / ICRModule)"
        )
    classes = {"perk": PERKModule, "ficr": ICRModule}
    method = ckpt.get("perk_method") if isinstance(ckpt, dict) else None
    if method not in classes:
        raise LMError(f"{named}: not a PERK / FT-ICR checkpoint (no 'perk_method' entry)")
    cls = classes[method]
    names = inspect.signature(cls.__init__).parameters
    module = cls(**{k: v for k, v in ckpt["hyper_parameters"].items() if k in names})
    module.load_state_dict(ckpt["state_dict"])
    return module.eval()
