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

import itertools
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

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


def _logs(info: dict[str, Any]) -> np.ndarray:
    return np.array([float(info.get(k, np.nan)) for k in LOG_KEYS])


def _grad_norms(grads: list[torch.Tensor]) -> np.ndarray:
    return np.array([float(g.double().norm()) for g in grads])


def _param_norms(model: torch.nn.Module) -> np.ndarray:
    return np.array([float(p.detach().double().norm()) for p in model.parameters()])


def compute() -> dict[str, np.ndarray]:
    """Every stored array, computed by the current code (float64 copies of float32 results)."""
    from llm_methods.antibody import model as M
    from llm_methods.antibody.data import poisoned_mixture, synthetic_world
    from llm_methods.antibody.pipeline import (
        StageSettings,
        align,
        encode,
        evaluate,
        finetune,
        pretrain_base,
    )
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


def test_antibody_matches_the_stored_outputs() -> None:
    torch.set_num_threads(1)
    got = compute()
    if os.environ.get("ICLR26_WRITE_STORED_OUTPUTS") == "1":
        np.savez_compressed(FIXTURE, meta=np.array(json.dumps(META)), **got)
    stored = np.load(FIXTURE)
    assert set(got) == set(stored.files) - {"meta"}
    for key, value in got.items():
        if value.dtype.kind in "iuU":
            np.testing.assert_array_equal(value, stored[key], err_msg=key)
        else:
            torch.testing.assert_close(
                torch.from_numpy(value),
                torch.from_numpy(stored[key]),
                rtol=1e-5,
                atol=1e-6,
                equal_nan=True,
                msg=key,
            )


def test_the_stored_directions_differ_by_recipe() -> None:
    """The fixture is not degenerate: the recipes' directions and λ_t rules differ."""
    stored = np.load(FIXTURE)
    norms = [stored[f"{k}_grad_norms"] for k in ("antibody_code", "antibody_paper", "sft")]
    assert min(np.abs(a - b).max() for a, b in itertools.pairwise(norms)) > 1e-4
    assert np.ptp(stored["weighted_ft_weights"]) > 1e-3


def test_the_lisa_records_reach_both_states_and_the_proximal_term() -> None:
    """The Lisa records exercise what they guard: 12 steps with the default share switch once
    (1 alignment step, then finetuning); the 0.25 share spends 3 steps aligning, so the
    alignment state's proximal term (step 2 > 10 % of 12) is reached too."""
    stored = np.load(FIXTURE)
    np.testing.assert_array_equal(stored["lisa_states"], [1.0] + [0.0] * 11)
    np.testing.assert_array_equal(stored["lisa_share25_states"], [1.0] * 3 + [0.0] * 9)
    assert np.abs(stored["lisa_losses"] - stored["lisa_share25_losses"]).max() > 1e-3
