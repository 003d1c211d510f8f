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

__all__ = [
    "add_to_residual",
    "capture_residual",
    "capture_sublayers",
    "forward_residual",
    "replace_residual",
    "reuse_prefix",
]


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


class _ResidualCaptured(Exception):
    """Raised by :func:`forward_residual`'s hook once the deepest layer's residual is recorded."""


@torch.no_grad()
def forward_residual(
    lm: LM,
    layers: Sequence[int],
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
) -> dict[int, torch.Tensor]:
    """The residual after each of ``layers`` (``{layer: [B, T, d]}``, indices normalised) of one
    forward that stops once the deepest of them has run: what :func:`capture_residual` records
    around a full forward, without the layers after it, the final norm and the ``[B, T, V]``
    logits."""
    index = [lm.layer_index(i) for i in layers]
    if not index:
        raise LMError("forward_residual needs at least one layer")
    last = max(index)
    with capture_residual(lm, index) as store:

        def stop(module: nn.Module, args: Any, output: Any) -> None:
            raise _ResidualCaptured

        handle = lm.layers[last].register_forward_hook(stop)  # after capture_residual's hook
        try:
            lm.model(input_ids=input_ids, attention_mask=attention_mask)
        except _ResidualCaptured:
            pass
        finally:
            handle.remove()
    return {i: store[i] for i in index}


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


@contextmanager
def reuse_prefix(lm: LM, layer: int) -> Iterator[None]:
    """Run decoder layers ``0..layer`` once for all forwards inside: the first forward runs every
    layer and keeps layer ``layer``'s output; each later one skips layers ``0..layer`` (those
    before it pass their input through, ``layer`` returns a copy of the kept output) and runs
    only the layers after it. Hooks on layer ``layer`` (:func:`replace_residual`, entered
    inside this context) still see that output, so a loop that changes only the residual after
    ``layer`` (a value vector optimised there, weights after it) gets the numbers a full forward
    gives, bit for bit, for a part of the forward.

    Every forward inside must read the same batch (checked: the same ``[B, T, d]`` shape) and
    nothing in layers ``0..layer`` may change in between; no gradient reaches them."""
    i = lm.layer_index(layer)
    modules = [lm.layers[j] for j in range(i + 1)]
    kept: dict[str, Any] = {}
    saved = [m.__dict__.get("forward") for m in modules]

    def cached(args: Any, kwargs: Any) -> Any:
        hidden = args[0] if args else kwargs["hidden_states"]
        out = _first(kept["out"])
        if hidden.shape != out.shape:
            raise LMError(
                f"reuse_prefix: a forward of shape {tuple(hidden.shape)} after one of "
                f"{tuple(out.shape)}: every forward inside must read the same batch"
            )
        return hidden

    def passthrough(*args: Any, **kwargs: Any) -> Any:
        return _with_first(kept["out"], cached(args, kwargs))

    def replay(*args: Any, **kwargs: Any) -> Any:
        cached(args, kwargs)
        return _with_first(kept["out"], _first(kept["out"]).clone())

    def record(module: nn.Module, args: Any, output: Any) -> None:
        if "out" in kept:
            return
        kept["out"] = _with_first(output, _first(output).detach().clone())
        for m in modules[:-1]:
            m.forward = passthrough
        modules[-1].forward = replay

    handle = modules[-1].register_forward_hook(record)
    try:
        yield
    finally:
        handle.remove()
        for m, own in zip(modules, saved, strict=True):
            if own is None:
                m.__dict__.pop("forward", None)
            else:
                m.forward = own
