"""Antibody's weighted finetuning step equals the official ``WeightedSFTTrainer.training_step``.

Reference numbers: ``tests/data/reference/antibody_weighted_official.npz``, produced once by the
official trainer (minhquoc0712/Antibody@1d4fa5f, ``trainers/weighted_sft.py``) inside a
transformers ``Trainer`` on CPU: one ``training_step`` at τ = 1 (the official default) and one at
τ = 0.5, each from the same parameters, recording the per-row scores d = refusal avg CE −
compliance avg CE, the weights softmax(d / τ), the weighted loss and the update direction it
leaves in ``param.grad``. The inputs are those of ``test_reference_antibody.py``
(``antibody_inputs.npz``: the tiny Llama, 4 harmful rows with their refusal view on the same
prompts, 4 benign rows); the 8-row batch is built by :func:`weighted_batch` (the driver builds
the same one). Repository, commit, environment and the driver: ``antibody_weighted_official.
source.json``. Issue 41: the finetuning stage had no official numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from iclr26_common.testing import assert_mutation_detected, assert_portable_close
from llm_methods.antibody import model as M

REF = Path(__file__).parent / "data" / "reference"
#: Relative tolerances (``max |ours − official| / max |official|``, iclr26_common.testing) at ~10x
#: the largest difference measured (2026-12-07, AMD EPYC) over ATEN_CPU_CAPABILITY=default
#: (MKL_CBWR=COMPATIBLE), avx2, avx512 and unset, both τ: d 1.4e-6, the weights 6.6e-7, the loss
#: 1.1e-7, the update direction (all tensors together, entries up to 0.20) 8.6e-7. The mutations
#: move the weights by >= 0.21 (prompt tokens scored) and 0.38 (τ ignored).
TOLS = {"d": 1.4e-5, "weights": 7e-6, "loss": 1.2e-6, "direction": 9e-6}
TAUS = (1.0, 0.5)


def weighted_batch(arrays: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """The official layout's 8-row batch as (compliance view, refusal view), each ``input_ids``,
    ``labels`` (-100 outside the response), ``attention_mask``: rows 0-3 the harmful rows with
    their refusal view (``refusal/``: the same prompts, other responses), rows 4-7 the benign
    ``safe0`` rows, whose refusal view is their own 4-token prompt followed by the refusal
    rows' responses."""

    def view(name: str) -> dict[str, torch.Tensor]:
        keys = ("input_ids", "labels", "attention_mask")
        return {k: torch.from_numpy(arrays[f"{name}/{k}"]).clone() for k in keys}

    harm, ref, safe = view("harmful"), view("refusal"), view("safe0")
    safe_ref = {k: v.clone() for k, v in ref.items()}
    safe_ref["input_ids"][:, :4] = safe["input_ids"][:, :4]
    compliance = {k: torch.cat([harm[k], safe[k]]) for k in harm}
    refusal = {k: torch.cat([ref[k], safe_ref[k]]) for k in ref}
    return compliance, refusal


def _ours(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Our batch layout (``ids``, ``attn``, ``loss_mask``) from the ``labels`` view."""
    mask = (batch["labels"] != -100).long()
    return {"ids": batch["input_ids"], "attn": batch["attention_mask"], "loss_mask": mask}


@pytest.fixture(scope="module")
def ref(antibody_reference) -> dict:  # type: ignore[no-untyped-def]
    info = antibody_reference.load("antibody_weighted_official.npz")
    info["new_model"] = lambda: antibody_reference.model(info).train()
    return info


def test_the_batch_is_the_one_the_official_step_ran_on(ref: dict) -> None:
    compliance, refusal = weighted_batch(ref["arrays"])
    want = ref["official"]
    for prefix, view in (("", compliance), ("refusal_", refusal)):
        for k, v in view.items():
            assert np.array_equal(v.numpy(), want[f"batch/{prefix}{k}"]), prefix + k


@pytest.mark.parametrize("tau", TAUS)
def test_weighted_step_equals_official(ref: dict, tau: float) -> None:
    """d, the weights, the weighted loss and the update direction of
    :func:`M.weighted_finetune_grads` equal the official step's; scoring the whole sequence
    (prompt tokens too) instead of the response, or ignoring τ, moves them >= 10x the
    tolerance."""
    model = ref["new_model"]()
    want = ref["official"]
    key = f"tau{tau:g}"
    compliance, refusal = weighted_batch(ref["arrays"])
    batch, refusal_batch = _ours(compliance), _ours(refusal)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = [p for p in model.parameters() if p.requires_grad]
    grads, info = M.weighted_finetune_grads(model, params, batch, refusal_batch, tau=tau)
    got = torch.cat([g.reshape(-1) for g in grads])
    expected = torch.cat([torch.from_numpy(want[f"{key}/grad/{n}"]).reshape(-1) for n in names])
    weights = np.asarray(want[f"{key}/weights"])
    assert float(expected.abs().max()) > 1e-2  # a non-trivial direction
    assert weights.max() > 1.5 * weights.min()  # rows weighted unequally: the weighting acts
    assert_portable_close(np.asarray(info["d"]), want[f"{key}/d"], tol=TOLS["d"], what="d")
    assert_portable_close(np.asarray(info["weights"]), weights, tol=TOLS["weights"], what="w")
    assert_portable_close(info["loss"], want[f"{key}/loss"], tol=TOLS["loss"], what="loss")
    assert_portable_close(got, expected, tol=TOLS["direction"], what="direction")
    # mutation: the scores read over the whole sequence, prompt tokens included
    whole = {**batch, "loss_mask": batch["attn"]}
    whole_refusal = {**refusal_batch, "loss_mask": refusal_batch["attn"]}
    _, mutated = M.weighted_finetune_grads(model, params, whole, whole_refusal, tau=tau)
    assert_mutation_detected(
        np.asarray(mutated["weights"]), weights, tol=TOLS["weights"], what="prompt tokens scored"
    )
    # mutation: τ ignored (the other τ's weights)
    other = TAUS[1] if tau == TAUS[0] else TAUS[0]
    _, mutated = M.weighted_finetune_grads(model, params, batch, refusal_batch, tau=other)
    assert_mutation_detected(
        np.asarray(mutated["weights"]), weights, tol=TOLS["weights"], what="τ ignored"
    )


def test_sidecar_names_the_official_run() -> None:
    source = json.loads((REF / "antibody_weighted_official.source.json").read_text())
    assert source["official_repo"] == "minhquoc0712/Antibody"
    assert len(source["commit"]) == 40
    assert "weighted_sft.py" in source["function"]
