"""LTPO's update equals upstream ``ltpo.generate`` (reward, ε, σ schedule, kept thoughts).

Reference numbers: ``tests/data/reference/ltpo_generate.*``, produced once by running upstream's
``build_inputs`` + ``generate`` on a tiny Llama with fixed weights (repository, commit and
command in the ``.source.json`` sidecar). The prompt ids come from upstream; the thoughts sit
between ``prefix = ids[:start]`` and ``suffix = ids[end:]``."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

REF = Path(__file__).parent / "data" / "reference"


@pytest.fixture(scope="module")
def ref():  # type: ignore[no-untyped-def]
    from transformers import LlamaConfig, LlamaForCausalLM

    from llm_methods.lm import wrap

    data = json.loads((REF / "ltpo_generate.json").read_text())
    weights = np.load(REF / "ltpo_generate_weights.npz")
    with torch.random.fork_rng(devices=[]):
        model = LlamaForCausalLM(LlamaConfig(**data["config"])).eval()
    model.load_state_dict({k: torch.from_numpy(weights[k]) for k in weights.files})
    lm = wrap(SimpleNamespace(pad_token_id=0), model, "ref")
    return lm, data


@pytest.mark.parametrize("run", ["a", "b"])
def test_zeroth_order_update_equals_upstream(ref, run: str) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.ltpo.model import LTPOConfig, ThoughtScorer, ltpo_optimize

    lm, data = ref
    r = data["runs"][run]
    ids, (start, end) = r["input_ids"], r["thought_idx"]
    prefix, suffix = ids[:start], ids[end:]
    init = lm.model.get_input_embeddings()(torch.tensor(ids[start:end])).detach()
    cfg = LTPOConfig(n_thoughts=r["K"], sigma=r["sigma"], sigma_decay=r["decay"], lr=r["lr"],
                     steps=r["steps"], top_k=r["top_k"])  # fmt: skip
    kept, trace = ltpo_optimize(lm, prefix, cfg, seed=r["seed"], suffix=suffix, init=init)
    assert trace[1:] == pytest.approx(r["rewards"], abs=2e-5)  # R(H + eps) of every step
    torch.testing.assert_close(kept, torch.tensor(r["kept"]), rtol=1e-4, atol=1e-5)
    scorer = ThoughtScorer(lm, prefix, r["top_k"], suffix)
    with torch.no_grad():  # the evaluated candidates (eps draws and sigma schedule) agree too
        for reward, cand in zip(r["rewards"], r["candidates"], strict=True):
            assert float(scorer.reward(torch.tensor(cand))) == pytest.approx(reward, abs=2e-5)
    assert int(np.argmax(r["rewards"])) == r["best_step"]


def test_reference_sidecar_names_the_commit() -> None:
    side = json.loads((REF / "ltpo_generate.source.json").read_text())
    assert side["official_repo"] == "ltpo2025/LTPO" and len(side["commit"]) == 40
