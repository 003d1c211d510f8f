"""LightningModule + DataModule for ``llm-methods remix fit`` (LightningCLI).

One training step = one RL iteration of :class:`~llm_methods.remix.runner.RLRunner` (sample,
score, mix, ``m`` gradient steps), with manual optimisation: ``trainer.max_steps`` counts
gradient steps (ReMix takes ``utd`` per iteration before reincarnation; ``reincarnate_at`` and
the lambda(t) schedule count gradient steps too). Validation = greedy
exact-match accuracy and response length on the validation problems.
"""

from __future__ import annotations

import random
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import lightning as L
import torch

from iclr26_common.outputs import publish
from llm_methods.lm.distributed import data_rank, rank_seed
from llm_methods.lm.errors import LMError
from llm_methods.remix.data import (
    Problem,
    make_reward_fn,
    read_problems,
    records_to_problems,
    synth_problems,
)
from llm_methods.remix.model import RLConfig
from llm_methods.remix.runner import RLRunner

__all__ = ["ProblemDataModule", "ReMixModule", "load_policy"]

#: The runner's logs shown on Lightning's progress bar as ``train/KEY`` at every step (mean
#: reward of the fresh rollouts, the last gradient step's loss); every log goes to the logger.
_PROGRESS_KEYS = ("reward", "loss")


def load_policy(spec: str, device: str | None = None) -> Any:  # -> LM
    """``task`` (the task-format tiny Llama, pretrained and cached here) or any ``load_lm`` spec,
    in fp32 on ``device`` (default: the workspace's device,
    :func:`~iclr26_common.device.choose_device`); the policy is a submodule of
    :class:`ReMixModule`, so the Trainer moves it to its accelerator."""
    from llm_methods.lm import load_lm

    if spec == "task":
        from llm_methods.remix.pretrain import ensure_task_model

        return load_lm(str(ensure_task_model()), device, dtype="float32")
    return load_lm(spec, device, dtype="float32")


class _Batches(torch.utils.data.IterableDataset):
    """Endless shuffled batches of problems (one per RL iteration)."""

    def __init__(self, problems: list[Problem], batch: int, seed: int) -> None:
        self.problems, self.batch, self.seed = problems, batch, seed

    def __iter__(self):  # type: ignore[no-untyped-def]
        rng, order = random.Random(self.seed), []
        while True:
            if len(order) < self.batch:
                order += rng.sample(self.problems, len(self.problems))
            yield order[: self.batch]
            order = order[self.batch :]


