from __future__ import annotations

import numpy as np
import pytest
import torch

from bio_scisor.baselines import CausalLM, HmmScorer, random_scores, train_causal_lm
from bio_scisor.metrics import proteingym_summary, spearman


def test_causal_lm_is_normalised_over_short_sequences() -> None:
    """The 20 sequences of length 1 carry less than all the probability mass."""
    torch.manual_seed(0)
    lm = CausalLM(d_model=16, n_layers=1, n_heads=2, d_ff=32)
    logp = lm.log_probs(list("ACDEFGHIKLMNPQRSTVWY"))
    assert (logp < 0).all() and np.exp(logp).sum() < 1.0


def test_causal_lm_training_lowers_nll(family) -> None:
    before = CausalLM(d_model=16, n_layers=1, n_heads=2, d_ff=32)
    torch.manual_seed(0)
    after = train_causal_lm(
        family.sequences, 15, 8, lr=3e-3, seed=0, d_model=16, n_layers=1, n_heads=2, d_ff=32
    )
    assert (
        after.log_probs(family.sequences[:10]).mean()
        > before.log_probs(family.sequences[:10]).mean()
    )


def test_hmm_penalises_motif_deletions(synth_dir, family) -> None:
    hmm = HmmScorer(synth_dir / "family.a2m")
    a, _ = family.wt_motifs[1]
    motif_hit = family.wt[: a + 2] + family.wt[a + 5 :]
    scores = hmm.score(family.wt, [motif_hit])
    assert scores[0] < 0
    bits, missing = hmm.bit_scores([family.wt, "WWWWWWWW"])
    assert 0 <= missing <= 1 and bits[1] < bits[0]


def test_spearman() -> None:
    x = np.arange(10.0)
    assert spearman(x, x) == pytest.approx(1.0) and spearman(x, -x) == pytest.approx(-1.0)
    assert spearman(np.ones(10), x) == 0.0


def test_summary_is_proteingyms_indel_aggregation() -> None:
    """Assays -> mean per (UniProt_ID, type) -> mean per type -> mean over types (issue 25)."""
    x = np.arange(10.0)
    assays = [
        (x, x, "Activity", "P1"),
        (x, x, "Activity", "P1"),
        (x, x, "Activity", "P1"),
        (x, -x, "Activity", "P2"),
        (x, x, "Stability", "P3"),
        (x, np.ones(10), "Stability", "P4"),  # constant DMS scores: NaN, skipped as in pandas
    ]
    out = proteingym_summary(assays, n_boot=200)
    # per assay over the Activity type would give 0.5 and an overall 0.75
    assert out["by_type"] == {"Activity": 0.0, "Stability": 1.0}
    assert out["spearman"] == pytest.approx(0.5)
    assert out["n_assays"] == 6 and out["n_proteins"] == 4
    assert np.isnan(out["per_assay"][5])


def test_summary_rounds_per_assay_and_bootstraps_proteins() -> None:
    rng = np.random.default_rng(0)
    truth = rng.normal(size=40)
    scores = truth + rng.normal(size=40)
    rho = spearman(scores, truth)
    out = proteingym_summary([(scores, truth, "Activity", "P1")], n_boot=100)
    assert out["spearman"] == round(rho, 3) != rho
    assert out["se"] == pytest.approx(
        0.0, abs=1e-12
    )  # one protein per type: resampling proteins changes nothing
    two = proteingym_summary(
        [(scores, truth, "Activity", "P1"), (truth, truth, "Activity", "P2")], n_boot=2000
    )
    # SE of the mean of two resampled values {a, b}: |a - b| / 2 * sqrt(1/2) (n = 2)
    expected = abs(round(rho, 3) - 1.0) / 2 * np.sqrt(0.5)
    assert two["se"] == pytest.approx(expected, rel=0.1)
    same = proteingym_summary(
        [(scores, truth, "Activity", "P1"), (truth, truth, "Activity", "P2")],
        n_boot=50,
        reference=[round(rho, 3), 1.0],
    )
    assert same["se"] == pytest.approx(
        0.0, abs=1e-12
    )  # the difference to an identical reference model is constant


def test_random_scores_are_seeded() -> None:
    np.testing.assert_array_equal(random_scores(5, 1), random_scores(5, 1))


def test_hmm_from_homologs_is_built_like_a_user_would(family) -> None:
    """Issue 25: hmmbuild on a jackhmmer alignment of the WT's homologs, not the true MSA."""
    hmm = HmmScorer.from_homologs(family.wt, family.sequences)
    assert 2 <= hmm.n_msa <= len(family.sequences) + 1
    a, _ = family.wt_motifs[1]
    motif_hit = family.wt[: a + 2] + family.wt[a + 5 :]
    linker_hit = family.wt[:1] + family.wt[2:]
    scores = hmm.score(family.wt, [motif_hit, linker_hit])
    assert scores[0] < scores[1]
    with pytest.raises(ValueError, match="jackhmmer included"):
        HmmScorer.from_homologs("WWWWWWWWWWWW", ["ACDEFGHIKL", "MNPQRSTVYA"])
