"""Causal tracing (ROME, Meng et al. 2022, Sec. 2.1) to choose the layer ROME edits.

For a fact prompt ``template.format(subject)`` whose clean next-token answer is ``o``:

1. clean run: record each layer's FFN output at the subject's last token;
2. corrupted runs: add Gaussian noise ``N(0, ν²)`` to the input embeddings of every subject
   token, ``ν = noise_scale × std(embeddings)`` (ROME: 3σ), ``samples`` draws;
3. restored runs: the corrupted run with the FFN outputs of a window of layers centred on ``l``
   set back to their clean values at the subject's last token (ROME's MLP tracing, window 10 on
   GPT-2 XL; ours scales with depth).

The indirect effect of layer ``l`` is ``p_restored(o) − p_corrupted(o)``; its mean over facts is
the average indirect effect (AIE). ROME edits the layer of maximal MLP AIE at the last subject
token. :func:`choose_rome_layer` returns that layer among the editable ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from llm_methods.lm import LM, LMError
from llm_methods.suit.keys import prompt_with_subject

__all__ = ["TraceResult", "causal_trace", "choose_rome_layer", "subject_span"]


@dataclass(frozen=True)
class TraceResult:
    """``aie`` ``[n_layers]``: average indirect effect of restoring each layer's FFN window;
    ``p_clean``/``p_corrupted``: mean probability of the clean answer token."""

    aie: tuple[float, ...]
    p_clean: float
    p_corrupted: float
    n_facts: int
    window: int


def subject_span(lm: LM, template: str, subject: str) -> tuple[list[int], int, int]:
    """Token ids of ``template.format(subject)`` and the subject's ``[first, last]`` positions."""
    ids, last = prompt_with_subject(lm, template, subject)
    tok = lm.tokenizer
    bos = [tok.bos_token_id] if tok.bos_token_id is not None else []
    head = template.split("{}")[0]
    before = bos + list(tok(head.rstrip(" "), add_special_tokens=False).input_ids) if head else bos
    first = min(len(before), last)
    return ids, first, last


def _ffn(lm: LM, layer: int) -> nn.Module:
    return lm.sublayer(layer, "ffn")


@torch.no_grad()
def _trace_one(
    lm: LM,
    ids: list[int],
    first: int,
    last: int,
    noise: float,
    samples: int,
    window: int,
    generator: torch.Generator,
    centres: Sequence[int],
) -> tuple[list[float], float, float]:
    """Indirect effect per layer for one prompt; returns (effects, p_clean, p_corrupted)."""
    n_layers = lm.n_layers
    x = torch.tensor([ids], device=lm.device)
    clean_ffn: dict[int, torch.Tensor] = {}

    def record(layer: int) -> Any:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            out = output[0] if isinstance(output, tuple) else output
            clean_ffn[layer] = out[0, last].detach().clone()

        return hook

    handles = [_ffn(lm, i).register_forward_hook(record(i)) for i in range(n_layers)]
    try:
        logits = lm.model(input_ids=x).logits[0, -1].float()
    finally:
        for h in handles:
            h.remove()
    probs = logits.softmax(-1)
    answer = int(probs.argmax())
    p_clean = float(probs[answer])
    embed = lm.model.get_input_embeddings()
    dim = embed.weight.shape[1]
    span = last - first + 1
    draws = torch.randn((samples, span, dim), generator=generator) * noise

    def corrupt(module: nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor:
        out = output.clone()
        out[:, first : last + 1] += draws.to(out)[: out.shape[0]]
        return out

    def restore(layers: set[int]) -> list[Any]:
        def make(layer: int) -> Any:
            def hook(module: nn.Module, args: Any, output: Any) -> Any:
                out = output[0] if isinstance(output, tuple) else output
                out = out.clone()
                out[:, last] = clean_ffn[layer].to(out)
                return (out, *output[1:]) if isinstance(output, tuple) else out

            return hook

        return [_ffn(lm, i).register_forward_hook(make(i)) for i in sorted(layers)]

    batch = x.expand(samples, -1)
    handle = embed.register_forward_hook(corrupt)
    try:
        p_corr = float(
            lm.model(input_ids=batch).logits[:, -1].float().softmax(-1)[:, answer].mean()
        )
        effects = [float("nan")] * n_layers
        half = window // 2
        for layer in centres:
            lo, hi = max(0, layer - half), min(n_layers, layer - half + window)
            handles = restore(set(range(lo, hi)))
            try:
                out = lm.model(input_ids=batch).logits[:, -1].float().softmax(-1)
                effects[layer] = float(out[:, answer].mean()) - p_corr
            finally:
                for h in handles:
                    h.remove()
    finally:
        handle.remove()
    return effects, p_clean, p_corr


def causal_trace(
    lm: LM,
    prompts: Sequence[str],
    subjects: Sequence[str],
    *,
    noise_scale: float = 3.0,
    samples: int = 5,
    window: int | None = None,
    layers: Sequence[int] | None = None,
    seed: int = 0,
    quiet: bool = True,
) -> TraceResult:
    """MLP causal tracing over facts (``prompts`` with one ``{}`` for the subject).

    The answer token of each fact is the model's own clean greedy next token (ROME traces facts
    the model predicts). ``window`` defaults to ``max(1, n_layers // 5)`` (ROME: 10 of 48).
    ``layers`` restricts the traced centre layers (others get AIE ``nan``) to save forwards.
    ``quiet=False``: a progress line per fact on stderr (:func:`iclr26_common.progress.progress`).
    """
    from iclr26_common.progress import progress

    if len(prompts) == 0:
        raise LMError("causal tracing needs at least one fact prompt")
    if len(prompts) != len(subjects):
        raise LMError(f"{len(prompts)} prompts but {len(subjects)} subjects")
    if noise_scale <= 0 or samples < 1:
        raise LMError("causal tracing needs noise_scale > 0 and samples >= 1")
    window = max(1, lm.n_layers // 5) if window is None else window
    if not 1 <= window <= lm.n_layers:
        raise LMError(f"window must be in [1, {lm.n_layers}], got {window}")
    weight = lm.model.get_input_embeddings().weight
    noise = noise_scale * float(weight.detach().float().std())
    generator = torch.Generator().manual_seed(seed)  # CPU on purpose: same noise on every device
    centres = list(range(lm.n_layers)) if layers is None else [lm.layer_index(i) for i in layers]
    total = torch.zeros(lm.n_layers, dtype=torch.float64)
    p_clean = p_corr = 0.0
    facts = list(zip(prompts, subjects, strict=True))
    for prompt, subject in progress(facts, description="suit trace facts", quiet=quiet):
        ids, first, last = subject_span(lm, prompt, subject)
        effects, pc, pk = _trace_one(
            lm, ids, first, last, noise, samples, window, generator, centres
        )
        total += torch.tensor(effects, dtype=torch.float64)
        p_clean += pc
        p_corr += pk
    n = len(prompts)
    return TraceResult(
        aie=tuple(float(v) for v in total / n),
        p_clean=p_clean / n,
        p_corrupted=p_corr / n,
        n_facts=n,
        window=window,
    )


def choose_rome_layer(trace: TraceResult, n_layers: int) -> int:
    """The layer of maximal MLP AIE among the editable ones (not the last: a value written
    there cannot reach the answer position through later layers' attention)."""
    editable = [i for i in range(n_layers - 1) if trace.aie[i] == trace.aie[i]]  # not nan
    if not editable:
        raise LMError("causal trace has no editable traced layer (all nan or only the last)")
    return max(editable, key=lambda layer: trace.aie[layer])
