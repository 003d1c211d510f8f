"""LoRA (peft) and selective layer freezing on an :class:`LM`."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from llm_methods.lm.errors import LMError
from llm_methods.lm.loading import LM, find_modules

__all__ = ["add_lora", "count_parameters", "default_lora_targets", "train_only_layers"]


def default_lora_targets(model: nn.Module) -> list[str]:
    """peft's own default LoRA targets for the model's ``model_type`` (Llama/Qwen2: q_proj,
    v_proj; GPT-2: c_attn; Pythia: query_key_value; ...): the table is peft's, not a copy."""
    from peft.utils import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as DEFAULTS

    config = getattr(getattr(model, "get_base_model", lambda: model)(), "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in DEFAULTS:
        raise LMError(
            f"model {type(model).__name__} (model_type {model_type!r}) has no peft default LoRA "
            "targets: pass target_modules"
        )
    return list(DEFAULTS[model_type])


def add_lora(
    lm: LM,
    r: int = 8,
    alpha: float = 16.0,
    dropout: float = 0.0,
    target_modules: Sequence[str] | None = None,
    layers: Sequence[int] | None = None,
) -> LM:
    """Wrap the model in a peft LoRA (only the adapters train); ``layers`` restricts it to those
    decoder layers. Returns a new :class:`LM` sharing the tokenizer (``lm.model`` is modified in
    place by peft; merge with ``lm.model.merge_and_unload()``)."""
    from peft import LoraConfig, get_peft_model

    if r < 1:
        raise LMError(f"LoRA rank must be >= 1, got {r}")
    targets = list(target_modules) if target_modules else default_lora_targets(lm.model)
    config = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=targets,
        layers_to_transform=None if layers is None else [lm.layer_index(i) for i in layers],
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(lm.model, config)
    return LM(tokenizer=lm.tokenizer, model=model, device=lm.device, name=f"{lm.name}+lora")


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts (tied weights counted once)."""
    seen: set[int] = set()
    trainable = total = 0
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        trainable += p.numel() if p.requires_grad else 0
    return trainable, total


def train_only_layers(
    lm: LM,
    layers: Sequence[int],
    include_final_norm: bool = False,
    include_unembed: bool = False,
) -> tuple[int, int]:
    """Freeze every parameter except those of decoder ``layers`` (plus optionally the final norm
    and the unembedding; with tied embeddings the unembedding is the input embedding too).
    Returns (trainable, total) parameter counts."""
    index = sorted({lm.layer_index(i) for i in layers})
    if not index:
        raise LMError("train_only_layers needs at least one layer")
    for p in lm.model.parameters():
        p.requires_grad_(False)
    parts = find_modules(lm.model)
    chosen: list[nn.Module] = [parts.layers[i] for i in index]
    if include_final_norm:
        chosen.append(parts.final_norm)
    if include_unembed:
        chosen.append(parts.unembed)
    for module in chosen:
        for p in module.parameters():
            p.requires_grad_(True)
    return count_parameters(lm.model)
