"""Reference checks against numbers produced by running the official code once.

Repository baronet2/SCISOR at the commit recorded in ``data/reference/scisor_reference.json``
(see ``data/reference/SCISOR_REFERENCE.md`` for the functions, the environment and the command).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from bio_scisor.alignment import log_deletion_counts
from bio_scisor.constants import AMINO_ACIDS, ESM2_TOKEN_IDS
from bio_scisor.elbo import prior_term
from bio_scisor.insertion import NoisedBatch, pad_batch
from bio_scisor.io import encode

DATA = Path(__file__).parent / "data" / "reference"
REF = json.loads((DATA / "scisor_reference.json").read_text())
COMMIT = "2b6ad41ea6f793a4682bb9e3072daaf8f3cce86d"


def _tokens(seq: str) -> tuple[torch.Tensor, torch.Tensor]:
    return pad_batch([torch.from_numpy(encode(seq))])


def test_reference_is_pinned() -> None:
    assert REF["repo"] == "baronet2/SCISOR" and REF["commit"] == COMMIT


@pytest.mark.parametrize("case", REF["get_deletion_log_alignments"]["pairs"], ids=lambda c: c["xt"])
def test_deletion_log_alignments_equal_upstream(case) -> None:
    """Our float64 target log ali(X0, X_t minus i) equals upstream's float32 DP."""
    x0, x0_len = _tokens(case["x0"])
    xt, xt_len = _tokens(case["xt"])
    ours = log_deletion_counts(x0, x0_len, xt, xt_len)[0].numpy()
    theirs = np.array(case["log_deletion_alignments"], dtype=np.float64)
    assert np.array_equal(np.isinf(ours), np.isinf(theirs))
    finite = np.isfinite(theirs)
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-6, atol=1e-5)
    # upstream's second output: logsumexp_i log ali(X0, X_t minus i) - log S
    s = len(case["xt"]) - len(case["x0"])
    second = float(torch.logsumexp(torch.from_numpy(ours), 0)) - math.log(s)
    assert second == pytest.approx(case["second_output"], rel=1e-6, abs=1e-5)


@pytest.mark.parametrize("case", REF["get_kl_t1"]["pairs"], ids=lambda c: c["x0"])
def test_prior_term_equals_upstream_get_kl_t1(case) -> None:
    """Our prior term (logged as */prior_kl, part of the ELBO) on upstream's fixed draws, with
    upstream's pi (p0.pt, ESM token order)."""
    kl = REF["get_kl_t1"]
    p0 = kl["p0"]
    pi = np.array([p0[ESM2_TOKEN_IDS[a]] for a in AMINO_ACIDS])
    x0, x0_len = _tokens(case["x0"])
    xt, xt_len = _tokens(case["xT"])
    noised = NoisedBatch(xt, xt_len, torch.tensor([case["S"]]), torch.tensor([0.9]), xt < 0)
    ours = prior_term(x0, x0_len, None, kl["alpha_rate"], kl["t_max"], pi, noised=noised)
    assert float(ours[0]) == pytest.approx(case["kl_t1"], rel=1e-5)


def test_official_denoiser_output_equals_upstream() -> None:
    """A randomly initialised upstream model (FAESM_Base, tiny ESM2, random FiLM), saved in the
    official layout, loads into our EsmDenoiser and gives upstream's deletion distribution."""
    from .test_official import official_checkpoint

    fwd = REF["forward"]
    import tempfile

    from bio_scisor.official import load_official_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        path = official_checkpoint(Path(tmp))
        denoiser, settings = load_official_checkpoint(path, esm_config={"num_attention_heads": 4})
    assert settings == {
        "t_max": 0.9,
        "alpha_power": 1.1,
        "window_size": 2048,
        "hf_model_name": "tiny_esm",
    }
    tokens, lengths = pad_batch([torch.from_numpy(encode(s)) for s in fwd["sequences"]])
    with torch.no_grad():
        ours = denoiser(tokens, lengths, torch.tensor(fwd["S"]))
    logits = torch.tensor(fwd["logits"], dtype=torch.float64)
    for b, seq in enumerate(fwd["sequences"]):
        upstream = torch.log_softmax(logits[b, 1 : len(seq) + 1], 0)  # residues only (p_sample)
        torch.testing.assert_close(ours[b, : len(seq)].double(), upstream, rtol=1e-4, atol=1e-5)
