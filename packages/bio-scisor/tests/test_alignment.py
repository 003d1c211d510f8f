from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bio_scisor.alignment import (
    alignment_count_brute_force,
    deletion_posterior,
    log_alignment_counts,
    log_deletion_counts,
    log_deletion_counts_loop,
)
from bio_scisor.insertion import pad_batch
from bio_scisor.io import encode

letters = st.text(alphabet="ACD", min_size=0, max_size=5)


def _batch(seqs):
    return pad_batch(
        [torch.from_numpy(encode(s)) if s else torch.zeros(0, dtype=torch.long) for s in seqs]
    )


@st.composite
def pairs(draw):
    """(X0, X_t) with X0 a subsequence of X_t (X_t = X0 plus 1-4 insertions), over 3 letters."""
    x0 = draw(st.text(alphabet="ACD", min_size=1, max_size=5))
    xt = list(x0)
    for _ in range(draw(st.integers(1, 4))):
        xt.insert(draw(st.integers(0, len(xt))), draw(st.sampled_from("ACD")))
    return x0, "".join(xt)


@settings(max_examples=60, deadline=None)
@given(st.lists(pairs(), min_size=1, max_size=4))
def test_batched_dp_matches_brute_force(batch) -> None:
    x0, x0_len = _batch([a for a, _ in batch])
    xt, xt_len = _batch([b for _, b in batch])
    got = log_deletion_counts(x0, x0_len, xt, xt_len)
    for row, (a, b) in enumerate(batch):
        want = [alignment_count_brute_force(a, b[:i] + b[i + 1 :]) for i in range(len(b))]
        np.testing.assert_allclose(np.exp(got[row, : len(b)].numpy()), want, atol=1e-9)
        assert torch.isinf(got[row, len(b) :]).all()  # padding
        np.testing.assert_allclose(np.exp(log_deletion_counts_loop(a, b)), want, atol=1e-9)
        total = math.exp(float(log_alignment_counts(x0, x0_len, xt, xt_len)[row]))
        assert total == __import__("pytest").approx(alignment_count_brute_force(a, b))


@settings(max_examples=30, deadline=None)
@given(pairs())
def test_posterior_is_a_distribution_on_the_sequence(pair) -> None:
    x0, x0_len = _batch([pair[0], "A"])
    xt, xt_len = _batch([pair[1], "AC"])
    p = deletion_posterior(x0, x0_len, xt, xt_len)
    assert p.dtype == torch.float64
    np.testing.assert_allclose(p.sum(1).numpy(), 1.0)
    assert (p[1, 2:] == 0).all() and p[1, :2].tolist() == [0.0, 1.0]


def test_long_sequences_stay_exact_in_float64() -> None:
    """Counts far beyond float16 range: compare with exact integer arithmetic (X0 all A's)."""
    x0, xt = "A" * 40, "A" * 60
    a, la = _batch([x0])
    b, lb = _batch([xt])
    got = log_deletion_counts(a, la, b, lb)[0]
    want = math.log(math.comb(59, 40))  # every deletion leaves 59 A's
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


def test_no_embedding_gives_minus_inf() -> None:
    a, la = _batch(["CC"])
    b, lb = _batch(["ACA"])
    assert torch.isinf(log_alignment_counts(a, la, b, lb)).all()
