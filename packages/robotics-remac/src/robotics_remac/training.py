"""Programmatic training helpers (used by the experiment and the benchmarks): fit
:class:`~robotics_remac.lit_module.FlowPolicyModule` and
:class:`~robotics_remac.lit_module.RemacModule` with :func:`iclr26_common.lightning.quiet_trainer`
(no logger, checkpoints or progress bar; one device, CUDA when PyTorch sees it; Lightning moves
the module back to the CPU when fit ends)."""

from __future__ import annotations

import copy
from typing import Any

from iclr26_common.lightning import quiet_trainer
from robotics_remac.data import DemoDataModule
from robotics_remac.lit_module import FlowPolicyModule, RemacModule
from robotics_remac.model import FlowPolicy, add_lora

__all__ = ["ABLATIONS", "TRAINER_SETTINGS", "fit_base", "fit_finetune", "remac_from_policy"]

# The REMAC ablation ladder (paper Table 3): LoRA-only, +mask, +curriculum, +L_Δ (full REMAC).
ABLATIONS: dict[str, dict[str, Any]] = {
    "lora_only": {
        "use_mask": False,
        "curriculum": False,
        "use_delta": False,
        "use_keep": False,
        "max_delay": 0,
    },
    "mask": {"use_mask": True, "curriculum": False, "use_delta": False, "use_keep": True},
    "mask_curriculum": {"use_mask": True, "curriculum": True, "use_delta": False, "use_keep": True},
    "remac": {"use_mask": True, "curriculum": True, "use_delta": True, "use_keep": True},
}

#: Trainer settings of every programmatic fit (the shipped configs' gradient clip; no validation).
TRAINER_SETTINGS: dict[str, Any] = {"gradient_clip_val": 10.0, "limit_val_batches": 0}


def remac_from_policy(policy: FlowPolicy, **kwargs: Any) -> RemacModule:
    """A :class:`RemacModule` on a copy of an in-memory base ``policy`` (instead of a checkpoint)."""
    module = RemacModule(base_ckpt=None, **policy.config, **kwargs)
    h = module.hparams
    module.policy = add_lora(
        copy.deepcopy(policy).train(), h.rank, h.alpha, h.lora_dropout, h.use_mask
    )
    return module


def fit_base(
    datamodule: DemoDataModule, epochs: int, policy_kwargs: dict[str, Any], **module_kwargs: Any
) -> FlowPolicy:
    """Trains a base (or training-time RTC) policy; returns it in eval mode."""
    module = FlowPolicyModule(
        horizon=datamodule.horizon,
        obs_dim=datamodule.obs_dim,
        action_dim=datamodule.action_dim,
        **policy_kwargs,
        **module_kwargs,
    )
    quiet_trainer(max_epochs=epochs, **TRAINER_SETTINGS).fit(module, datamodule)
    return module.policy.eval()


def fit_finetune(
    base: FlowPolicy, datamodule: DemoDataModule, epochs: int, **module_kwargs: Any
) -> FlowPolicy:
    """LoRA-finetunes a copy of ``base`` with :class:`RemacModule`; returns it in eval mode."""
    module = remac_from_policy(base, **module_kwargs)
    quiet_trainer(max_epochs=epochs, **TRAINER_SETTINGS).fit(module, datamodule)
    return module.policy.eval()
