"""ADL equals diffing-toolkit: layer choice, mean activation difference, logit lens.

Reference numbers: ``tests/data/reference/adl_toolkit.*``, produced once by running the
toolkit's ``get_layer_indices``, ``extract_first_n_tokens_activations`` and ``logit_lens`` on a
tiny 5-layer base/finetuned Llama pair (repository, commit and command in the ``.source.json``
sidecar). Five layers is the case our old ``round(0.5 L) - 1`` got wrong (1 instead of 2).

Tolerances (measured 2026-12-04, torch 2.13.0+cpu, float32): max |δ̄ − toolkit| 6.0e-7 (entries
up to 3.0); the mean base and finetuned activations agree exactly (entries up to 5.3); the
logit-lens top-10 ids agree and their probabilities (0.010 and above) differ by at most
6.0e-8, i.e. a relative 7.6e-7. Bounds at ~10×: atol 6e-6 (rtol 0) for δ̄ and both means (the
means share δ̄'s bound: same reduction, exact here), rel 8e-6 for the probabilities. float32
reduction order is the only expected source of difference."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

REF = Path(__file__).parent / "data" / "reference"


@pytest.fixture(scope="module")
def pair():  # type: ignore[no-untyped-def]
    from transformers import LlamaConfig, LlamaForCausalLM

    from llm_methods.lm import wrap

    data = json.loads((REF / "adl_toolkit.json").read_text())
    weights = np.load(REF / "adl_toolkit_weights.npz")
    tok = SimpleNamespace(pad_token_id=0, get_vocab=dict)
    lms = []
    for tag in ("base", "ft"):
        with torch.random.fork_rng(devices=[]):
            model = LlamaForCausalLM(LlamaConfig(**data["config"])).eval()
        state = {
            k.split("/", 1)[1]: torch.from_numpy(weights[k])
            for k in weights.files
            if k.startswith(f"{tag}/")
        }
        model.load_state_dict(state)
        lms.append(wrap(tok, model, tag))
    return lms[0], lms[1], data


def test_mean_difference_and_logit_lens_equal_the_toolkit(pair: Any) -> None:
    from llm_methods.adl.diff import activation_difference_ids, relative_layer
    from llm_methods.adl.toolkit import lens_probabilities

    base, ft, data = pair
    assert relative_layer(ft, 0.5) == data["layer"] == 2
    diff = activation_difference_ids(base, ft, data["seqs"])
    assert diff.layer == data["layer"]
    for got, key in (
        (diff.delta, "mean_diff"),
        (diff.mean_base, "base_mean"),
        (diff.mean_ft, "ft_mean"),
    ):
        torch.testing.assert_close(got, torch.tensor(data[key]), rtol=0, atol=6e-6)
    for j, want in enumerate(data["lens"]):
        probs, inv = lens_probabilities(ft, diff.delta[j])
        top, inv_top = torch.topk(probs, 10), torch.topk(inv, 10)
        assert top.indices.tolist() == want["ids"] and inv_top.indices.tolist() == want["inv_ids"]
        assert top.values.tolist() == pytest.approx(want["probs"], rel=8e-6, abs=0)
        assert inv_top.values.tolist() == pytest.approx(want["inv_probs"], rel=8e-6, abs=0)
    side = json.loads((REF / "adl_toolkit.source.json").read_text())
    assert side["official_repo"] == "science-of-finetuning/diffing-toolkit"
