"""Lightning wrappers of the same recipes (``llm-methods antibody fit``): ``AntibodyModule``
(manual optimisation: each step sets the parameters' gradients to a recipe's update direction)
and ``SafetyDataModule`` (jsonl files or the synthetic set; batches are lists of records that the
module tokenises with its own tokenizer).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from iclr26_common.outputs import publish
from llm_methods.antibody.data import (
    SafetyRecord,
    encode_records,
    poisoned_mixture,
    read_beavertails,
    synthetic_world,
)
from llm_methods.antibody.model import (
    AntibodyConfig,
    LambdaEMA,
    _norm,
    adamw,
    antibody_align_grads,
    booster_align_grads,
    sft_grads,
    vaccine_align_grads,
    weighted_finetune_grads,
)
from llm_methods.lm.distributed import data_rank, rank_seed
from llm_methods.lm.errors import LMError

__all__ = ["AntibodyModule", "SafetyDataModule"]

# Antibody's hyper-parameters as they sat flat in the hparams before issue 29
FLAT_HPARAMS = frozenset(("rho", "lambda_rule", "a", "eta_lambda", "ema", "lambda2", "tau"))
STAGES = {"align": ("sft", "booster", "vaccine", "antibody"), "finetune": ("sft", "antibody")}
#: The options a too-long row's message names under ``antibody fit`` (``encode_records``).
FIT_FLAGS = ("--model.init_args.max_len", "--model.init_args.truncate")


class _Draws(IterableDataset):
    """Endless seeded draws: each item is ``{"safe": [...], "harmful": [...], "rows": [...]}``."""

    def __init__(self, pools: dict[str, list[SafetyRecord]], batch_size: int, seed: int) -> None:
        self.pools, self.batch_size, self.seed = pools, batch_size, seed

    def __iter__(self) -> Iterator[dict[str, list[SafetyRecord]]]:
        rng = random.Random(self.seed)
        while True:
            yield {k: rng.choices(v, k=self.batch_size) if v else [] for k, v in self.pools.items()}


class SafetyDataModule(L.LightningDataModule):
    """Alignment pools (``safe``, ``harmful`` jsonl) and finetuning rows (``data`` jsonl, mixed
    with ``harmful`` at ``poison_ratio`` when given); any file left out comes from the synthetic
    set (``synthetic_world(synthetic_seed)``)."""

    def __init__(
        self,
        safe: str | None = None,
        harmful: str | None = None,
        data: str | None = None,
        poison_ratio: float | None = 0.2,
        n: int = 200,
        batch_size: int = 16,
        seed: int = 0,
        synthetic_seed: int = 0,
    ) -> None:
        super().__init__()
        if batch_size < 1:
            raise LMError("batch_size must be >= 1")
        self.safe, self.harmful, self.data = safe, harmful, data
        self.poison_ratio, self.n, self.batch_size, self.seed = poison_ratio, n, batch_size, seed
        self.synthetic_seed = synthetic_seed
        self.pools: dict[str, list[SafetyRecord]] = {}

    def setup(self, stage: str | None = None) -> None:
        world = synthetic_world(self.synthetic_seed)
        safe = read_beavertails(self.safe) if self.safe else world.align
        align_harmful = read_beavertails(self.harmful) if self.harmful else world.align_harmful
        attack = read_beavertails(self.harmful) if self.harmful else world.attack
        benign = read_beavertails(self.data) if self.data else world.task
        if self.poison_ratio is None:
            rows = benign
        else:
            rows = poisoned_mixture(
                [r for r in benign if r.is_safe], attack, self.n, self.poison_ratio, self.seed
            )
        self.pools = {"safe": safe, "harmful": align_harmful, "rows": rows}

    def train_dataloader(self) -> DataLoader:
        seed = rank_seed(self.seed, data_rank(self))  # DDP: each rank draws its own batches
        return DataLoader(_Draws(self.pools, self.batch_size, seed), batch_size=None)


class AntibodyModule(L.LightningModule):
    """One stage (``align`` or ``finetune``) of one method on a model spec (folder, zoo:NAME,
    smollm2); ``save_to`` writes the trained model + tokenizer at the end of ``fit``.
    ``antibody``: Antibody's hyper-parameters (:class:`~llm_methods.antibody.model.
    AntibodyConfig`, the ``antibody:`` group that the stage configs of ``align``/``finetune``
    use too; default: its defaults). The checkpoint's hparams hold it as a plain dict.
    ``max_len``: tokens per row (chat prompt + target); a longer row stops the fit with one line
    naming its file and line, unless ``truncate`` cuts it there (the official
    ``truncation=True``)."""

    def __init__(
        self,
        model: str = "zoo:micro",
        stage: str = "align",
        method: str = "antibody",
        antibody: AntibodyConfig | None = None,
        booster_lambda: float = 5.0,
        vaccine_rho: float = 5.0,
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        max_len: int = 128,
        save_to: str | None = None,
        truncate: bool = False,
    ) -> None:
        super().__init__()
        if stage not in STAGES or method not in STAGES[stage]:
            raise LMError(f"stage {stage!r} takes methods {STAGES.get(stage, ())}, not {method!r}")
        if isinstance(antibody, dict):  # from a checkpoint's hparams
            antibody = AntibodyConfig(**antibody)
        self.cfg = antibody or AntibodyConfig()
        self.save_hyperparameters(ignore=["antibody"])
        self.hparams["antibody"] = asdict(self.cfg)  # plain values: weights_only-loadable
        self.automatic_optimization = False
        self.ema = LambdaEMA(self.cfg.ema) if self.cfg.lambda_rule == "code" else None
        from llm_methods.lm import load_lm

        lm = load_lm(model, None, "float32")  # choose_device(); the Trainer moves it as it needs
        self.net, self.tokenizer = lm.model, lm.tokenizer
        for p in self.net.parameters():
            p.requires_grad_(True)

    @classmethod
    def load_from_checkpoint(cls, checkpoint_path: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Lightning's loader, after a one-line ``LMError`` naming the file for a checkpoint
        written before issue 29 (Antibody's hyper-parameters as flat hparams)."""
        from iclr26_common.checkpoints import load_weights_only

        ckpt = load_weights_only(
            checkpoint_path, "Antibody checkpoint", error=LMError, require_state_dict=True
        )
        flat = sorted(FLAT_HPARAMS & set(ckpt.get("hyper_parameters", {})))
        if flat:
            raise LMError(
                f"{checkpoint_path}: an AntibodyModule checkpoint from before issue 29 (flat "
                f"hparams {', '.join(flat)}); retrain, or load its weights into a new module"
            )
        return super().load_from_checkpoint(checkpoint_path, *args, **kwargs)

    def on_fit_start(self) -> None:
        self.net.train()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return adamw(self.net, self.hparams.lr, self.hparams.weight_decay)  # as the HF Trainer

    def transfer_batch_to_device(
        self, batch: Any, device: torch.device, dataloader_idx: int
    ) -> Any:
        return batch  # lists of records; tensors are built on the device in ``_enc``

    def _enc(self, rows: list[SafetyRecord], refusal: bool = False) -> dict[str, torch.Tensor]:
        targets = [r.refusal if refusal else r.response for r in rows]
        batch = encode_records(
            self.tokenizer,
            [r.prompt for r in rows],
            targets,
            self.hparams.max_len,
            [r.where for r in rows],
            bool(self.hparams.get("truncate", False)),  # absent from checkpoints before 0.8.0
            FIT_FLAGS,
        )
        return {k: v.to(self.device) for k, v in batch.items()}

    def training_step(self, batch: dict[str, list[SafetyRecord]], _idx: int) -> None:
        h = self.hparams
        params = [p for p in self.net.parameters() if p.requires_grad]
        self.net.train()
        if h.stage == "finetune":
            rows = self._enc(batch["rows"])
            if h.method == "sft":
                grads, info = sft_grads(self.net, params, rows)
            else:
                grads, info = weighted_finetune_grads(
                    self.net, params, rows, self._enc(batch["rows"], True), self.cfg.tau
                )
        else:
            safe = self._enc(batch["safe"])
            if h.method == "sft":
                grads, info = sft_grads(self.net, params, safe)
            elif h.method == "vaccine":
                grads, info = vaccine_align_grads(self.net, params, safe, h.vaccine_rho)
            elif h.method == "booster":
                grads, info = booster_align_grads(
                    self.net,
                    params,
                    safe,
                    self._enc(batch["harmful"]),
                    h.booster_lambda,
                    self.cfg.rho,
                )
            else:
                grads, info = antibody_align_grads(
                    self.net,
                    params,
                    safe,
                    self._enc(batch["harmful"]),
                    self._enc(batch["harmful"], True),
                    self.cfg,
                    self.ema,
                )
        # the grads come from torch.autograd.grad, past DDP's hooks: average them over the ranks
        grads = [self.trainer.strategy.reduce(g, reduce_op="mean") for g in grads]
        scale = min(1.0, 1.0 / (float(_norm(grads)) + 1e-6))  # clip the update to norm 1
        for p, g in zip(params, grads, strict=True):
            p.grad = g * scale
        opt = self.optimizers()
        opt.step()
        opt.zero_grad()
        for key in ("loss", "lambda_t"):
            if key in info:
                self.log(key, float(info[key]), prog_bar=key == "loss", batch_size=1)

    def on_train_end(self) -> None:
        if self.hparams.save_to and self.trainer.is_global_zero:
            out = Path(self.hparams.save_to)
            out.mkdir(parents=True, exist_ok=True)
            self.net.save_pretrained(out)
            self.tokenizer.save_pretrained(out)
            publish(out)  # safetensors writes its weights 0600

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.net(*args, **kwargs)
