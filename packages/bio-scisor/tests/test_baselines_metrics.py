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
    after = train_causal_lm(family.sequences, 15, 8, lr=3e-3, seed=0,
                            d_model=16, n_layers=1, n_heads=2, d_ff=32)  # fmt: skip
    assert (
        after.log_probs(family.sequences[:10]).mean()
        > before.log_probs(family.sequences[:10]).mean()
    )


def test_hmm_penalises_motif_deletions(synth_dir, family) -> None:
    hmm = HmmScorer(synth_dir / "family.a2m")
    a, _ = family.wt_motifs[1]
    motif_hit = family.wt[:a + 2] + family.wt[a + 5:]  # fmt: skip
    scores = hmm.score(family.wt, [motif_hit])
    assert scores[0] < 0
    bits, missing = hmm.bit_scores([family.wt, "WWWWWWWW"])
    assert 0 <= missing <= 1 and bits[1] < bits[0]


def test_spearman_and_summary() -> None:
    x = np.arange(10.0)
    assert spearman(x, x) == pytest.approx(1.0) and spearman(x, -x) == pytest.approx(-1.0)
    assert spearman(np.ones(10), x) == 0.0
    out = proteingym_summary(
        [(x, x, "Activity"), (x, -x, "Activity"), (x, x, "Stability")], n_boot=20
    )
    assert out["spearman"] == pytest.approx(0.5)  # (mean(1, -1) + 1) / 2
    assert out["se"] >= 0


def test_random_scores_are_seeded() -> None:
    np.testing.assert_array_equal(random_scores(5, 1), random_scores(5, 1))
