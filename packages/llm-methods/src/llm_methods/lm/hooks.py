"""Residual-stream hooks as context managers (plain torch forward hooks on decoder layers).

Plain hooks rather than nnsight: they need no extra dependency, work the same on every
architecture :func:`llm_methods.lm.loading.find_modules` knows, compose with peft wrappers and
``torch.no_grad``/autograd, and are removed on exit even when the forward raises.

The residual stream "after layer ``i``" is the first output of decoder layer ``i`` (HF
``hidden_states[i + 1]``; for the last layer that is *before* the final norm, whereas HF's last
``hidden_states`` entry is after it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from llm_methods.lm.errors import LMError
from llm_methods.lm.loading import LM

__all__ = ["add_to_residual", "capture_residual", "capture_sublayers", "replace_residual"]


def _first(output: Any) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def _with_first(output: Any, hidden: torch.Tensor) -> Any:
    return (hidden, *output[1:]) if isinstance(output, tuple) else hidden


@contextmanager
def _hooks(modules: Iterable[nn.Module], make: Any) -> Iterator[None]:
    handles = [module.register_forward_hook(make(i)) for i, module in enumerate(modules)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def capture_residual(
    lm: LM, layers: Sequence[int] | None = None, detach: bool = True
) -> Iterator[dict[int, torch.Tensor]]:
    """Record the residual stream after each of ``layers`` (default all) during forwards inside.

    Yields a dict ``{layer: [B, T, d]}`` (layer indices normalised to 0..L-1), filled by each
    forward (a later forward overwrites). ``detach=False`` keeps the graph for losses.
    """
    index = [lm.layer_index(i) for i in (range(lm.n_layers) if layers is None else layers)]
    store: dict[int, torch.Tensor] = {}

    def make(k: int) -> Any:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            hidden = _first(output)
            store[index[k]] = hidden.detach() if detach else hidden

        return hook

    with _hooks([lm.layers[i] for i in index], make):
        yield store


@contextmanager
def capture_sublayers(
    lm: LM, layers: Sequence[int], kind: str, detach: bool = True
) -> Iterator[dict[int, torch.Tensor]]:
    """Record the output of the attention (``kind="attn"``) or FFN (``"ffn"``) block of ``layers``
    (what the block adds to the residual stream), ``{layer: [B, T, d]}``."""
    index = [lm.layer_index(i) for i in layers]
    store: dict[int, torch.Tensor] = {}

    def make(k: int) -> Any:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            hidden = _first(output)
            store[index[k]] = hidden.detach() if detach else hidden

        return hook

    with _hooks([lm.sublayer(i, kind) for i in index], make):
        yield store


def _as_vector(lm: LM, vector: torch.Tensor) -> torch.Tensor:
    vector = torch.as_tensor(vector)
    if vector.shape[-1] != lm.hidden_size:
        raise LMError(
            f"vector has last dimension {vector.shape[-1]}, the residual stream has "
            f"{lm.hidden_size}"
        )
    return vector


@contextmanager
def add_to_residual(
    lm: LM,
    layer: int,
    vector: torch.Tensor,
    scale: float = 1.0,
    positions: Sequence[int] | slice | None = None,
) -> Iterator[None]:
    """Add ``scale * vector`` to the residual stream after ``layer`` during forwards inside.

    ``vector`` is ``[d]`` (every position), ``[T, d]`` (per position) or ``[B, T, d]``;
    ``positions`` (indices or a slice of the sequence axis) restricts a ``[d]`` vector to those
    positions (steering at all positions is ``positions=None``). During cached generation the
    per-step forward sees one position at a time; ``positions`` then counts within that step.
    """
    i = lm.layer_index(layer)
    vec = _as_vector(lm, vector)

    def make(_: int) -> Any:
        def hook(module: nn.Module, args: Any, output: Any) -> Any:
            hidden = _first(output)
            delta = (scale * vec).to(device=hidden.device, dtype=hidden.dtype)
            if positions is None:
                if delta.dim() >= 2 and delta.shape[-2] != hidden.shape[-2]:
                    raise LMError(
                        f"per-position vector covers {delta.shape[-2]} positions, the input has "
                        f"{hidden.shape[-2]}"
                    )
                hidden = hidden + delta
            else:
                if delta.dim() != 1:
                    raise LMError("positions= needs a single [d] vector")
                hidden = hidden.clone()
                hidden[:, positions, :] += delta
            return _with_first(output, hidden)

        return hook

    with _hooks([lm.layers[i]], make):
        yield


@contextmanager
def replace_residual(lm: LM, layer: int, fn: Any) -> Iterator[None]:
    """Replace the residual stream after ``layer`` by ``fn(hidden [B, T, d]) -> [B, T, d]``
    during forwards inside (patching, projections, ablations)."""
    i = lm.layer_index(layer)

    def make(_: int) -> Any:
        def hook(module: nn.Module, args: Any, output: Any) -> Any:
            hidden = _first(output)
            new = fn(hidden)
            if new.shape != hidden.shape:
                raise LMError(
                    f"replacement has shape {tuple(new.shape)}, expected {tuple(hidden.shape)}"
                )
            return _with_first(output, new)

        return hook

    with _hooks([lm.layers[i]], make):
        yield
