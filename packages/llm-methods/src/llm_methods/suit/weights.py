"""The edited weights of ``llm-methods suit edit``: saved under the model's own parameter names,
applied back onto the base model.

``edited_weights.safetensors`` holds the edited ``down_proj`` matrices named as the HF model's
``state_dict`` names them (Llama / Qwen2 / SmolLM2: ``model.layers.{i}.mlp.down_proj.weight``),
with the base model spec in the file's metadata (``base_spec``). Two ways to use them:

- ``load_edited(OUT)`` (or ``load_edited(OUT / "edited_weights.safetensors")``): loads the base
  spec with :func:`llm_methods.lm.load_lm` and copies the saved tensors onto it;
- ``suit edit --save-model`` also writes ``OUT/model``, a full HF folder (``save_pretrained`` of
  the edited model and its tokenizer), which any model spec option takes as it is
  (``llm-methods score --model OUT/model``, ``load_lm("OUT/model")``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from iclr26_common.textio import input_file
from llm_methods.lm import LM, LMError

__all__ = ["WEIGHTS_FILE", "apply_edited_weights", "edited_state", "load_edited"]

WEIGHTS_FILE = "edited_weights.safetensors"


def _named(lm: LM) -> dict[int, str]:
    """id(parameter) -> its name in ``lm.model.state_dict()`` (a peft wrapper's base model is
    looked through, so the names are the plain HF ones)."""
    model = lm.model
    if hasattr(model, "get_base_model"):
        model = model.get_base_model()
    return {id(p): name for name, p in model.named_parameters(remove_duplicate=False)}


def edited_state(lm: LM, layers: Sequence[int]) -> dict[str, torch.Tensor]:
    """The edit weight (``keys.edit_weight``) of each of ``layers`` under its HF parameter name,
    on the CPU and contiguous (what :func:`safetensors.torch.save` takes)."""
    from llm_methods.suit.keys import edit_weight

    names = _named(lm)
    out = {}
    for i in layers:
        weight = edit_weight(lm, i).weight
        if id(weight) not in names:
            raise LMError(f"layer {i}'s edit weight is not a parameter of the model")
        out[names[id(weight)]] = weight.detach().cpu().contiguous()
    return out


def apply_edited_weights(lm: LM, path: Path) -> list[str]:
    """Copy the tensors of an ``edited_weights.safetensors`` onto ``lm`` (in place); returns the
    names applied. Every name must be a parameter of ``lm`` with the same shape."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    try:
        tensors = load_file(str(path))
    except (OSError, SafetensorError) as error:
        raise LMError(f"{path}: not a readable safetensors file ({error})") from None
    model = lm.model.get_base_model() if hasattr(lm.model, "get_base_model") else lm.model
    params = dict(model.named_parameters())
    for name, tensor in tensors.items():
        if name not in params:
            raise LMError(
                f"{path}: {name!r} is not a parameter of {lm.name} (a file written before "
                "llm-methods 0.7.0 names it 'layers.{i}.down_proj.weight'; rerun suit edit)"
            )
        if tuple(params[name].shape) != tuple(tensor.shape):
            raise LMError(
                f"{path}: {name!r} is {tuple(tensor.shape)}, the model's is "
                f"{tuple(params[name].shape)}"
            )
    with torch.no_grad():
        for name, tensor in tensors.items():
            params[name].copy_(tensor.to(params[name].device, params[name].dtype))
    return sorted(tensors)


def _base_spec(path: Path) -> str:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        meta = handle.metadata() or {}
    spec = meta.get("base_spec")
    if not spec:
        raise LMError(f"{path}: no 'base_spec' in its metadata; pass base=SPEC")
    return spec


def load_edited(
    path: str | Path,
    base: str | Path | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
) -> LM:
    """The edited model of a ``suit edit --out`` folder (or its ``edited_weights.safetensors``):
    ``base`` (default: the spec recorded in the file) loaded with ``load_lm``, the saved
    tensors applied."""
    from llm_methods.lm import load_lm

    path = Path(path).expanduser()
    if path.is_dir():
        path = path / WEIGHTS_FILE
    input_file(path, error=LMError)
    lm = load_lm(base if base is not None else _base_spec(path), device, dtype)
    apply_edited_weights(lm, path)
    lm.name = f"{lm.name}+{path.parent.name}"
    return lm
