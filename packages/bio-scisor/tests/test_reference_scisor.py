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
from iclr26_common.testing import assert_mutation_detected, assert_portable_close

DATA = Path(__file__).parent / "data" / "reference"
REF = json.loads((DATA / "scisor_reference.json").read_text())
COMMIT = "2b6ad41ea6f793a4682bb9e3072daaf8f3cce86d"
#: Relative tolerances (``max |ours - upstream| / max |upstream|``, iclr26_common.testing) at ~10x
#: the largest difference measured on AMD EPYC (2026-12-06) over ATEN_CPU_CAPABILITY=default
#: (MKL_CBWR=COMPATIBLE; also with ONEDNN_MAX_CPU_ISA=SSE41, oneDNN's oldest kernels), avx2, avx512
#: and unset (the same in all five unless said): alignment counts and upstream's second output
#: 2.0e-8 (upstream's float32 logs; ours are float64); prior term 1.2e-7; log q of the official
#: denoiser 4.2e-7 (default; 2.9e-7 with avx2/avx512). The mutations below move them by 1.0 (X0
#: reversed), >= 4.0e-2 (pi in ESM order) and >= 1.2e-2 (S rotated).
COUNT_TOL = 2e-7
KL_T1_TOL = 1.3e-6
LOG_Q_TOL = 5e-6


def _tokens(seq: str) -> tuple[torch.Tensor, torch.Tensor]:
    return pad_batch([torch.from_numpy(encode(seq))])


def test_reference_is_pinned() -> None:
    assert REF["repo"] == "baronet2/SCISOR" and REF["commit"] == COMMIT


def _counts(x0: str, xt: str) -> np.ndarray:
    """ali(X0, X_t minus i) for every i: our float64 log counts, exponentiated."""
    return np.exp(log_deletion_counts(*_tokens(x0), *_tokens(xt))[0].numpy())


@pytest.mark.parametrize("case", REF["get_deletion_log_alignments"]["pairs"], ids=lambda c: c["xt"])
def test_deletion_log_alignments_equal_upstream(case) -> None:
    """Our float64 target log ali(X0, X_t minus i) equals upstream's float32 DP: the same
    impossible deletions (-inf), and the counts ali = exp(log ali) within float32 rounding."""
    x0, x0_len = _tokens(case["x0"])
    xt, xt_len = _tokens(case["xt"])
    ours = log_deletion_counts(x0, x0_len, xt, xt_len)[0].numpy()
    theirs = np.array(case["log_deletion_alignments"], dtype=np.float64)
    assert np.array_equal(np.isinf(ours), np.isinf(theirs))
    assert np.isfinite(theirs).any()
    assert_portable_close(np.exp(ours), np.exp(theirs), tol=COUNT_TOL, what="ali counts")
    # upstream's second output: logsumexp_i log ali(X0, X_t minus i) - log S
    s = len(case["xt"]) - len(case["x0"])
    second = float(torch.logsumexp(torch.from_numpy(ours), 0)) - math.log(s)
    assert_portable_close(second, case["second_output"], tol=COUNT_TOL, what="second output")
    # the inputs shuffled (X0 read backwards) changes the counts by >= 10x the tolerance
    mutated = _counts(case["x0"][::-1], case["xt"])
    assert_mutation_detected(mutated, np.exp(theirs), tol=COUNT_TOL, what="X0 reversed")


def _upstream_pi(esm_order: bool = False) -> np.ndarray:
    """Upstream's pi (p0.pt) mapped from ESM token ids onto our residue order; ``esm_order``:
    taken in ESM's token order instead (the mapping forgotten)."""
    p0 = REF["get_kl_t1"]["p0"]
    if esm_order:
        return np.array(p0[4:24])
    return np.array([p0[ESM2_TOKEN_IDS[a]] for a in AMINO_ACIDS])


@pytest.mark.parametrize("case", REF["get_kl_t1"]["pairs"], ids=lambda c: c["x0"])
def test_prior_term_equals_upstream_get_kl_t1(case) -> None:
    """Our prior term (logged as */prior_kl, part of the ELBO) on upstream's fixed draws, with
    upstream's pi (p0.pt, ESM token order)."""
    kl = REF["get_kl_t1"]
    x0, x0_len = _tokens(case["x0"])
    xt, xt_len = _tokens(case["xT"])
    noised = NoisedBatch(xt, xt_len, torch.tensor([case["S"]]), torch.tensor([0.9]), xt < 0)

    def prior(pi: np.ndarray) -> float:
        return float(
            prior_term(x0, x0_len, None, kl["alpha_rate"], kl["t_max"], pi, noised=noised)[0]
        )

    assert_portable_close(prior(_upstream_pi()), case["kl_t1"], tol=KL_T1_TOL, what="kl_t1")
    # pi left in ESM's token order (the mapping this test exists for) moves it >= 10x the tol
    mutated = prior(_upstream_pi(esm_order=True))
    assert_mutation_detected(mutated, case["kl_t1"], tol=KL_T1_TOL, what="pi in ESM order")


