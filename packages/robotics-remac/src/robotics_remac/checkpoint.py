"""Loading and saving policies: Lightning checkpoints of the two modules, or plain policy files.

Everything is read with ``torch.load(..., weights_only=True)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from robotics_remac.lerobot import RemacFormatError
from robotics_remac.model import FlowPolicy, add_lora

__all__ = ["LoadedPolicy", "check_lightning_checkpoint", "load_policy", "save_policy"]

POLICY_FORMAT = "robotics-remac-policy-1"
POLICY_KEYS = ("obs_dim", "action_dim", "horizon", "channels", "hidden", "token_hidden", "depth")


@dataclass
class LoadedPolicy:
    """A policy in eval mode and how it was trained.

    ``kind``: "base", "training_time_rtc", "remac" (masked LoRA) or "lora_only" (LoRA, no mask).
    """

    policy: FlowPolicy
    kind: str
    hparams: dict[str, Any]


def save_policy(path: Path | str, policy: FlowPolicy, kind: str) -> Path:
    """Writes a plain policy file (config + state dict) readable with ``weights_only=True``."""
    path = Path(path)
    torch.save(
        {
            "format": POLICY_FORMAT,
            "kind": kind,
            "policy_config": dict(policy.config),
            "lora_config": dict(getattr(policy, "lora_config", {}) or {}),
            "state_dict": policy.state_dict(),
        },
        path,
    )
    return path


def _build(config: dict[str, Any], lora: dict[str, Any] | None, where: Path) -> FlowPolicy:
    missing = [k for k in POLICY_KEYS if k not in config]
    if missing:
        raise RemacFormatError(f"{where}: policy config lacks {missing}")
    policy = FlowPolicy(**{k: int(config[k]) for k in POLICY_KEYS})
    if lora:
        add_lora(
            policy,
            int(lora["rank"]),
            float(lora["alpha"]),
            float(lora["dropout"]),
            bool(lora["use_mask"]),
        )
    return policy


def check_lightning_checkpoint(path: Path | str) -> None:
    """Raises a one-line error unless ``path`` is a Lightning checkpoint (a dict with a
    ``state_dict``) readable with ``weights_only=True`` (``--ckpt_path`` of the CLI)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: checkpoint not found")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # unpickling errors come in many types
        first = (str(error).splitlines() or [type(error).__name__])[0]
        raise RemacFormatError(f"{path}: not a readable checkpoint ({first})") from None
    if not isinstance(blob, dict) or "state_dict" not in blob:
        raise RemacFormatError(f"{path}: not a Lightning checkpoint (no 'state_dict')")


def load_policy(path: Path | str) -> LoadedPolicy:
    """Reads a Lightning ``.ckpt`` (:class:`~robotics_remac.lit_module.FlowPolicyModule` or
    :class:`~robotics_remac.lit_module.RemacModule`) or a :func:`save_policy` file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: policy checkpoint not found")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # unpickling errors come in many types
        raise RemacFormatError(f"{path}: not a readable checkpoint ({error})") from None
    if not isinstance(blob, dict):
        raise RemacFormatError(f"{path}: not a checkpoint dict")
    if blob.get("format") == POLICY_FORMAT:
        kind = str(blob["kind"])
        policy = _build(blob["policy_config"], blob.get("lora_config") or None, path)
        state, hparams = blob["state_dict"], {}
    elif "hyper_parameters" in blob and "state_dict" in blob:
        hparams = dict(blob["hyper_parameters"])
        if "rank" in hparams:  # RemacModule
            kind = "remac" if hparams.get("use_mask", True) else "lora_only"
            lora = {
                "rank": hparams["rank"],
                "alpha": hparams["alpha"],
                "dropout": hparams["lora_dropout"],
                "use_mask": hparams["use_mask"],
            }
            config = hparams.get("policy_config") or hparams
        else:
            kind = "training_time_rtc" if hparams.get("training_time_rtc") else "base"
            lora, config = None, hparams
        policy = _build(config, lora, path)
        prefix = "policy."
        state = {k[len(prefix) :]: v for k, v in blob["state_dict"].items() if k.startswith(prefix)}
    else:
        raise RemacFormatError(f"{path}: neither a Lightning checkpoint nor a policy file")
    try:
        policy.load_state_dict(state)
    except RuntimeError as error:
        first = str(error).splitlines()[0]
        raise RemacFormatError(f"{path}: state_dict does not match the config ({first})") from None
    return LoadedPolicy(policy.eval(), kind, hparams)
