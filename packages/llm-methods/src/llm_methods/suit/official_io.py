"""Key statistics C and AlphaEdit's projection P in the official files' layout.

- **C** (ROME / MEMIT / AlphaEdit ``layer_stats``): one ``numpy.savez`` file per layer at
  ``STATS_DIR/{model_name}/{ds_name}_stats/{layer_name}_{precision}_mom2{_n}.npz``, with
  ``layer_name`` = ``model.layers.{i}.mlp.down_proj`` (the official ``rewrite_module_tmp`` of
  Llama models), ``_n`` the sample count when one is given, and the keys of the official
  ``CombinedStat(mom2=SecondMoment())`` state: ``mom2.constructor`` (a string), ``mom2.count``
  (number of key vectors summed) and ``mom2.mom2`` ``[d_ff, d_ff]`` (Σ k kᵀ, *not* divided by
  the count; the official ``get_cov`` uses ``mom2 / count``, our ``C``).
- **P** (AlphaEdit ``experiments/evaluate.py``): ``torch.save`` of one tensor
  ``[len(layers), d_ff, d_ff]`` named ``null_space_project.pt``, row ``i`` the projector of the
  ``i``-th edit layer in the order of ``hparams.layers``.

Readers reject bad input with one line naming the file (and the field).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from iclr26_common.textio import input_file
from llm_methods.lm.errors import LMError

__all__ = [
    "PROJECTION_FILE",
    "read_official_stats",
    "read_projection",
    "stats_path",
    "write_official_stats",
    "write_projection",
]

PROJECTION_FILE = "null_space_project.pt"
CONSTRUCTOR = "util.runningstats.SecondMoment()"  # the official state's constructor string
LAYER_NAME = "model.layers.{}.mlp.down_proj"


def stats_path(
    root: Path,
    model_name: str,
    ds_name: str,
    layer: int,
    precision: str = "float32",
    sample_size: int | None = None,
) -> Path:
    """The official ``layer_stats`` file name of ``layer``'s key second moment under ``root``."""
    suffix = "" if sample_size is None else f"_{sample_size}"
    name = f"{LAYER_NAME.format(layer)}_{precision}_mom2{suffix}.npz"
    return Path(root) / model_name / f"{ds_name}_stats" / name


def write_official_stats(
    root: Path,
    model_name: str,
    ds_name: str,
    stats: dict[int, torch.Tensor],
    count: int,
    sample_size: int | None = None,
) -> list[Path]:
    """Write each layer's ``C = E[kkᵀ]`` (``stats[layer]``) as the official ``mom2`` state
    (Σ kkᵀ = C·count, float32); returns the files written."""
    if count < 1:
        raise LMError(f"the key count must be >= 1, got {count}")
    out = []
    for layer, c in sorted(stats.items()):
        path = stats_path(root, model_name, ds_name, layer, "float32", sample_size)
        path.parent.mkdir(parents=True, exist_ok=True)
        mom2 = (c.double() * count).float().cpu().numpy()
        np.savez(
            path,
            **{"mom2.constructor": np.array(CONSTRUCTOR), "mom2.count": count, "mom2.mom2": mom2},
        )
        out.append(path)
    return out


def _read_npz(path: Path) -> torch.Tensor:
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in ("mom2.count", "mom2.mom2") if k not in data.files]
            if missing:
                raise LMError(
                    f"{path}: field {missing[0]!r} missing (not an official mom2 stats file)"
                )
            count = int(data["mom2.count"])
            mom2 = np.asarray(data["mom2.mom2"], dtype=np.float64)
    except (OSError, ValueError) as error:
        raise LMError(f"{path}: not a readable .npz file ({error})") from None
    if mom2.ndim != 2 or mom2.shape[0] != mom2.shape[1]:
        raise LMError(f"{path}: field 'mom2.mom2' must be a square matrix, got {mom2.shape}")
    if count < 1 or not np.isfinite(mom2).all():
        raise LMError(f"{path}: field 'mom2.count' must be >= 1 and 'mom2.mom2' finite")
    return torch.from_numpy(mom2 / count).float()


def read_official_stats(
    root: Path, layers: Sequence[int], dims: dict[int, int]
) -> dict[int, torch.Tensor]:
    """``C`` per layer from an official stats folder (``root`` is ``STATS_DIR`` or any folder
    below it): the one ``*/{LAYER_NAME}_*_mom2*.npz`` file of each layer; ``dims[layer]`` is the
    editable layer's ``d_ff`` (checked)."""
    root = Path(root)
    if not root.is_dir():
        raise LMError(f"{root}: no such stats folder")
    out = {}
    for layer in layers:
        pattern = f"{LAYER_NAME.format(layer)}_*_mom2*.npz"
        found = sorted(root.rglob(pattern))
        if len(found) != 1:
            what = "no file" if not found else f"{len(found)} files ({', '.join(map(str, found))})"
            raise LMError(f"{root}: {what} matching {pattern} for layer {layer}; need exactly one")
        c = _read_npz(found[0])
        if c.shape[0] != dims[layer]:
            raise LMError(
                f"{found[0]}: field 'mom2.mom2' is {tuple(c.shape)} but layer {layer}'s "
                f"keys have {dims[layer]} dims"
            )
        out[layer] = c
    return out


def write_projection(
    path: Path, projectors: dict[int, torch.Tensor], layers: Sequence[int]
) -> Path:
    """``torch.save`` the ``[len(layers), d_ff, d_ff]`` stack of ``projectors`` in ``layers``
    order (the official ``null_space_project.pt``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(torch.stack([projectors[i].float().cpu() for i in layers]), path)
    return path


def read_projection(
    path: Path, layers: Sequence[int], dims: dict[int, int]
) -> dict[int, torch.Tensor]:
    """Projector per layer from an official ``null_space_project.pt`` (``weights_only`` load;
    row ``i`` belongs to ``layers[i]``, the order of ``hparams.layers``)."""
    path = Path(path)
    input_file(path, error=LMError)
    try:
        p = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # any unpickling failure is a bad file
        raise LMError(f"{path}: not a tensor file readable with weights_only ({error})") from None
    if not isinstance(p, torch.Tensor) or p.ndim != 3:
        raise LMError(f"{path}: expected one tensor [layers, d_ff, d_ff]")
    if p.shape[0] != len(layers):
        raise LMError(
            f"{path}: holds {p.shape[0]} layers but {len(layers)} edit layers are used "
            f"({list(layers)})"
        )
    out = {}
    for i, layer in enumerate(layers):
        if tuple(p.shape[1:]) != (dims[layer], dims[layer]):
            raise LMError(
                f"{path}: layer {layer} is {tuple(p.shape[1:])}, expected "
                f"{(dims[layer], dims[layer])}"
            )
        out[layer] = p[i].float()
    if not torch.isfinite(p).all():
        raise LMError(f"{path}: non-finite entries")
    return out
