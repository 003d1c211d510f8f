"""The ELBO scorer's common random numbers, the prior term and the coupled forward draws."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bio_scisor.alignment import alignment_count_brute_force
from bio_scisor.constants import AMINO_ACIDS, BACKGROUND, S_REDRAW_MAX
from bio_scisor.elbo import (
    coupled_noise,
    draw_shared_noise,
    elbo_values,
    embedding_indices,
    prior_term,
    score_elbo,
)
from bio_scisor.insertion import NoisedBatch, alpha, pad_batch, redraw_probs
from bio_scisor.io import encode, is_deletion_of

WT = "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILS"


def _spell(row: torch.Tensor) -> str:
    return "".join(AMINO_ACIDS[i] for i in row.tolist())


def test_identical_sequences_get_identical_elbos(model) -> None:
    """Issue 25: ELBO(WT) - ELBO(WT) was 2.76, 8.13, 22.67 nats over three copies."""
    mutant = WT[:5] + WT[6:]
    diffs = score_elbo(model, WT, [WT, WT, mutant, WT, mutant], n_samples=3, seed=4, t_max=0.5)
    assert (diffs[[0, 1, 3]] == 0.0).all()
    assert diffs[2] == diffs[4] and diffs[2] != 0.0
    # the batch a sequence lands in changes only float32 rounding
    small = score_elbo(model, WT, [mutant, WT, mutant], 3, seed=4, t_max=0.5, batch_size=1)
    assert small[1] == 0.0 and small[0] == small[2]
    np.testing.assert_allclose(small, [diffs[2], 0.0, diffs[2]], rtol=1e-5)


def test_common_random_numbers_shrink_the_variance_of_a_difference(model) -> None:
    """Var over seeds of ELBO(mut) - ELBO(WT): shared noise vs independent noise per sequence."""
    mutant = WT[:12] + WT[14:]
    coupled, independent = [], []
    for seed in range(10):
        coupled.append(score_elbo(model, WT, [mutant], 2, seed=seed, t_max=0.5)[0])
        mut = elbo_values(model, WT, [mutant], 2, seed=seed, t_max=0.5)[0]
        ref = elbo_values(model, WT, [WT], 2, seed=seed + 100, t_max=0.5)[0]
        independent.append(mut - ref)
    assert np.var(coupled) < 0.2 * np.var(independent)


def test_coupled_draw_of_a_deletion_is_the_wt_draw_minus_one_gap() -> None:
    gen = torch.Generator().manual_seed(0)
    noise = draw_shared_noise(len(WT) + 1, 0.4, gen)
    mutant = WT[:7] + WT[8:]
    seqs = [WT, mutant]
    batch = coupled_noise(
        [encode(s) for s in seqs], [embedding_indices(s, WT) for s in seqs], len(WT), noise
    )
    xt = [_spell(batch.xt[b, : int(batch.xt_len[b])]) for b in range(2)]
    for b, seq in enumerate(seqs):
        kept = batch.original[b, : int(batch.xt_len[b])]
        assert "".join(c for c, o in zip(xt[b], kept.tolist(), strict=True) if o) == seq
        assert int(batch.s[b]) == int(batch.xt_len[b]) - len(seq)
    # the mutant keeps every WT gap but gap 8 (after the deleted residue 7)
    assert int(batch.s[0]) - int(batch.s[1]) == int(noise.counts[8])
    assert is_deletion_of(xt[1], xt[0]) or xt[1] == xt[0]


@pytest.mark.parametrize("t", [0.3, 0.02])
def test_coupled_draws_follow_the_forward_process(t: float) -> None:
    """S ~ NegBinomial(L+1, 1-alpha) with 0 redrawn from the restricted pmf, and given S the
    originals sit at a uniformly random subset of the L+S slots."""
    seq = "ACD"
    length, n = len(seq), 2000
    a = float(alpha(torch.tensor(t)))
    s_values, patterns = [], {}
    for i in range(n):
        noise = draw_shared_noise(8, t, torch.Generator().manual_seed(i))
        keep = np.array([1, 4, 6])  # any three gaps of a longer reference
        batch = coupled_noise([encode(seq)], [keep], 7, noise)
        s = int(batch.s[0])
        s_values.append(s)
        if s == 2:
            key = tuple(batch.original[0, : length + 2].tolist())
            patterns[key] = patterns.get(key, 0) + 1
    s_arr = np.array(s_values)
    k = np.arange(0, 400)
    pmf = np.exp(
        [
            math.lgamma(length + 1 + j)
            - math.lgamma(length + 1)
            - math.lgamma(j + 1)
            + (length + 1) * math.log(a)
            + j * math.log1p(-a)
            for j in k
        ]
    )
    restricted = redraw_probs(torch.tensor([length]), torch.tensor([a]))[0].numpy()
    expected = pmf.copy()
    expected[0] = 0.0
    expected[1 : S_REDRAW_MAX + 1] += pmf[0] * restricted
    for value in (1, 2, 3):
        p = expected[value]
        assert abs((s_arr == value).mean() - p) < 4 * math.sqrt(p * (1 - p) / n) + 1e-3
    if t == 0.3:  # C(5, 2) = 10 interleavings, each about equally often
        assert len(patterns) == 10
        counts = np.array(list(patterns.values()))
        assert counts.min() > 0.5 * counts.mean()


def test_s_zero_is_redrawn_from_the_restricted_negative_binomial() -> None:
    """Issue 25: upstream redraws S = 0 from the NB pmf on 1..20, not uniformly."""
    from bio_scisor.insertion import insert

    x0, lengths = pad_batch([torch.from_numpy(encode("ACDEFGHIKL"))] * 2000)
    t = torch.full((2000,), 0.01, dtype=torch.float64)
    s = insert(x0, lengths, torch.Generator().manual_seed(0), t=t).s
    a = alpha(torch.tensor(0.01, dtype=torch.float64))
    probs = redraw_probs(torch.tensor([10]), a[None])[0]
    p_zero = float(a**11)
    expected_one = (1 - p_zero) * float(11 * (1 - a) * a**11 / (1 - a**11)) + p_zero * float(
        probs[0]
    )
    assert abs(float((s == 1).double().mean()) - expected_one) < 0.03  # ~0.95; uniform gave ~0.14
    assert int(s.max()) <= 4


def test_prior_term_is_upstream_get_kl_t1_on_a_fixed_draw() -> None:
    """log ali - log C(L+S, S) - sum log pi(X0), times 1 - alpha(t_max)^(L+1)."""
    x0_str, xt_str = "ACA", "AACCA"
    x0, x0_len = pad_batch([torch.from_numpy(encode(x0_str))])
    xt, xt_len = pad_batch([torch.from_numpy(encode(xt_str))])
    noised = NoisedBatch(xt, xt_len, torch.tensor([2]), torch.tensor([0.7]), xt > 99)
    got = float(prior_term(x0, x0_len, t_max=0.7, noised=noised)[0])
    ali = alignment_count_brute_force(x0_str, xt_str)
    log_pi = sum(math.log(BACKGROUND[AMINO_ACIDS.index(c)]) for c in x0_str)
    factor = 1 - float(alpha(torch.tensor(0.7, dtype=torch.float64))) ** 4
    assert ali == 4
    assert got == pytest.approx((math.log(ali) - math.log(math.comb(5, 2)) - log_pi) * factor)


def test_elbo_rejects_non_deletions_and_bad_sample_counts(model) -> None:
    with pytest.raises(ValueError, match="not the WT or a deletion"):
        score_elbo(model, "ACDE", ["ACDEF"], 1)
    with pytest.raises(ValueError, match="n_samples"):
        score_elbo(model, "ACDE", ["ACD"], 0)
