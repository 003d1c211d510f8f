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
from robotics_remac.settings import CurriculumSettings, LoRASettings, LossSettings, PolicySizes

__all__ = ["ABLATIONS", "TRAINER_SETTINGS", "fit_base", "fit_finetune", "remac_from_policy"]

# The REMAC ablation ladder (paper Table 3): LoRA-only, +mask, +curriculum, +L_Δ (full REMAC);
# each rung is the RemacModule setting groups it changes from the defaults.
ABLATIONS: dict[str, dict[str, Any]] = {
    "lora_only": {
        "lora": LoRASettings(use_mask=False),
        "curriculum": CurriculumSettings(enabled=False, max_delay=0),
        "loss": LossSettings(use_delta=False, use_keep=False),
    },
    "mask": {
        "curriculum": CurriculumSettings(enabled=False),
        "loss": LossSettings(use_delta=False),
    },
    "mask_curriculum": {"loss": LossSettings(use_delta=False)},
    "remac": {},
}

#: Trainer settings of every programmatic fit (the shipped configs' gradient clip; no validation).
TRAINER_SETTINGS: dict[str, Any] = {"gradient_clip_val": 10.0, "limit_val_batches": 0}


def remac_from_policy(policy: FlowPolicy, **kwargs: Any) -> RemacModule:
    """A :class:`RemacModule` on a copy of an in-memory base ``policy`` (instead of a checkpoint);
    ``kwargs``: its setting groups (``lora``, ``curriculum``, ``loss``, ``optim``, ``ema``)."""
    c = policy.config
    dims = {k: c[k] for k in ("horizon", "obs_dim", "action_dim")}
    sizes = PolicySizes(**{k: c[k] for k in ("channels", "hidden", "token_hidden", "depth")})
    module = RemacModule(base_ckpt=None, **dims, sizes=sizes, **kwargs)
    lora = module.lora
    module.policy = add_lora(
        copy.deepcopy(policy).train(), lora.rank, lora.alpha, lora.dropout, lora.use_mask
    )
    return module


def fit_base(
    datamodule: DemoDataModule, epochs: int, sizes: PolicySizes, **module_kwargs: Any
) -> FlowPolicy:
    """Trains a base (or, with ``training_time_rtc=``, training-time RTC) policy; returns it in
    eval mode. ``module_kwargs``: the other arguments of :class:`FlowPolicyModule`."""
    module = FlowPolicyModule(
        horizon=datamodule.horizon,
        obs_dim=datamodule.obs_dim,
        action_dim=datamodule.action_dim,
        sizes=sizes,
        **module_kwargs,
    )
    quiet_trainer(max_epochs=epochs, **TRAINER_SETTINGS).fit(module, datamodule)
    return module.policy.eval()


def fit_finetune(
    base: FlowPolicy, datamodule: DemoDataModule, epochs: int, **module_kwargs: Any
) -> FlowPolicy:
    """LoRA-finetunes a copy of ``base`` with :class:`RemacModule`; returns it in eval mode.
    ``module_kwargs``: its setting groups (e.g. ``**ABLATIONS["remac"]``, ``ema=...``)."""
    module = remac_from_policy(base, **module_kwargs)
    quiet_trainer(max_epochs=epochs, **TRAINER_SETTINGS).fit(module, datamodule)
    return module.policy.eval()
