from __future__ import annotations

import numpy as np
import torch

from bio_scisor.constants import PAD_INDEX, S_REDRAW_MAX
from bio_scisor.insertion import alpha, beta, gamma_sample, insert, loss_weight, pad_batch
from bio_scisor.io import encode, is_deletion_of

AA = "ACDEFGHIKLMNPQRSTVWY"


def test_beta_is_minus_dlog_alpha() -> None:
    t = torch.linspace(0.05, 0.85, 9, dtype=torch.float64)
    eps = 1e-6
    numeric = -(torch.log(alpha(t + eps)) - torch.log(alpha(t - eps))) / (2 * eps)
    torch.testing.assert_close(numeric, beta(t), rtol=1e-5, atol=1e-8)


def test_loss_weight_is_finite_near_zero() -> None:
    w = loss_weight(torch.tensor([1e-9, 0.5, 0.89], dtype=torch.float64), torch.tensor([80.0] * 3))
    assert torch.isfinite(w).all() and (w > 0).all()
    # t -> 0: beta/(1-alpha) -> 1/t and 1 - alpha^(L+1) -> (L+1) t / 1.1
    assert float(w[0]) == __import__("pytest").approx(81 / 1.1 * 0.9, rel=1e-3)


def test_insertion_keeps_x0_as_subsequence() -> None:
    seqs = ["ACDEFGHIKL", "MNPQ", "W"]
    x0, lengths = pad_batch([torch.from_numpy(encode(s)) for s in seqs])
    noised = insert(x0, lengths, torch.Generator().manual_seed(0))
    for b, seq in enumerate(seqs):
        n = int(noised.xt_len[b])
        row = noised.xt[b, :n].tolist()
        assert n == len(seq) + int(noised.s[b]) and int(noised.s[b]) >= 1
        assert (noised.xt[b, n:] == PAD_INDEX).all()
        kept = "".join(
            AA[i] for i, o in zip(row, noised.original[b, :n].tolist(), strict=True) if o
        )
        assert kept == seq
        assert is_deletion_of(seq, "".join(AA[i] for i in row))


def test_s_follows_the_negative_binomial() -> None:
    """Mean of S at fixed t: (L+1)(1-alpha)/alpha (zero-redraw is negligible at this t)."""
    gen = torch.Generator().manual_seed(1)
    x0, lengths = pad_batch([torch.from_numpy(encode("ACDEFGHIKL"))] * 2000)
    t = torch.full((2000,), 0.5, dtype=torch.float64)
    s = insert(x0, lengths, gen, t=t).s.double()
    a = float(alpha(torch.tensor(0.5)))
    expected = 11 * (1 - a) / a
    assert abs(float(s.mean()) - expected) < 4 * float(s.std()) / np.sqrt(2000)


def test_zero_insertions_are_redrawn() -> None:
    gen = torch.Generator().manual_seed(2)
    x0, lengths = pad_batch([torch.from_numpy(encode("ACD"))] * 200)
    s = insert(x0, lengths, gen, t=torch.full((200,), 1e-6)).s
    assert s.min() >= 1 and s.max() <= S_REDRAW_MAX


def test_gamma_sampler_mean() -> None:
    draws = gamma_sample(
        torch.full((4000,), 7.0, dtype=torch.float64), torch.Generator().manual_seed(0)
    )
    assert abs(float(draws.mean()) - 7.0) < 0.2
