"""Stored outputs of Antibody on seeded tiny Llamas (issue 29): a refactor that changes a number
fails here.

Fixture ``data/stored_outputs/antibody_tiny.npz``, made from the code before the issue-29
refactor: the synthetic world (seed 0), a BPE of 640 tokens and the zoo's ``tiny_llama`` (1 x 32,
seed 0) on seeded batches of 4: one alignment direction of each recipe (Antibody with both λ_t
rules, Booster, Vaccine, SFT) and the weighted finetuning weights; then the pipeline the
experiment runs (``pretrain_base`` 3 steps, ``align`` 3 steps of each method, ``finetune`` 2
steps of SFT / Antibody / Lisa, ``evaluate`` on 4 + 4 held-out prompts).

Added after the refactor (issue-29 review, recorded at commit 31fa7d6 with the refactored code,
see :data:`META`): the 2-step ``finetune_lisa`` record never reaches Lisa's proximal term with
θ ≠ θ_other, so it did not guard ``lisa_rho`` / ``lisa_align_share``; the ``lisa_*`` records
(12 steps from the SFT-aligned model: per-step loss, state and final parameter norms; once with
the default ``StageSettings``, once with ``lisa_align_share=0.25`` so the alignment state's
proximal term is reached too) do. ``antibody_paper_grad_first`` is the array stored before the
refactor under the misleading name ``antibody_code_grad_first`` (it was the paper rule's);
``antibody_code_grad_first`` now holds the code rule's, recorded at that commit.

Regenerate (only when a change of numbers is intended and explained, and then say so in
:data:`META`) with ``ICLR26_WRITE_STORED_OUTPUTS=1
.venv/bin/python -m pytest -q packages/llm-methods/tests/test_antibody_stored_outputs.py``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
import torch

from iclr26_common.testing import assert_mutation_detected, assert_portable_close

FIXTURE = Path(__file__).parent / "data" / "stored_outputs" / "antibody_tiny.npz"
#: The fixture's ``meta`` entry: what made it, and which parts were recorded when.
META = {
    "made_by": "tests/test_antibody_stored_outputs.py::compute",
    "world": "synthetic_world(0)",
    "model": "train_bpe(world.texts(), 640); tiny_llama(len(tok), 1, 32, 2, seed=0)",
    "batches": "torch.Generator().manual_seed(0), 4 rows each",
    "recorded": "before the issue-29 refactor (code of 0751948), except lisa_* and "
    "antibody_code_grad_first: recorded at 31fa7d6 (after the refactor, issue-29 review) because "
    "the 2-step finetune_lisa record does not depend on lisa_rho / lisa_align_share; "
    "antibody_paper_grad_first is the earlier array renamed (it always held the paper rule's)",
    "regenerate": "ICLR26_WRITE_STORED_OUTPUTS=1 .venv/bin/python -m pytest -q "
    "packages/llm-methods/tests/test_antibody_stored_outputs.py",
}
LOG_KEYS = ("loss", "lambda_t", "lambda_raw", "harmful_loss", "perturbed_loss", "refusal_loss")
#: Arrays of discrete values, compared exactly: token ids, Lisa's state per step, the evaluation's
#: harmful score / finetune accuracy (%) and greedy texts.
EXACT = ("safe_ids", "harm_ids", "lisa_states", "lisa_share25_states", "evaluate_hs_fa")
#: Relative tolerance (``max |ours - stored| / max |stored|`` per array; NaN where a recipe does not
#: log a value must stay NaN) of each kind of float array, at ~10x the largest difference measured
#: on AMD EPYC (2026-12-06) over ATEN_CPU_CAPABILITY=default (MKL_CBWR=COMPATIBLE; also with
#: ONEDNN_MAX_CPU_ISA=SSE41, oneDNN's oldest kernels), avx2, avx512 and unset: norms of gradients
#: and parameters 1.6e-7 (lisa_share25, default); losses, logs and the weighted finetuning's weights
#: 8.0e-7 (lisa_share25 losses, avx2; 2.4e-7 elsewhere); gradient entries 1.7e-6
#: (antibody_paper_grad_first, avx2); the weighted finetuning's d = NLL(refusal) - NLL(target), a
#: difference of two float32 NLLs near 6.4 that is at most 0.03, 1.6e-5 (avx2 and default; 0 with
#: avx512). The seeded weights differ in the last bits between the default and the AVX2/AVX-512
#: kernels of torch's initialisers; that is in these numbers. The mutation (rows off by one) moves
#: each array by >= 1.8e-3.
TOLS = {"norms": 1.7e-6, "losses": 8e-6, "grad_first": 1.8e-5, "weighted_ft_d": 1.7e-4}


def _tol(key: str) -> float:
    if key == "weighted_ft_d" or key.endswith("grad_first"):
        return TOLS["weighted_ft_d" if key == "weighted_ft_d" else "grad_first"]
    return TOLS["norms" if key.endswith("_norms") else "losses"]


def _logs(info: dict[str, Any]) -> np.ndarray:
    return np.array([float(info.get(k, np.nan)) for k in LOG_KEYS])


def _grad_norms(grads: list[torch.Tensor]) -> np.ndarray:
    return np.array([float(g.double().norm()) for g in grads])


def _param_norms(model: torch.nn.Module) -> np.ndarray:
    return np.array([float(p.detach().double().norm()) for p in model.parameters()])


def compute(mutate: bool = False) -> dict[str, np.ndarray]:
    """Every stored array, computed by the current code (float64 copies of float32 results).

    ``mutate``: the test's mutation, an off-by-one row index in every batch drawn (the inputs
    shuffled: ``pipeline._take`` reads row i + 1 for row i)."""
    from llm_methods.antibody import pipeline

    off_by_one = mock.patch.object(pipeline, "_take", _off_by_one(pipeline._take))
    with off_by_one if mutate else contextlib.nullcontext():
        return _compute()


def _off_by_one(take: Any) -> Any:
    """``pipeline._take`` reading row ``i + 1`` (mod the split's size) for row ``i``."""

    def shifted(batch: dict, idx: torch.Tensor) -> dict:
        return take(batch, (idx + 1) % len(next(iter(batch.values()))))

    return shifted


def _compute() -> dict[str, np.ndarray]:
    from llm_methods.antibody import model as M
    from llm_methods.antibody.data import synthetic_world
    from llm_methods.antibody.pipeline import encode
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    world = synthetic_world(0)
    tok = train_bpe(world.texts(), 640)
    model = tiny_llama(len(tok), 1, 32, 2, max_len=96, seed=0)
    for p in model.parameters():
        p.requires_grad_(True)
    gen = torch.Generator().manual_seed(0)
    safe, _ = encode(tok, world.align).sample(gen, 4)
    harm, refusal = encode(tok, world.align_harmful).sample(gen, 4)
    params = list(model.parameters())
    out: dict[str, np.ndarray] = {"safe_ids": safe["ids"].numpy(), "harm_ids": harm["ids"].numpy()}
    for rule in ("code", "paper"):
        cfg = M.AntibodyConfig(lambda_rule=rule)
        grads, info = M.antibody_align_grads(model, params, safe, harm, refusal, cfg)
        out[f"antibody_{rule}_logs"] = _logs(info)
        out[f"antibody_{rule}_grad_norms"] = _grad_norms(grads)
        out[f"antibody_{rule}_grad_first"] = grads[0].double().numpy()[:4, :8]
    for name, (grads, info) in {
        "booster": M.booster_align_grads(model, params, safe, harm),
        "vaccine": M.vaccine_align_grads(model, params, safe),
        "sft": M.sft_grads(model, params, safe),
    }.items():
        out[f"{name}_logs"] = _logs(info)
        out[f"{name}_grad_norms"] = _grad_norms(grads)
    grads, info = M.weighted_finetune_grads(model, params, harm, refusal, tau=0.5)
    out["weighted_ft_weights"] = np.array(info["weights"])
    out["weighted_ft_d"] = np.array(info["d"])
    out["weighted_ft_grad_norms"] = _grad_norms(grads)

    out.update(_pipeline(world))
    return out


def _pipeline(world: Any) -> dict[str, np.ndarray]:
    """The stages the experiment runs, from the seeded world."""
    from llm_methods.antibody.data import poisoned_mixture
    from llm_methods.antibody.pipeline import (
        StageSettings,
        align,
        evaluate,
        finetune,
        pretrain_base,
    )

    out: dict[str, np.ndarray] = {}
    tok, base, plog = pretrain_base(world, steps=3, batch_size=8)
    out["pretrain_losses"] = np.array([x["loss"] for x in plog.logs])
    out["pretrain_param_norms"] = _param_norms(base)
    stage = StageSettings(steps=3, batch_size=4, seed=1)
    aligned = {}
    for method in ("sft", "booster", "vaccine", "antibody"):
        aligned[method], log = align(base, tok, world.align, world.align_harmful, method, stage)
        out[f"align_{method}_losses"] = np.array([x["loss"] for x in log.logs])
        out[f"align_{method}_param_norms"] = _param_norms(aligned[method])
    rows = poisoned_mixture(world.task, world.attack, 24, 0.25, 1)
    ft_stage = StageSettings(steps=2, batch_size=4, lr=3e-4, seed=1)
    for method in ("sft", "antibody", "lisa"):
        tuned, log = finetune(
            aligned["antibody"], tok, rows, method, ft_stage, 1.0, 64, world.align
        )
        out[f"finetune_{method}_losses"] = np.array([x["loss"] for x in log.logs])
        out[f"finetune_{method}_param_norms"] = _param_norms(tuned)
    # Lisa long enough for its proximal term (after 10 % of the steps, θ ≠ θ_other) to matter
    for name, share in (("lisa", None), ("lisa_share25", 0.25)):
        shares = {} if share is None else {"lisa_align_share": share}
        lisa_stage = StageSettings(steps=12, batch_size=4, seed=2, **shares)
        tuned, log = finetune(aligned["sft"], tok, rows, "lisa", lisa_stage, 1.0, 64, world.align)
        out[f"{name}_losses"] = np.array([x["loss"] for x in log.logs])
        out[f"{name}_states"] = np.array([x["lisa_state"] for x in log.logs])
        out[f"{name}_param_norms"] = _param_norms(tuned)
    ev = evaluate(base, tok, world.eval_harmful[:4], world.eval_task[:4], max_new_tokens=4)
    out["evaluate_hs_fa"] = np.array([ev["hs"], ev["fa"]])
    out["evaluate_examples"] = np.array(json.dumps([ev["harmful_example"], ev["task_example"]]))
    return out


def _float_error(got: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The entries a float array is compared on: NaN (a value a recipe does not log) must stay
    NaN; the rest are compared by relative error."""
    finite = ~np.isnan(want)
    return got[finite], want[finite]


@pytest.fixture(scope="module")
def stored() -> dict[str, np.ndarray]:
    return dict(np.load(FIXTURE))


def test_antibody_matches_the_stored_outputs(stored: dict[str, np.ndarray]) -> None:
    torch.set_num_threads(1)
    got = compute()
    if os.environ.get("ICLR26_WRITE_STORED_OUTPUTS") == "1":
        np.savez_compressed(FIXTURE, meta=np.array(json.dumps(META)), **got)
        stored = dict(np.load(FIXTURE))
    assert set(got) == set(stored) - {"meta"}
    floats = sorted(k for k, v in got.items() if v.dtype.kind == "f" and k not in EXACT)
    for key, value in got.items():
        if key not in floats:
            np.testing.assert_array_equal(value, stored[key], err_msg=key)
            continue
        np.testing.assert_array_equal(np.isnan(value), np.isnan(stored[key]), err_msg=key)
        assert_portable_close(*_float_error(value, stored[key]), tol=_tol(key), what=key)
    # the mutation (every batch's rows read one off) moves every float array >= 10x its tol
    mutated = compute(mutate=True)
    for key in floats:
        assert_mutation_detected(
            *_float_error(mutated[key], stored[key]), tol=_tol(key), what=f"{key}, rows off by one"
        )


def test_the_stored_directions_differ_by_recipe(stored: dict[str, np.ndarray]) -> None:
    """The fixture is not degenerate: the recipes' directions and λ_t rules differ."""
    norms = [stored[f"{k}_grad_norms"] for k in ("antibody_code", "antibody_paper", "sft")]
    assert min(np.abs(a - b).max() for a, b in itertools.pairwise(norms)) > 1e-4
    assert np.ptp(stored["weighted_ft_weights"]) > 1e-3


def test_the_lisa_records_reach_both_states_and_the_proximal_term(
    stored: dict[str, np.ndarray],
) -> None:
    """The Lisa records exercise what they guard: 12 steps with the default share switch once
    (1 alignment step, then finetuning); the 0.25 share spends 3 steps aligning, so the
    alignment state's proximal term (step 2 > 10 % of 12) is reached too."""
    np.testing.assert_array_equal(stored["lisa_states"], [1.0] + [0.0] * 11)
    np.testing.assert_array_equal(stored["lisa_share25_states"], [1.0] * 3 + [0.0] * 9)
    assert np.abs(stored["lisa_losses"] - stored["lisa_share25_losses"]).max() > 1e-3
