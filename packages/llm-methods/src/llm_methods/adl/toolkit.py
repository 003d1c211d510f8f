"""Write ADL results in diffing-toolkit's layout, so its dashboard and agent read them.

Layout (diffing-toolkit ``activation_difference_lens``; ``docs/ADL_PIPELINE.md`` there)::

    RESULTS/layer_{L}/{dataset}/mean_pos_{j}.pt        δ̄_j  [d] (float32)
    RESULTS/layer_{L}/{dataset}/mean_pos_{j}.meta      {"count", "activation_dim", "position",
                                                         "token_id": null}
    RESULTS/layer_{L}/{dataset}/base_mean_pos_{j}.pt   mean base activation [d]
    RESULTS/layer_{L}/{dataset}/ft_mean_pos_{j}.pt     mean finetuned activation [d]
    RESULTS/layer_{L}/{dataset}/{,base_,ft_}logit_lens_pos_{j}.pt
        (top-k probs, top-k ids, top-k probs of the negated vector, their ids): softmax of
        unembed(final_norm(±v)) through the finetuned model, k = 100 by default
    RESULTS/model_norms_{dataset}.pt   {"base_model_norms": {L: norm}, "ft_model_norms": {...},
                                        "skip_tokens", "num_sequences"}

``dataset`` is the last path component of the dataset id, as there. Files are written with
``torch.save`` (tensors and plain containers: ``torch.load(..., weights_only=True)`` reads
them). An existing results folder is never overwritten unless ``overwrite=True``. The norms
file keeps every layer written, as the toolkit's does: a run at another layer merges its
``{L: norm}`` into an existing file (read with ``weights_only=True``); a file from another
setting (``skip_tokens`` or ``num_sequences`` differ), one that already holds layer L, or one
that is not a norms file is refused unless ``overwrite=True`` (then it is replaced by this run's
layer alone when the setting differs).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from llm_methods.adl.diff import ADLDifference
from llm_methods.lm import LM, LMError

__all__ = ["LOGIT_LENS_K", "lens_probabilities", "write_toolkit_results"]

LOGIT_LENS_K = 100


@torch.no_grad()
def lens_probabilities(lm: LM, vec: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(softmax(unembed(norm(v))), softmax(unembed(−norm(v)))) ``[V]`` each, float32: the
    toolkit's ``logit_lens`` (the negation is applied after the final norm)."""
    normed = lm.final_norm(vec.reshape(1, -1).to(device=lm.device, dtype=lm.dtype))
    probs = lm.unembed(normed).float().softmax(-1)[0]
    inv = lm.unembed(-normed).float().softmax(-1)[0]
    return probs.cpu(), inv.cpu()


def _topk(lm: LM, vec: torch.Tensor, k: int) -> tuple[torch.Tensor, ...]:
    probs, inv = lens_probabilities(lm, vec)
    k = min(k, probs.numel())
    top, inv_top = torch.topk(probs, k), torch.topk(inv, k)
    return top.values, top.indices, inv_top.values, inv_top.indices


def check_toolkit_target(
    results_dir: str | Path, dataset_id: str, layer: int, *, overwrite: bool = False
) -> Path:
    """The ``layer_{layer}/{dataset}`` folder :func:`write_toolkit_results` would write, refused
    (:class:`LMError`) when it already holds results and ``overwrite`` is not given, or when the
    dataset id has no name; call it before the work (``adl diff`` does, once the layer is
    known)."""
    name = dataset_id.rstrip("/").split("/")[-1]
    if not name:
        raise LMError(f"dataset id {dataset_id!r} has no name")
    out = Path(results_dir) / f"layer_{layer}" / name
    if out.exists() and any(out.iterdir()) and not overwrite:
        hint = "pass --overwrite (overwrite=True) to replace them"
        raise LMError(f"--toolkit-dir {out}: already holds results; {hint}")
    return out


def write_toolkit_results(
    results_dir: str | Path,
    dataset_id: str,
    diff: ADLDifference,
    ft: LM,
    k: int = LOGIT_LENS_K,
    overwrite: bool = False,
) -> Path:
    """Write ``diff`` (and its logit lens through ``ft``) under ``results_dir``; returns the
    ``layer_{L}/{dataset}`` folder."""
    out = check_toolkit_target(results_dir, dataset_id, diff.layer, overwrite=overwrite)
    name = out.name
    root = Path(results_dir)
    norms_path = root / f"model_norms_{name}.pt"
    norms = _merged_norms(norms_path, diff, overwrite)  # checked before anything is written
    out.mkdir(parents=True, exist_ok=True)
    for j in range(diff.delta.shape[0]):
        torch.save(diff.delta[j].float().clone(), out / f"mean_pos_{j}.pt")
        meta = {
            "count": diff.n_texts,
            "activation_dim": int(diff.delta.shape[1]),
            "position": j,
            "token_id": None,
        }
        (out / f"mean_pos_{j}.meta").write_text(json.dumps(meta, indent=2))
        torch.save(diff.mean_base[j].float().clone(), out / f"base_mean_pos_{j}.pt")
        torch.save(diff.mean_ft[j].float().clone(), out / f"ft_mean_pos_{j}.pt")
        for prefix, vec in (
            ("", diff.delta[j]),
            ("base_", diff.mean_base[j]),
            ("ft_", diff.mean_ft[j]),
        ):
            torch.save(_topk(ft, vec, k), out / f"{prefix}logit_lens_pos_{j}.pt")
    torch.save(norms, norms_path)
    return out


def _merged_norms(path: Path, diff: ADLDifference, overwrite: bool) -> dict:
    """The norms file's content after adding ``diff.layer``: the existing file's layers plus
    this one (see the module docstring for what is refused)."""
    fresh = {
        "base_model_norms": {diff.layer: torch.tensor(diff.norm_base)},
        "ft_model_norms": {diff.layer: torch.tensor(diff.norm_ft)},
        "skip_tokens": diff.norm_skip,
        "num_sequences": diff.n_texts,
    }
    if not path.exists():
        return fresh
    hint = "pass overwrite=True to replace it"
    try:
        old = torch.load(path, weights_only=True)
    except Exception as error:  # any unreadable file is refused the same way
        if overwrite:
            return fresh
        raise LMError(f"{path}: not a readable norms file ({error}); {hint}") from error
    keys = ("base_model_norms", "ft_model_norms", "skip_tokens", "num_sequences")
    if (
        not isinstance(old, dict)
        or any(k not in old for k in keys)
        or not all(isinstance(old[k], dict) for k in keys[:2])
    ):
        if overwrite:
            return fresh
        raise LMError(f"{path}: not a model_norms file (needs {', '.join(keys)}); {hint}")
    same = (old["skip_tokens"], old["num_sequences"]) == (diff.norm_skip, diff.n_texts)
    if not same:
        if overwrite:
            return fresh
        raise LMError(
            f"{path}: skip_tokens/num_sequences {old['skip_tokens']}/"
            f"{old['num_sequences']} differ from this run's {diff.norm_skip}/"
            f"{diff.n_texts}; {hint}"
        )
    if diff.layer in old["ft_model_norms"] and not overwrite:
        raise LMError(f"{path}: already holds layer {diff.layer}; {hint}")
    for key in keys[:2]:
        old[key] = {**old[key], diff.layer: fresh[key][diff.layer]}
    return old
