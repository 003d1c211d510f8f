"""Shared locate-then-edit machinery: subject positions, MLP keys/values, key second moments.

The edited matrix of layer ``l`` is the FFN output projection ``W_out`` (Llama ``down_proj``,
``[d, d_ff]``); its input at the subject's last token is the *key* ``k`` ``[d_ff]`` (ROME Eq. 1),
and the residual stream after layer ``l`` at that token is what the value target ``z`` sets.
The key second moment ``C = E[k kᵀ]`` ``[d_ff, d_ff]`` over a text corpus is cached on disk per
model fingerprint, layer and the corpus's token digest; a fresh :class:`KeyStats` is built per independent run, so
nothing leaks between runs (EasyEdit issue #613).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

from llm_methods.lm import LM, LMError, collate

__all__ = [
    "CONTEXT_TEMPLATES",
    "capture_keys",
    "chunks_digest",
    "edit_weight",
    "forward_keys",
    "key_second_moments",
    "model_fingerprint",
    "prompt_with_subject",
    "request_keys",
    "stats_dir",
    "subject_basis",
    "subject_subspace",
]

# ROME/MEMIT average keys over short random prefixes; we use three fixed ones (offline).
CONTEXT_TEMPLATES = ("{}", "Here is a fact. {}", "I read this today: {}")


def edit_weight(lm: LM, layer: int) -> nn.Linear:
    """The FFN output projection of decoder layer ``layer`` (Llama/Qwen/Mistral ``down_proj``)."""
    mlp = lm.sublayer(layer, "ffn")
    proj = getattr(mlp, "down_proj", None)
    if not isinstance(proj, nn.Linear):
        raise LMError(
            f"layer {layer}: FFN {type(mlp).__name__} has no down_proj Linear; knowledge editing "
            "supports Llama-style MLPs (Llama, Qwen2, Mistral, SmolLM2, the zoo)"
        )
    return proj


def prompt_with_subject(lm: LM, template: str, subject: str) -> tuple[list[int], int]:
    """Token ids (BOS first when the tokenizer has one) of ``template.format(subject)`` and the
    index of the subject's last token (ROME's ``subject_last``)."""
    if template.count("{}") != 1:
        raise LMError(f"prompt {template!r} must contain exactly one '{{}}' for the subject")
    if not subject:
        raise LMError("subject is empty")
    tok = lm.tokenizer
    bos = [tok.bos_token_id] if tok.bos_token_id is not None else []
    head, tail = template.split("{}")
    prefix = bos + list(tok(head.rstrip(" "), add_special_tokens=False).input_ids)
    with_subject = bos + list(tok(head + subject, add_special_tokens=False).input_ids)
    ids = bos + list(tok(head + subject + tail, add_special_tokens=False).input_ids)
    if len(with_subject) <= len(prefix) or ids[: len(with_subject)] != with_subject:
        raise LMError(
            f"subject {subject!r} is not a token span of prompt {template.format(subject)!r}"
        )
    return ids, len(with_subject) - 1


class _KeysCaptured(Exception):
    """Raised by :func:`capture_keys` (``stop=True``) once the last layer's keys are recorded."""


@contextmanager
def capture_keys(
    lm: LM, layers: Sequence[int], stop: bool = False
) -> Iterator[dict[int, torch.Tensor]]:
    """Record the input of each layer's ``down_proj`` (``{layer: [B, T, d_ff]}``) in forwards.
    ``stop``: end each forward once the deepest of ``layers`` is recorded (the keys depend on
    nothing after it; :func:`forward_keys` runs such a forward)."""
    store: dict[int, torch.Tensor] = {}
    handles = []
    last = max(lm.layer_index(i) for i in layers)
    for layer in layers:

        def hook(module: nn.Module, args: Any, _layer: int = layer) -> None:
            store[_layer] = args[0].detach()
            if stop and lm.layer_index(_layer) == last:
                raise _KeysCaptured

        handles.append(edit_weight(lm, layer).register_forward_pre_hook(hook))
    try:
        yield store
    finally:
        for h in handles:
            h.remove()


@torch.no_grad()
def forward_keys(lm: LM, layers: Sequence[int], batch: Any) -> dict[int, torch.Tensor]:
    """The keys ``{layer: [B, T, d_ff]}`` of a collated ``batch``, from a forward that stops
    after the deepest of ``layers`` (SmolLM2's edit layers 3-6 of 30: a quarter of the cost)."""
    with capture_keys(lm, layers, stop=True) as store:
        try:
            lm.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
        except _KeysCaptured:
            pass
    return store


@torch.no_grad()
def request_keys(
    lm: LM,
    layers: Sequence[int],
    prompts: Sequence[str],
    subjects: Sequence[str],
    templates: Sequence[str] = CONTEXT_TEMPLATES,
    grouped: bool = False,
) -> dict[int, torch.Tensor]:
    """Keys at each subject's last token, averaged over context templates: ``{layer: [n, d_ff]}``
    on the CPU (the closed-form edits solve on the CPU in float64, like the statistics C).

    ``grouped``: MEMIT's / AlphaEdit's ``compute_ks`` average, whose templates come in two groups
    (``[["{}"], [the prefixed ones]]``) and which averages the group means: the first template
    weighs 1/2 and the others share 1/2. Otherwise (ROME's ``compute_u``) a plain mean."""
    rows, idx = [], []
    for prompt, subject in zip(prompts, subjects, strict=True):
        for t in templates:
            ids, i = prompt_with_subject(lm, t.format(prompt), subject)
            rows.append(ids)
            idx.append(i)
    batch = collate(rows, lm.tokenizer.pad_token_id, lm.device)
    store = forward_keys(lm, layers, batch)
    pick = torch.arange(len(rows))
    out = {}
    for layer in layers:
        k = store[layer][pick, torch.as_tensor(idx)].float()
        k = k.view(len(prompts), len(templates), -1)
        if grouped and len(templates) > 1:
            out[layer] = (0.5 * k[:, 0] + 0.5 * k[:, 1:].mean(1)).cpu()
        else:
            out[layer] = k.mean(1).cpu()
    return out


