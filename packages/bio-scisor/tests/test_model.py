from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bio_scisor.insertion import pad_batch
from bio_scisor.io import encode
from bio_scisor.model import EsmDenoiser, ScisorDenoiser, build_denoiser

from .conftest import TINY


def _batch(seqs):
    return pad_batch([torch.from_numpy(encode(s)) for s in seqs])


@pytest.mark.parametrize("bsz", [1, 3])
@pytest.mark.parametrize("kwargs", [TINY, dict(d_model=32, n_layers=2, n_heads=4, d_ff=64)])
def test_output_is_a_log_distribution_over_positions(bsz: int, kwargs) -> None:
    torch.manual_seed(0)
    model = ScisorDenoiser(**kwargs).eval()
    seqs = ["ACDEFG", "KLM", "WYWYWYWY"][:bsz]
    tokens, lengths = _batch(seqs)
    out = model(tokens, lengths, torch.arange(1, bsz + 1))
    assert out.shape == tokens.shape  # batch size 1 keeps its batch dimension
    torch.testing.assert_close(out.exp().sum(1), torch.ones(bsz))
    for b, s in enumerate(seqs):
        assert torch.isinf(out[b, len(s) :]).all() and torch.isfinite(out[b, : len(s)]).all()


def test_padding_does_not_change_the_output() -> None:
    torch.manual_seed(0)
    model = ScisorDenoiser(**TINY).eval()
    alone = model(*_batch(["ACDEF"]), torch.tensor([2]))
    padded = model(*_batch(["ACDEF", "ACDEFGHIKLMN"]), torch.tensor([2, 5]))
    torch.testing.assert_close(alone[0], padded[0, :5], rtol=1e-5, atol=1e-5)


def test_film_starts_at_identity_and_then_conditions_on_s() -> None:
    torch.manual_seed(0)
    model = ScisorDenoiser(**TINY).eval()
    tokens, lengths = _batch(["ACDEFGHIK"] * 2)
    same = model(tokens, lengths, torch.tensor([1, 30]))
    torch.testing.assert_close(same[0], same[1])  # zero-initialised FiLM: S has no effect yet
    for film in model.film.films:
        torch.nn.init.normal_(film.weight, std=0.5)
    diff = model(tokens, lengths, torch.tensor([1, 30]))
    assert not torch.allclose(diff[0], diff[1])


def test_esm_backbone_from_a_local_folder(tiny_esm_dir: Path) -> None:
    torch.manual_seed(0)
    model = build_denoiser("esm", str(tiny_esm_dir), cond_dim=8)
    assert isinstance(model, EsmDenoiser)
    tokens, lengths = _batch(["ACDEFG", "KLM"])
    out = model(tokens, lengths, torch.tensor([1, 4]))
    assert out.shape == (2, 6)
    torch.testing.assert_close(out.exp().sum(1), torch.ones(2))
    assert torch.isinf(out[1, 3:]).all()
    out.logsumexp(1).sum().backward()  # gradients reach the backbone and FiLM
    for film in model.film.films:
        torch.nn.init.normal_(film.weight, std=0.5)
    a = model(tokens[:1], lengths[:1], torch.tensor([1]))
    b = model(tokens[:1], lengths[:1], torch.tensor([9]))
    assert not torch.allclose(a, b)  # the FiLM hooks modulate the ESM layers


def test_esm_path_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match="esm_path"):
        build_denoiser("esm", None)
    with pytest.raises(FileNotFoundError, match=r"config\.json"):
        build_denoiser("esm", str(tmp_path))
    with pytest.raises(ValueError, match="unknown backbone"):
        build_denoiser("gpt")