def test_official_denoiser_output_equals_upstream() -> None:
    """A randomly initialised upstream model (FAESM_Base, tiny ESM2, random FiLM), saved in the
    official layout, loads into our EsmDenoiser and gives upstream's deletion distribution
    (log q over the residues: log-probabilities of n positions, not saturated)."""
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
    s = torch.tensor(fwd["S"])
    with torch.no_grad():
        ours = denoiser(tokens, lengths, s)
        wrong_s = denoiser(tokens, lengths, s.roll(1))  # S given to the wrong sequences
    logits = torch.tensor(fwd["logits"], dtype=torch.float64)
    for b, seq in enumerate(fwd["sequences"]):
        upstream = torch.log_softmax(logits[b, 1 : len(seq) + 1], 0)  # residues only (p_sample)
        n = len(seq)
        assert_portable_close(ours[b, :n], upstream, tol=LOG_Q_TOL, what=f"log q of {seq}")
        assert_mutation_detected(wrong_s[b, :n], upstream, tol=LOG_Q_TOL, what=f"{seq}, S rotated")


# ---------------------------------------------------------------- the training loss (issue 38)

LOSS_REF = json.loads((DATA / "scisor_loss_reference.json").read_text())
#: ``vb_loss`` of upstream's ``ShorteningSCUD.forward`` is float32 (t, alpha, beta and the KL);
#: ours is float64. Measured relative difference <= 5.9e-7 over the five cases (2026-12-07, AMD
#: EPYC, unset and ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE alike): the tolerance is 10x
#: that. The mutations below move it by 1.0 (loss weight doubled) and by 1.3-10 (the
#: (1 - alpha(t)^(L+1)) factor dropped, in the three cases at t <= 0.1 where the factor is
#: 0.09-0.44). The small-t_max prior cases differ by <= 2.9e-7 (KL_T1_TOL is 4.5x that) and
#: their factor mutation moves them by >= 0.17.
LOSS_TOL = 6e-6


def test_loss_reference_is_pinned() -> None:
    assert LOSS_REF["repo"] == "baronet2/SCISOR" and LOSS_REF["commit"] == COMMIT


class _FixedLogits(torch.nn.Module):
    """A denoiser that returns log softmax of fixed residue logits (upstream's logits were
    these on the residues and -30 on CLS/EOS, whose mass is below 1e-12)."""

    window_size = None

    def __init__(self, logits: list[float]) -> None:
        super().__init__()
        self.logits = torch.tensor(logits, dtype=torch.float64)

    def forward(self, tokens, lengths, s):  # type: ignore[no-untyped-def]
        return torch.log_softmax(self.logits, 0)[None, :]


def _loss(case: dict, factor: bool = True, scale: float = 1.0) -> float:
    from bio_scisor.elbo import per_sequence_loss
    from bio_scisor.insertion import alpha

    x0, x0_len = _tokens(case["x0"])
    xt, xt_len = _tokens(case["xt"])
    t = torch.tensor([case["t"]], dtype=torch.float64)
    noised = NoisedBatch(xt, xt_len, torch.tensor([case["S"]]), t, xt < 0)
    loss, _ = per_sequence_loss(
        _FixedLogits(case["residue_logits"]), x0, x0_len, noised, t_max=case["t_max"]
    )
    value = scale * float(loss[0])
    if not factor:  # mutation: the Rao-Blackwell factor (1 - alpha(t)^(L+1)) left out
        value /= float(1 - alpha(t, 1.1) ** (len(case["x0"]) + 1))
    return value


@pytest.mark.parametrize("case", LOSS_REF["vb_loss"]["cases"], ids=lambda c: c["xt"])
def test_training_loss_equals_upstream_vb_loss(case) -> None:
    """S * KL(p || q) * beta(t)/(1 - alpha(t)) * (1 - alpha(t)^(L+1)) * t_max on upstream's
    fixed draw and logits: upstream's ``vb_loss`` (batch of one)."""
    assert_portable_close(_loss(case), case["vb_loss"], tol=LOSS_TOL, what="vb_loss")
    # a doubled loss weight (the mutation the review found the reference file blind to)
    assert_mutation_detected(_loss(case, scale=2.0), case["vb_loss"], tol=LOSS_TOL, what="x2")


def test_training_loss_reference_exercises_the_factor() -> None:
    """At small t the factor (1 - alpha(t)^(L+1)) is far from 1: dropping it must fail there."""
    small_t = [c for c in LOSS_REF["vb_loss"]["cases"] if c["t"] <= 0.1]
    assert len(small_t) >= 3
    for case in small_t:
        mutated = _loss(case, factor=False)
        assert_mutation_detected(mutated, case["vb_loss"], tol=LOSS_TOL, what="factor dropped")


@pytest.mark.parametrize(
    "case", LOSS_REF["get_kl_t1_small_t_max"]["pairs"], ids=lambda c: f"{c['x0']}@{c['t_max']}"
)
def test_prior_term_at_small_t_max_equals_upstream(case) -> None:
    """The prior term where the factor 1 - alpha(t_max)^(L+1) is 0.14-0.86 (t_max 0.05-0.3, L 2-5):
    at t_max = 0.9 (the cases above) the factor is ~1 and dropping it went unnoticed."""
    from bio_scisor.insertion import alpha

    x0, x0_len = _tokens(case["x0"])
    xt, xt_len = _tokens(case["xT"])
    t_max = case["t_max"]
    noised = NoisedBatch(xt, xt_len, torch.tensor([case["S"]]), torch.tensor([t_max]), xt < 0)
    ours = float(prior_term(x0, x0_len, None, 1.1, t_max, _upstream_pi(), noised=noised)[0])
    assert_portable_close(ours, case["kl_t1"], tol=KL_T1_TOL, what="kl_t1")
    factor = float(
        1 - alpha(torch.tensor(t_max, dtype=torch.float64), 1.1) ** (len(case["x0"]) + 1)
    )
    assert factor < 0.9
    assert_mutation_detected(ours / factor, case["kl_t1"], tol=KL_T1_TOL, what="factor dropped")
