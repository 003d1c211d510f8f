from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from llm_methods.mbok.model import BooleanLinear, bits_per_weight, pack_bits, svid, unpack_bits


def test_pack_roundtrip_and_size() -> None:
    g = torch.Generator().manual_seed(0)
    signs = torch.where(torch.randn(5, 13, generator=g) > 0, 1.0, -1.0)
    packed = pack_bits(signs)
    assert packed.dtype == torch.uint8 and packed.shape == (5, 2)
    assert torch.equal(unpack_bits(packed, 13), signs)


def test_svid_residual_error_falls_with_kernels() -> None:
    g = torch.Generator().manual_seed(1)
    w = torch.randn(32, 48, generator=g)
    errors = []
    for k in (1, 2, 3):
        approx = sum(b * torch.outer(o, i) for b, o, i in svid(w, k))
        errors.append(float((w - approx).norm() / w.norm()))
    assert errors[0] < 0.8 and errors[2] < errors[1] < errors[0]
    ((b, o, i),) = svid(torch.outer(torch.tensor([1.0, -2.0]), torch.tensor([3.0, 1.0])), 1)
    assert torch.allclose(
        b * torch.outer(o, i), torch.tensor([[3.0, 1.0], [-6.0, -2.0]]), atol=1e-5
    )
    with pytest.raises(ValueError, match="K must be >= 1"):
        svid(w, 0)


def test_boolean_linear_matches_reconstruction_and_saves(tmp_path) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    lin = nn.Linear(64, 24)
    layer = BooleanLinear.from_linear(lin, 2)
    x = torch.randn(3, 64)
    dense = sum(b * torch.outer(o, i) for b, o, i in svid(lin.weight, 2))
    assert torch.allclose(layer(x), x @ dense.T + lin.bias, atol=1e-4)
    assert layer.stored_bytes() < lin.weight.numel() * 4 / 4  # packed 2 kernels << fp32
    save_file(dict(layer.state_dict()), str(tmp_path / "b.safetensors"))
    loaded = load_file(str(tmp_path / "b.safetensors"))
    again = BooleanLinear(loaded["packed"], loaded["s_out"], loaded["s_in"], 64, loaded["bias"])
    assert torch.allclose(again(x), layer(x))
    assert bits_per_weight(24, 64, 2) == pytest.approx(2 + 2 * 88 * 16 / (24 * 64))


def test_boolean_optimizer_flips_towards_lower_loss() -> None:
    from llm_methods.mbok.optim import BooleanOptimizer

    g = torch.Generator().manual_seed(0)
    target = torch.where(torch.randn(40, generator=g) > 0, 1.0, -1.0)
    w = torch.where(torch.randn(40, generator=g) > 0, 1.0, -1.0).requires_grad_()
    opt = BooleanOptimizer([w], lr=0.3)
    start = int((w != target).sum())
    for _ in range(20):
        opt.zero_grad()
        ((w - target) ** 2).sum().backward()
        opt.step()
    assert start > 5 and int((w != target).sum()) == 0
    assert set(w.detach().unique().tolist()) <= {-1.0, 1.0}
    assert opt.state_bytes() == 40 * 4  # one fp32 accumulator per weight (Adam: 2 + latent)
    with pytest.raises(ValueError, match="only ±1"):
        BooleanOptimizer([torch.tensor([0.5, 1.0])])
    with pytest.raises(ValueError, match="> 0"):
        BooleanOptimizer([w], lr=0.0)


def test_boolean_flip_rule_hand_derived() -> None:
    """BOLD's rule on fixed tensors (hand-derived; the public BOLD-style optimisers use the same
    threshold M·W >= 1 on {0, 1} weights as M·(2W - 1) >= 1): M <- beta M + eta Q, flip where
    M·W >= 1, reset M there, beta <- 1 - (fraction of the tensor flipped)."""
    from llm_methods.mbok.optim import BooleanOptimizer

    w = torch.tensor([1.0, 1.0, -1.0, -1.0])
    opt = BooleanOptimizer([w], lr=0.5, normalize=False)
    w.grad = torch.tensor([3.0, 1.0, -2.0, 4.0])
    # M = 0.5 Q = [1.5, 0.5, -1.0, 2.0]; M·W = [1.5, 0.5, 1.0, -2.0] -> flip weights 0 and 2
    assert opt.step() == 2
    assert w.tolist() == [-1.0, 1.0, 1.0, -1.0]
    assert opt.accum[0].tolist() == [0.0, 0.5, 0.0, 2.0] and opt.betas == [0.5]
    w.grad = torch.tensor([1.0, 1.0, 1.0, -1.0])
    # M = 0.5 M + 0.5 Q = [0.5, 0.75, 0.5, 0.5]; M·W = [-0.5, 0.75, 0.5, -0.5]: none flips
    assert opt.step() == 0 and opt.betas == [1.0]
    assert opt.accum[0].tolist() == [0.5, 0.75, 0.5, 0.5]
    w.grad = torch.tensor([0.0, 1.0, 0.0, -4.0])
    # M = [0.5, 1.25, 0.5, -1.5]; M·W = [-0.5, 1.25, 0.5, 1.5] -> flip weights 1 and 3
    assert opt.step() == 2 and w.tolist() == [-1.0, -1.0, 1.0, 1.0]
    # normalised: Q / mean|Q| makes eta scale-free (Q and 1000 Q give the same flips)
    flips = []
    for factor in (1.0, 1000.0):
        v = torch.tensor([1.0, -1.0, 1.0, -1.0])
        opt = BooleanOptimizer([v], lr=0.5)
        v.grad = factor * torch.tensor([4.0, -1.0, 1.0, 2.0])  # mean |Q| = 2: q = [2, -.5, .5, 1]
        opt.step()
        flips.append(v.tolist())
    assert flips[0] == flips[1] == [-1.0, -1.0, 1.0, -1.0]  # M·W = [1, .25, .25, -.5]