class ProblemDataModule(L.LightningDataModule):
    """Args: ``train_file`` / ``val_file`` (GSM8K jsonl; ``None`` = generated, ``synth_n`` /
    ``synth_val_n`` problems with operands up to ``max_value``), ``prompts_per_step``, ``seed``."""

    def __init__(
        self,
        train_file: str | None = None,
        val_file: str | None = None,
        synth_n: int = 64,
        synth_val_n: int = 32,
        max_value: int = 20,
        prompts_per_step: int = 8,
        limit: int | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if prompts_per_step < 1:
            raise LMError(f"prompts_per_step must be >= 1, got {prompts_per_step}")
        self.prompts_per_step, self.seed = prompts_per_step, seed
        self.train = (
            read_problems(Path(train_file), limit)
            if train_file
            else records_to_problems(synth_problems(synth_n, 7 + seed, max_value))
        )
        self.val = (
            read_problems(Path(val_file), limit)
            if val_file
            else records_to_problems(synth_problems(synth_val_n, 99, max_value))
        )

    def train_dataloader(self) -> Any:
        seed = rank_seed(self.seed, data_rank(self))  # DDP: each rank draws its own prompts
        data = _Batches(self.train, self.prompts_per_step, seed)
        return torch.utils.data.DataLoader(data, batch_size=None)

    def val_dataloader(self) -> Any:
        chunks = [self.val[i : i + 32] for i in range(0, len(self.val), 32)]
        return torch.utils.data.DataLoader(chunks, batch_size=None, collate_fn=lambda x: x)

    def transfer_batch_to_device(self, batch: Any, device: Any, dataloader_idx: int) -> Any:
        # problems are text; the runner tokenises on the policy's device (the hook lives here,
        # not on the module: Lightning warns when a module overrides it beside a DataModule)
        return batch


class ReMixModule(L.LightningModule):
    """GRPO / ReMix reinforcement finetuning of the pretrained ``model`` (``task`` or a model
    spec; ``--model.init_args.model``, as perk's and mbok's).

    Args: ``rl`` (:class:`~llm_methods.remix.model.RLConfig`, the ``rl:`` group of the YAML;
    default: its defaults; ``rl.prompts_per_step`` is the experiment loop's: here the data
    module's ``prompts_per_step`` sets the batch), ``rewards`` (names in ``data.REWARDS``; must
    not be empty; default ``exact_match``), ``save_dir`` (write the trained policy there as an HF
    folder at the end of fit), ``seed`` (the runner's sampling seed). The checkpoint's hparams
    hold ``rl`` as a plain dict (``torch.load(weights_only=True)`` reads it). ``model`` was
    ``policy`` before 0.8.0 (a checkpoint that still names ``policy`` is refused in one line)."""

    def __init__(
        self,
        model: str = "task",
        rl: RLConfig | None = None,
        rewards: list[str] | None = None,
        save_dir: str | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if isinstance(rl, dict):  # from a checkpoint's hparams
            rl = RLConfig(**rl)
        self.cfg = rl or RLConfig()
        self.save_hyperparameters(ignore=["rl"])
        self.hparams["model"] = model
        self.hparams["rl"] = asdict(self.cfg)  # plain values: weights_only-loadable
        self.automatic_optimization = False
        self.reward_fn = make_reward_fn(["exact_match"] if rewards is None else rewards)
        lm = load_policy(model)
        self.policy, self.tokenizer = lm.model, lm.tokenizer
        self.runner: RLRunner | None = None

    @classmethod
    def load_from_checkpoint(cls, checkpoint_path: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Lightning's loader, after a one-line ``LMError`` naming the file for a checkpoint
        written before issue 29 (the RL settings as flat hparams) or whose hparams name the
        pretrained model ``policy`` (``model`` since 0.7.0; ``policy`` removed in 0.8.0)."""
        from iclr26_common.checkpoints import load_weights_only

        ckpt = load_weights_only(
            checkpoint_path, "ReMix checkpoint", error=LMError, require_state_dict=True
        )
        flat = sorted({f.name for f in fields(RLConfig)} & set(ckpt.get("hyper_parameters", {})))
        if flat:
            raise LMError(
                f"{checkpoint_path}: a ReMixModule checkpoint from before issue 29 (flat hparams "
                f"{', '.join(flat)}); retrain, or load its weights into a new module"
            )
        if "policy" in ckpt.get("hyper_parameters", {}):
            raise LMError(
                f"{checkpoint_path}: hyper_parameters.policy was renamed model in llm-methods "
                "0.7.0 and removed in 0.8.0; rename the key in the checkpoint's hyper_parameters"
            )
        return super().load_from_checkpoint(checkpoint_path, *args, **kwargs)

    def on_fit_start(self) -> None:
        self.policy.train()
        self.runner = RLRunner(
            self.policy, self.tokenizer, self.cfg, self.reward_fn, self.hparams.seed
        )

    def _runner(self) -> RLRunner:
        if self.runner is None:
            self.runner = RLRunner(
                self.policy, self.tokenizer, self.cfg, self.reward_fn, self.hparams.seed
            )
        return self.runner

    def training_step(self, batch: list[Problem], batch_idx: int) -> None:
        logs = self._runner().step(batch, self.optimizers(), self.manual_backward)
        shown = {k: logs[k] for k in _PROGRESS_KEYS if k in logs}  # on the progress bar
        self.log_dict(
            {f"train/{k}": v for k, v in shown.items()}, prog_bar=True, batch_size=len(batch)
        )
        self.log_dict(
            {f"train/{k}": v for k, v in logs.items() if k not in shown},
            prog_bar=False,
            batch_size=len(batch),
        )

    def validation_step(self, batch: list[Problem], batch_idx: int) -> None:
        out = self._runner().evaluate(batch)
        self.log_dict(
            {"val/accuracy": out["accuracy"], "val/length": out["length"]},
            prog_bar=True,
            batch_size=len(batch),
            sync_dist=True,
        )

    def on_train_end(self) -> None:
        if self.hparams.save_dir and self.trainer.is_global_zero:
            folder = Path(self.hparams.save_dir)
            folder.mkdir(parents=True, exist_ok=True)
            self.policy.save_pretrained(folder)
            self.tokenizer.save_pretrained(folder)
            publish(folder)  # safetensors writes its weights 0600

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.policy.parameters(), lr=self.cfg.lr, weight_decay=0.0)
