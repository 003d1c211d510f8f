"""Upstream's windowing of long sequences (window 2048 upstream; 8 here)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bio_scisor.insertion import pad_batch
from bio_scisor.io import encode
from bio_scisor.model import ScisorDenoiser
from bio_scisor.scoring import score_path
from bio_scisor.windows import DEFAULT_WINDOW, average_starts, denoiser_log_q

from .conftest import TINY

LONG = "MKTAYIAKQRQISFVKSHFSRQ"  # 22 residues


@pytest.fixture()
def model() -> ScisorDenoiser:
    torch.manual_seed(0)
    return ScisorDenoiser(**TINY, window_size=8).eval()


def _batch(seqs):
    return pad_batch([torch.from_numpy(encode(s)) for s in seqs])


def test_default_window_is_upstreams() -> None:
    assert DEFAULT_WINDOW == 2048 and ScisorDenoiser(**TINY).window_size == 2048


@torch.no_grad()
def test_short_batches_are_not_windowed(model) -> None:
    tokens, lengths = _batch(["ACDEFG", "KLM"])
    s = torch.tensor([1, 2])
    got = denoiser_log_q(model, tokens, lengths, s, "random")
    torch.testing.assert_close(got, model(tokens, lengths, s).double())


@torch.no_grad()
def test_random_window_is_upstreams_mixture(model) -> None:
    tokens, lengths = _batch([LONG, "ACDEF"])
    s = torch.tensor([3, 1])
    gen = torch.Generator().manual_seed(5)
    got = denoiser_log_q(model, tokens, lengths, s, "random", gen)
    u = torch.rand(2, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    start = math.floor(float(u[0]) * (22 - 8))
    torch.testing.assert_close(got.exp().sum(1), torch.ones(2, dtype=torch.float64))
    row = got[0]
    outside = [i for i in range(22) if not start <= i < start + 8]
    torch.testing.assert_close(row[outside], torch.full((14,), -math.log(22), dtype=torch.float64))
    win = model(*_batch([LONG[start : start + 8]]), torch.tensor([3]))[0].double()
    torch.testing.assert_close(row[start : start + 8], win + math.log(8 / 22))
    short = model(*_batch(["ACDEF"]), torch.tensor([1]))[0].double()  # a short row in the batch
    torch.testing.assert_close(got[1, :5], short, rtol=1e-5, atol=1e-5)
    assert torch.isinf(got[1, 5:]).all()


@torch.no_grad()
def test_scoring_averages_evenly_spaced_windows(model) -> None:
    starts = average_starts(22, 8)
    assert starts[0] == 0 and starts[-1] == 14 and len(starts) == math.ceil(2 * 22 / 8)
    tokens, lengths = _batch([LONG])
    got = denoiser_log_q(model, tokens, lengths, torch.tensor([2]), "average")[0]
    expected = np.zeros(22)
    for st in starts:
        win = model(*_batch([LONG[st : st + 8]]), torch.tensor([2]))[0].double().exp().numpy()
        mix = np.full(22, 1 / 22)
        mix[st : st + 8] = win * 8 / 22
        expected += mix / len(starts)
    np.testing.assert_allclose(got.exp().numpy(), expected, rtol=1e-5)
    # the single-deletion scan of a long WT reads the averaged windows
    scores = score_path(model, LONG, [LONG[1:]])
    assert scores[0] == pytest.approx(float(got[0]))


def test_window_must_be_positive() -> None:
    from bio_scisor.lit_module import ScisorLitModule

    with pytest.raises(ValueError, match="window_size"):
        ScisorLitModule(window_size=0, **TINY)
    assert ScisorLitModule(window_size=None, **TINY).denoiser.window_size is None


def test_training_loss_reads_random_windows() -> None:
    from bio_scisor.elbo import per_sequence_loss
    from bio_scisor.insertion import insert

    torch.manual_seed(0)
    model = ScisorDenoiser(**TINY, window_size=8)
    x0, x0_len = _batch([LONG, "ACDEFGHIK"])
    noised = insert(x0, x0_len, torch.Generator().manual_seed(0), t_max=0.5)
    assert int(noised.xt_len.max()) > 8
    loss, kl = per_sequence_loss(model, x0, x0_len, noised, t_max=0.5)
    assert torch.isfinite(loss).all() and (kl >= 0).all()
    loss.sum().backward()
    assert model.head.weight.grad is not None and model.head.weight.grad.abs().sum() > 0
