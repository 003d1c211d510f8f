"""Stored outputs of LTPO on a seeded tiny Llama (issue 29): a refactor that changes a number
fails here.

Fixture ``data/stored_outputs/ltpo_tiny.npz``, made from the code before the issue-29 refactor:
``tiny_lm`` (the zoo's ``tiny_llama``, seed 0, 2 layers x 32, a BPE of 280 tokens trained on
:data:`TEXTS`), two questions, K = 3 thoughts; the zeroth-order batch update (the experiment's
path, ``embedding_units`` on and off), the Adam path, and greedy decoding with and without the
optimised thoughts. Regenerate (only when a change of numbers is intended and explained) with
``ICLR26_WRITE_STORED_OUTPUTS=1 .venv/bin/python -m pytest -q
packages/llm-methods/tests/test_ltpo_stored_outputs.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
import torch

from iclr26_common.testing import assert_mutation_detected, assert_portable_close

FIXTURE = Path(__file__).parent / "data" / "stored_outputs" / "ltpo_tiny.npz"
TEXTS = ["Tom has 3 apples and buys 4 more. " * 4, "How many now? 7. " * 8] * 3
QUESTIONS = ("Tom has 3 apples and buys 4 more. How many now?", "How many now?")
K, STEPS, NEW_TOKENS = 3, 4, 6
WEIGHT_GAIN = 8.0
#: Relative tolerance (``max |ours - stored| / max |stored|`` per array, iclr26_common.testing) of
#: the float arrays (thoughts, reward traces), at ~10x the largest difference measured on AMD EPYC
#: (2026-12-06) over ATEN_CPU_CAPABILITY=default (MKL_CBWR=COMPATIBLE; also with
#: ONEDNN_MAX_CPU_ISA=SSE41, oneDNN's oldest kernels), avx2, avx512 and unset: 4.5e-7 for the
#: zeroth-order thoughts and every reward trace (default; 1.2e-7 with avx2/avx512), 1.8e-6 for the
#: Adam thoughts (default; 6.6e-7 with avx2/avx512: Adam's normalised steps lr g / (|g| + eps)
#: magnify float32 rounding where g is small). The seeded weights and the eps draws (torch.randn)
#: differ in the last bits between the default and the AVX2/AVX-512 kernels; that is in these
#: numbers. The mutation (top k - 1) moves the arrays by >= 8.2e-4 (zo_units_thoughts).
TOL = 4.5e-6
TOLS = {"adam_thoughts": 1.8e-5}


def _lm() -> Any:
    from llm_methods.zoo.models import tiny_lm

    lm = tiny_lm(TEXTS, vocab_size=280, n_layers=2, hidden=32, heads=2, max_len=1024)
    with torch.no_grad():  # 2-D weights x WEIGHT_GAIN: peaked outputs, so greedy is not constant
        for p in lm.model.parameters():
            if p.dim() == 2:
                p.mul_(WEIGHT_GAIN)
    return lm


def _padded(rows: list[list[int]]) -> np.ndarray:
    return np.array([r + [-1] * (NEW_TOKENS - len(r)) for r in rows])


def compute(mutate: bool = False) -> dict[str, np.ndarray]:
    """Every stored array, computed by the current code (float64 copies of float32 results).
    ``mutate``: the test's mutation, the confidence reward over the top k - 1 tokens instead of
    the top k (an off-by-one in the reward's formula)."""
    from llm_methods.ltpo import scorer as ltpo_scorer

    reward = ltpo_scorer.confidence_reward

    def off_by_one(logits: torch.Tensor, top_k: int = 10) -> torch.Tensor:
        return reward(logits, top_k - 1)

    patch = mock.patch.object(ltpo_scorer, "confidence_reward", off_by_one)
    with patch if mutate else contextlib.nullcontext():
        return _compute()


def _compute() -> dict[str, np.ndarray]:
    from llm_methods.ltpo.optimize import (
        BatchThoughtScorer,
        LTPOConfig,
        decode_rows,
        ltpo_optimize,
        ltpo_optimize_batch,
        thought_prompt,
    )

    lm = _lm()
    prompts = [thought_prompt(lm, q, K) for q in QUESTIONS]
    prefixes, suffix = [p.prefix for p in prompts], prompts[0].suffix
    out: dict[str, np.ndarray] = {
        "prefix0": np.array(prefixes[0]),
        "prefix1": np.array(prefixes[1]),
        "suffix": np.array(suffix),
    }
    for name, units, sigma, lr in (("zo", False, 0.5, 0.02), ("zo_units", True, 4.0, 0.04)):
        cfg = LTPOConfig(n_thoughts=K, sigma=sigma, lr=lr, steps=STEPS, embedding_units=units)
        scorer = BatchThoughtScorer(lm, prefixes, cfg.top_k, suffix)
        hs, traces = ltpo_optimize_batch(lm, prefixes, cfg, [3, 7], scorer=scorer)
        out[f"{name}_thoughts"] = torch.stack(hs).double().numpy()
        out[f"{name}_traces"] = np.array(traces)
        out[f"{name}_greedy"] = _padded(scorer.greedy(torch.stack(hs), NEW_TOKENS))
        texts = decode_rows(scorer, torch.stack(hs), NEW_TOKENS)
        out[f"{name}_text_chars"] = np.array([len(t) for t in texts])
    out["no_thought_greedy"] = _padded(scorer.greedy(None, NEW_TOKENS))
    adam = LTPOConfig(n_thoughts=K, lr=0.01, steps=STEPS, optimizer="adam")
    h, trace = ltpo_optimize(lm, prefixes[0], adam, suffix=suffix)
    out["adam_thoughts"] = h.double().numpy()
    out["adam_trace"] = np.array(trace)
    return out


def test_ltpo_matches_the_stored_outputs() -> None:
    torch.set_num_threads(1)
    got = compute()
    if os.environ.get("ICLR26_WRITE_STORED_OUTPUTS") == "1":
        meta = {
            "made_by": "tests/test_ltpo_stored_outputs.py::compute",
            "model": "tiny_lm(TEXTS, vocab_size=280, n_layers=2, hidden=32, heads=2, seed=0), "
            f"2-D weights x {WEIGHT_GAIN}",
            "questions": list(QUESTIONS),
            "K": K,
            "steps": STEPS,
            "seeds": [3, 7],
            "regenerate": "ICLR26_WRITE_STORED_OUTPUTS=1 .venv/bin/python -m pytest -q "
            "packages/llm-methods/tests/test_ltpo_stored_outputs.py",
        }
        np.savez_compressed(FIXTURE, meta=np.array(json.dumps(meta)), **got)
    stored = np.load(FIXTURE)
    assert set(got) == set(stored.files) - {"meta"}
    for key in ("prefix0", "prefix1", "suffix"):  # the prompt first: a tokenizer change shows here
        np.testing.assert_array_equal(got[key], stored[key], err_msg=key)
    floats = sorted(k for k, v in got.items() if v.dtype.kind == "f")
    for key, value in got.items():
        if key in floats:
            assert_portable_close(value, stored[key], tol=TOLS.get(key, TOL), what=key)
        else:
            np.testing.assert_array_equal(value, stored[key], err_msg=key)
    # the reward's top-k off by one moves every float array >= 10x the tolerance
    mutated = compute(mutate=True)
    for key in floats:
        tol = TOLS.get(key, TOL)
        assert_mutation_detected(mutated[key], stored[key], tol=tol, what=f"{key}, top k - 1")


@pytest.mark.parametrize("key", ["zo_traces", "zo_units_traces", "adam_trace"])
def test_the_stored_rewards_move(key: str) -> None:
    """The fixture is not degenerate: each optimiser's reward trace changes over the steps."""
    trace = np.load(FIXTURE)[key]
    assert np.ptp(trace, axis=-1).min() > 1e-6