def model_fingerprint(lm: LM, upto_layer: int) -> str:
    """A hash of the embeddings and layers ``0..upto_layer`` (keys there depend on nothing else)."""
    h = hashlib.sha256(lm.name.encode())
    params = [p for p in lm.model.get_input_embeddings().parameters()]
    for i in range(upto_layer + 1):
        params.extend(lm.layers[i].parameters())
    for p in params:
        t = p.detach().double()
        h.update(f"{tuple(p.shape)}:{float(t.sum()):.10e}:{float((t * t).sum()):.10e}".encode())
    return h.hexdigest()[:16]


def chunks_digest(chunks: Sequence[Sequence[int]]) -> str:
    """A hash of the token ids of ``chunks`` (their order and boundaries included)."""
    h = hashlib.sha256()
    for chunk in chunks:
        h.update((",".join(str(int(t)) for t in chunk) + "|").encode())
    return h.hexdigest()[:16]


def stats_dir() -> Path:
    from iclr26_common.smollm2 import cache_root

    return cache_root() / "suit-stats"


@torch.no_grad()
def _moments(
    lm: LM, layers: Sequence[int], chunks: Sequence[Sequence[int]], batch_size: int
) -> dict[int, torch.Tensor]:
    total = {
        i: torch.zeros(
            edit_weight(lm, i).in_features, edit_weight(lm, i).in_features, dtype=torch.float64
        )
        for i in layers
    }
    count = 0
    for s in range(0, len(chunks), batch_size):
        batch = collate(chunks[s : s + batch_size], lm.tokenizer.pad_token_id, lm.device)
        store = forward_keys(lm, layers, batch)
        mask = batch.attention_mask.bool()
        for i in layers:
            k = store[i][mask].double().cpu()
            total[i] += k.T @ k
        count += int(mask.sum())
    return {i: (t / max(count, 1)).float() for i, t in total.items()}


def key_second_moments(
    lm: LM,
    layers: Sequence[int],
    chunks: Sequence[Sequence[int]],
    corpus_tag: str,
    cache_dir: Path | None = None,
    batch_size: int = 16,
) -> dict[int, torch.Tensor]:
    """``C = E[k kᵀ]`` ``[d_ff, d_ff]`` of each layer's keys over all tokens of ``chunks`` (one
    pass for all layers), cached in ``cache_dir`` (default :func:`stats_dir`) under the model
    fingerprint, layer and the digest of ``chunks`` (:func:`chunks_digest`); ``corpus_tag`` is
    only a readable label in the file name (two corpora under one tag never share a file)."""
    root = Path(cache_dir) if cache_dir is not None else stats_dir()
    digest = chunks_digest(chunks)
    paths = {i: root / f"{model_fingerprint(lm, i)}-L{i}-{corpus_tag}-{digest}.pt" for i in layers}
    out = {i: torch.load(p, weights_only=True) for i, p in paths.items() if p.is_file()}
    missing = [i for i in layers if i not in out]
    if missing:
        fresh = _moments(lm, missing, chunks, batch_size)
        root.mkdir(parents=True, exist_ok=True)
        for i, c in fresh.items():
            tmp = paths[i].with_suffix(".tmp")
            torch.save(c, tmp)
            tmp.replace(paths[i])
        out.update(fresh)
    return out


def subject_subspace(keys: torch.Tensor, tau: float) -> torch.Tensor:
    """SUIT's shared subject subspace ``U_m`` ``[d_ff, m]``: left singular vectors of the subject
    keys ``[n, d_ff]`` (uncentred), ``m`` the smallest count whose energy Σσ²ᵢ/Σσ² reaches ``tau``."""
    if not 0.0 < tau < 1.0:
        raise ValueError(f"tau must be in (0, 1), got {tau}")
    _, s, vh = torch.linalg.svd(keys.double(), full_matrices=False)
    energy = torch.cumsum(s**2, 0) / (s**2).sum()
    m = int(torch.searchsorted(energy, torch.tensor(tau, dtype=energy.dtype)).item()) + 1
    return vh[:m].T.float()


def subject_basis(
    lm: LM, layers: Sequence[int], subjects: Sequence[str], prompts: Sequence[str], tau: float
) -> dict[int, torch.Tensor]:
    """SUIT's ``U_m`` ``[d_ff, m]`` per layer from the keys of every subject in every prompt
    (``len(subjects) * len(prompts)`` keys, no context templates)."""
    if not subjects or not prompts:
        raise LMError("subject_basis needs at least one subject and one prompt")
    keys = [
        request_keys(lm, layers, [p] * len(subjects), list(subjects), templates=("{}",))
        for p in prompts
    ]
    return {i: subject_subspace(torch.cat([k[i] for k in keys]), tau) for i in layers}
