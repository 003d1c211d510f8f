"""Loading and saving policies: Lightning checkpoints of the two modules, or plain policy files.

Everything is read with ``torch.load(..., weights_only=True)``
(:func:`iclr26_common.checkpoints.load_weights_only`: a missing or unreadable file is one line
naming it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from iclr26_common.checkpoints import load_weights_only
from robotics_remac.dataset_format import RemacFormatError
from robotics_remac.model import FlowPolicy, add_lora

__all__ = [
    "LoadedPolicy",
    "check_lightning_checkpoint",
    "flat_0_3_message",
    "is_flat_0_3",
    "load_policy",
    "save_policy",
]

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


def _build(config: dict[str, Any], lora: dict[str, Any] | None, where: Path | str) -> FlowPolicy:
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
    ``state_dict``) readable with ``weights_only=True`` whose hyperparameters LightningCLI can
    parse back (``--ckpt_path`` of the CLI): those of 0.3.x are flat, which the grouped settings
    refuse, so such a file is named with what still reads it."""
    blob = load_weights_only(
        path, error=RemacFormatError, require_state_dict=True, package="robotics_remac"
    )
    hparams = blob.get("hyper_parameters")
    if isinstance(hparams, dict) and is_flat_0_3(hparams):
        raise RemacFormatError(_flat_0_3(path))


def _flat_0_3(path: Path | str) -> str:
    return (
        f"{path}: written by robotics-remac 0.3.x (flat hyperparameters), which --ckpt_path "
        "cannot resume; `eval` and --model.init_args.base_ckpt still read it"
    )


def flat_0_3_message(path: Path | str) -> str | None:
    """``PATH: written by robotics-remac 0.3.x ...`` when ``path`` is a readable Lightning
    checkpoint with 0.3.x's flat hyperparameters (which name no model class, so the workspace's
    ``--ckpt_path`` check refuses them as a plain Lightning checkpoint), else ``None``."""
    try:
        blob = load_weights_only(path, error=RemacFormatError, require_state_dict=True)
    except Exception:  # unreadable, missing...: common's message stands
        return None
    hparams = blob.get("hyper_parameters")
    return _flat_0_3(path) if isinstance(hparams, dict) and is_flat_0_3(hparams) else None


def is_flat_0_3(hparams: dict[str, Any]) -> bool:
    """Whether Lightning hyperparameters are the flat ones of robotics-remac 0.3.x (``channels``,
    ``rank``, ... at the top level) rather than 0.4's groups (:mod:`robotics_remac.settings`)."""
    return "channels" in hparams and not isinstance(hparams.get("sizes"), dict)


def _lightning_spec(
    hparams: dict[str, Any],
) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """``(kind, policy config, LoRA config or None)`` from a Lightning checkpoint's
    hyperparameters: grouped (0.4: ``sizes``, ``lora``, ``training_time_rtc`` dicts) or flat
    (0.3.x: ``channels``, ``rank``, ``training_time_rtc: bool``, and ``policy_config``)."""
    if is_flat_0_3(hparams):
        if "rank" in hparams:  # RemacModule
            lora = {
                "rank": hparams["rank"],
                "alpha": hparams["alpha"],
                "dropout": hparams["lora_dropout"],
                "use_mask": hparams["use_mask"],
            }
            kind = "remac" if lora["use_mask"] else "lora_only"
            return kind, hparams.get("policy_config") or hparams, lora
        kind = "training_time_rtc" if hparams.get("training_time_rtc") else "base"
        return kind, hparams, None
    config = {k: hparams[k] for k in ("horizon", "obs_dim", "action_dim") if k in hparams}
    config.update(hparams.get("sizes") or {})
    if isinstance(hparams.get("lora"), dict):  # RemacModule
        lora = dict(hparams["lora"])
        return ("remac" if lora.get("use_mask", True) else "lora_only"), config, lora
    ttrtc = bool((hparams.get("training_time_rtc") or {}).get("enabled"))
    return ("training_time_rtc" if ttrtc else "base"), config, None


def load_policy(path: Path | str, *, option: str | None = None) -> LoadedPolicy:
    """Reads a Lightning ``.ckpt`` (:class:`~robotics_remac.lit_module.FlowPolicyModule` or
    :class:`~robotics_remac.lit_module.RemacModule`, written by 0.4 or 0.3.x) or a
    :func:`save_policy` file. ``option``: the command-line option that gave ``path``
    (``"--policy"``), which then starts every error message (``--policy PATH: ...``)."""
    path = Path(path)
    blob = load_weights_only(
        path, "policy checkpoint", error=RemacFormatError, package="robotics_remac", option=option
    )
    where = f"{option} {path}" if option else str(path)
    if not isinstance(blob, dict):
        raise RemacFormatError(f"{where}: not a checkpoint dict")
    if blob.get("format") == POLICY_FORMAT:
        kind = str(blob["kind"])
        policy = _build(blob["policy_config"], blob.get("lora_config") or None, where)
        state, hparams = blob["state_dict"], {}
    elif "hyper_parameters" in blob and "state_dict" in blob:
        hparams = dict(blob["hyper_parameters"])
        kind, config, lora = _lightning_spec(hparams)
        policy = _build(config, lora, where)
        prefix = "policy."
        state = {k[len(prefix) :]: v for k, v in blob["state_dict"].items() if k.startswith(prefix)}
    else:
        raise RemacFormatError(f"{where}: neither a Lightning checkpoint nor a policy file")
    try:
        policy.load_state_dict(state)
    except RuntimeError as error:
        first = str(error).splitlines()[0]
        raise RemacFormatError(f"{where}: state_dict does not match the config ({first})") from None
    return LoadedPolicy(policy.eval(), kind, hparams)
