"""ADL equals diffing-toolkit: layer choice, mean activation difference, logit lens.

Reference numbers: ``tests/data/reference/adl_toolkit.*``, produced once by running the
toolkit's ``get_layer_indices``, ``extract_first_n_tokens_activations`` and ``logit_lens`` on a
tiny 5-layer base/finetuned Llama pair (repository, commit and command in the ``.source.json``
sidecar). Five layers is the case our old ``round(0.5 L) - 1`` got wrong (1 instead of 2)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

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
        state = {k.split("/", 1)[1]: torch.from_numpy(weights[k]) for k in weights.files
                 if k.startswith(f"{tag}/")}  # fmt: skip
        model.load_state_dict(state)
        lms.append(wrap(tok, model, tag))
    return lms[0], lms[1], data


def test_mean_difference_and_logit_lens_equal_the_toolkit(pair) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.adl.diff import activation_difference_ids, relative_layer
    from llm_methods.adl.toolkit import lens_probabilities

    base, ft, data = pair
    assert relative_layer(ft, 0.5) == data["layer"] == 2
    diff = activation_difference_ids(base, ft, data["seqs"])
    assert diff.layer == data["layer"]
    torch.testing.assert_close(diff.delta, torch.tensor(data["mean_diff"]), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(diff.mean_base, torch.tensor(data["base_mean"]), rtol=1e-4,
                               atol=1e-5)  # fmt: skip
    torch.testing.assert_close(diff.mean_ft, torch.tensor(data["ft_mean"]), rtol=1e-4, atol=1e-5)
    for j, want in enumerate(data["lens"]):
        probs, inv = lens_probabilities(ft, diff.delta[j])
        top, inv_top = torch.topk(probs, 10), torch.topk(inv, 10)
        assert top.indices.tolist() == want["ids"] and inv_top.indices.tolist() == want["inv_ids"]
        assert top.values.tolist() == pytest.approx(want["probs"], rel=1e-4, abs=1e-7)
        assert inv_top.values.tolist() == pytest.approx(want["inv_probs"], rel=1e-4, abs=1e-7)
    side = json.loads((REF / "adl_toolkit.source.json").read_text())
    assert side["official_repo"] == "science-of-finetuning/diffing-toolkit"
