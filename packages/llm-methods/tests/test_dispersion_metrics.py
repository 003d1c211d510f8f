from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_methods.dispersion.knnlm import KNNLM, interpolated_perplexity
from llm_methods.dispersion.measure import binned, binned_correlation, pearson_r
from llm_methods.dispersion.metrics import (
    DispersionAccumulator,
    cross_mean_cosine,
    dispersion,
    mean_pairwise_cosine,
    mean_pairwise_cosine_gram,
)
from llm_methods.dispersion.model import PushAwayLoss


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 40), d=st.integers(1, 16), seed=st.integers(0, 10_000))
def test_streaming_equals_gram(n: int, d: int, seed: int) -> None:
    h = torch.randn(n, d, generator=torch.Generator().manual_seed(seed)) * 5 + 1
    torch.testing.assert_close(
        mean_pairwise_cosine(h), mean_pairwise_cosine_gram(h), rtol=1e-4, atol=1e-5
    )
    acc = DispersionAccumulator()
    for block in h.split(7):
        acc.add(block)
    assert math.isclose(acc.value(), 1 - float(mean_pairwise_cosine_gram(h)), abs_tol=1e-5)


def test_known_values_and_masks() -> None:
    same = torch.ones(5, 3)
    assert float(dispersion(same)) == pytest.approx(0.0, abs=1e-6)
    opposite = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
    assert float(dispersion(opposite)) == pytest.approx(2.0)
    ortho = torch.eye(4)
    assert float(dispersion(ortho)) == pytest.approx(1.0)
    # a padded batch: the mask excludes padding exactly
    h = torch.randn(2, 6, 4, generator=torch.Generator().manual_seed(1))
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    got = dispersion(h, mask)
    torch.testing.assert_close(got[0], 1 - mean_pairwise_cosine_gram(h[0, :4]))
    torch.testing.assert_close(got[1], 1 - mean_pairwise_cosine_gram(h[1]))


def test_cross_mean_cosine_equals_pairwise() -> None:
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(5, 8, generator=g), torch.randn(7, 8, generator=g)
    ref = torch.nn.functional.cosine_similarity(a[:, None], b[None], dim=-1).mean()
    torch.testing.assert_close(cross_mean_cosine(a, b), ref)


def test_pushaway_gradient_increases_dispersion() -> None:
    h = (torch.randn(3, 10, 8, generator=torch.Generator().manual_seed(3)) + 2).requires_grad_()
    mask = torch.ones(3, 10)
    cases = [
        ("single", "sequence", None),
        ("single", "batch", None),
        ("cross", "sequence", torch.tensor([0, 1, 1])),
    ]
    for mode, scope, domains in cases:
        loss_fn = PushAwayLoss(lam=1.0, mode=mode, scope=scope)
        term, d0 = loss_fn(h, mask, domains)
        (grad,) = torch.autograd.grad(term, h)
        _, d1 = loss_fn(h - 0.5 * grad, mask, domains)
        assert d1 > d0, (mode, scope)
        assert float(term) == pytest.approx(-float(d0))
    with pytest.raises(ValueError, match="domain label"):
        PushAwayLoss(mode="cross")(h, mask)
    with pytest.raises(ValueError, match="mode"):
        PushAwayLoss(mode="both")


def test_binned_protocol() -> None:
    ppl = np.array([5.0, 1.0, 3.0, 2.0, 4.0, 6.0, 7.0])
    d = -ppl
    x, y = binned(ppl, d, 2)
    assert x.tolist() == [1.5, 3.5, 5.5] and y.tolist() == [-1.5, -3.5, -5.5]
    assert binned_correlation(ppl, d, 2) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="need >= 3"):
        binned(ppl, d, 3)


def test_knnlm_target_probs() -> None:
    keys = torch.tensor([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0]])
    values = torch.tensor([7, 8, 7])
    knn = KNNLM(keys, values, k=2, temperature=1.0)
    lp = knn.target_logprobs(torch.tensor([[0.0, 0.0], [0.0, 0.0]]), torch.tensor([7, 9]))
    w = torch.softmax(-torch.tensor([0.0, 0.01]), 0)
    assert float(lp[0]) == pytest.approx(math.log(float(w[0])), rel=1e-5)
    assert lp[1] == -math.inf
    lm = torch.log(torch.tensor([0.5, 0.2]))
    ppl = interpolated_perplexity(lm, lp, 0.25)
    mix = 0.25 * torch.exp(lp) + 0.75 * torch.exp(lm)
    assert ppl == pytest.approx(float(torch.exp(-torch.log(mix).mean())), rel=1e-6)
    assert interpolated_perplexity(lm, lp, 0.0) == pytest.approx(float(torch.exp(-lm.mean())))
    with pytest.raises(ValueError, match="k=5"):
        KNNLM(keys, values, k=5)


def test_pearson_r_is_scipys_pearsonr() -> None:
    """The bootstrap's fast Pearson r: scipy's statistic (the same operations: equal to
    rounding on any CPU), scipy's own path for constant inputs and n = 2."""
    from scipy.stats import pearsonr

    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(3, 30))
        x = rng.lognormal(size=n) * 10 ** rng.uniform(-3, 3)
        y = rng.normal(size=n) * x + rng.normal(size=n)
        assert pearson_r(x, y) == pytest.approx(float(pearsonr(x, y).statistic), abs=1e-12)
    assert pearson_r(np.array([1.0, 2.0]), np.array([3.0, 1.0])) == -1.0
    with pytest.warns(Warning):
        assert math.isnan(pearson_r(np.ones(4), np.arange(4.0)))
