"""SUIT's own formulas on worked examples with hand-computed numbers, and their properties
(issue 40: ``test_reference_rome_memit_alphaedit.py``, then named ``test_reference_suit.py``,
checks ROME / MEMIT / AlphaEdit against the official code and stayed green when SUIT's δ′ was
halved and its subject-basis projection zeroed; each test here names the mutation it fails for).
The editor's wiring of these formulas (``Editor(..., "suit")``) is tested in
``test_suit_editing.py``.

Equations (``suit/editors.py`` and ``suit/keys.py`` docstrings): δ′ = (hᵀw₂ − hᵀw₁)w₁ +
(hᵀw₁ − hᵀw₂)w₂; SUIT's keys k′ = (I − UUᵀ)k; its update ΔW = AlphaEdit's update on k′, times
(I − UUᵀ); U_m: the left singular vectors of the subject keys reaching energy τ; AlphaEdit's P:
the eigenvectors of C below the threshold."""

from __future__ import annotations

import pytest
import torch

from llm_methods.suit.editors import (
    _suit_delta,
    null_space_projector,
    null_space_share,
    project_out,
    projected_update,
)
from llm_methods.suit.keys import subject_subspace


def test_suit_delta_worked_example() -> None:
    """h = (1, 2), w₁ = (1, 0), w₂ = (0, 1): hᵀw₂ − hᵀw₁ = 1, so δ′ = 1·w₁ − 1·w₂ = (1, −1).
    Fails for a halved δ′ (0.5, −0.5) or a sign flip."""
    h = torch.tensor([[1.0, 2.0]])
    got = _suit_delta(h, torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]))
    assert torch.equal(got, torch.tensor([[1.0, -1.0]]))
    # second row: h = (3, 0.5), w₁ = (0.5, 1), w₂ = (2, −1): hᵀw₁ = 2, hᵀw₂ = 5.5, a = 3.5
    # δ′ = 3.5·(0.5, 1) − 3.5·(2, −1) = (1.75 − 7, 3.5 + 3.5) = (−5.25, 7)
    got = _suit_delta(
        torch.tensor([[3.0, 0.5]]), torch.tensor([0.5, 1.0]), torch.tensor([2.0, -1.0])
    )
    assert torch.allclose(got, torch.tensor([[-5.25, 7.0]]))


def test_suit_delta_is_rank_one_along_w1_minus_w2() -> None:
    """δ′ = −(hᵀ(w₁ − w₂))(w₁ − w₂) for every h: all rows are multiples of w₁ − w₂."""
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(5, 4, generator=gen, dtype=torch.float64)
    w1, w2 = (
        torch.randn(4, generator=gen, dtype=torch.float64),
        torch.randn(4, generator=gen, dtype=torch.float64),
    )
    d = w1 - w2
    assert torch.allclose(_suit_delta(h, w1, w2), -(h @ d)[:, None] * d, atol=1e-12)


def test_project_out_worked_example() -> None:
    """U = e₁: k = (3, 4) -> k′ = (0, 4); U = (1, 1)/√2: k = (3, 1) -> k − 2·(1, 1) = (1, −1).
    Fails when the subject-basis projection is zeroed (k′ = k)."""
    k = torch.tensor([[3.0, 4.0]])
    assert torch.equal(project_out(k, torch.tensor([[1.0], [0.0]])), torch.tensor([[0.0, 4.0]]))
    u = torch.tensor([[1.0], [1.0]]) / 2**0.5
    assert torch.allclose(project_out(torch.tensor([[3.0, 1.0]]), u), torch.tensor([[1.0, -1.0]]))


def test_projected_update_worked_example_suit_vs_alphaedit() -> None:
    """One key k = (1, 1), residual r = 2, P = I, no earlier edits, α = 1.

    AlphaEdit: (KᵀK + I) = [[2, 1], [1, 2]], KᵀR = (2, 2) -> ΔW = (2/3, 2/3).
    SUIT with U = e₁: k′ = (0, 1), (k′ᵀk′ + I) = diag(1, 2), k′ᵀR = (0, 2) -> ΔW = (0, 1); times
    (I − UUᵀ) stays (0, 1), so ΔW k = 1 and ΔW e₁ = 0.
    Fails when SUIT's projection is zeroed (SUIT's ΔW would be AlphaEdit's)."""
    k, r = torch.tensor([[1.0, 1.0]]), torch.tensor([[2.0]])
    p, cache = torch.eye(2), torch.zeros(2, 2)
    alpha = projected_update(k, r, p, cache, 1.0)
    assert torch.allclose(alpha, torch.tensor([[2 / 3, 2 / 3]], dtype=torch.float64))
    u = torch.tensor([[1.0], [0.0]])
    suit = projected_update(project_out(k, u), r, p, cache, 1.0, u)
    assert torch.allclose(suit, torch.tensor([[0.0, 1.0]], dtype=torch.float64))


def test_projected_update_null_space_and_cache_worked_example() -> None:
    """P = diag(0, 1) (first direction is C's range): the update cannot write along e₁:
    k = (1, 1), r = 2, α = 1: (P KᵀK + I) = [[1, 0], [1, 2]], P KᵀR = (0, 2) -> ΔW = (0, 1).
    An earlier edit's cache K_pᵀK_p = diag(0, 3): [[1, 0], [1, 5]] -> ΔW = (0, 0.4)."""
    k, r, p = (
        torch.tensor([[1.0, 1.0]]),
        torch.tensor([[2.0]]),
        torch.diag(torch.tensor([0.0, 1.0])),
    )
    got = projected_update(k, r, p, torch.zeros(2, 2), 1.0)
    assert torch.allclose(got, torch.tensor([[0.0, 1.0]], dtype=torch.float64))
    got = projected_update(k, r, p, torch.diag(torch.tensor([0.0, 3.0])), 1.0)
    assert torch.allclose(got, torch.tensor([[0.0, 0.4]], dtype=torch.float64))


def test_suit_update_leaves_the_subject_subspace_and_its_complement_as_specified() -> None:
    """Properties on random data: ΔW U = 0 (keys inside the subject subspace map as before),
    ΔW k = ΔW k′ (the update reads only the component outside U), and the update is not zero
    (the edit does something). Fails when the projection ΔW(I − UUᵀ) is dropped."""
    gen = torch.Generator().manual_seed(1)
    d_ff, d, n = 6, 3, 2
    keys = torch.randn(n, d_ff, generator=gen, dtype=torch.float64)
    resid = torch.randn(n, d, generator=gen, dtype=torch.float64)
    u = torch.linalg.qr(torch.randn(d_ff, 2, generator=gen, dtype=torch.float64)).Q
    k_suit = project_out(keys, u)
    delta = projected_update(k_suit, resid, torch.eye(d_ff), torch.zeros(d_ff, d_ff), 0.1, u)
    assert torch.allclose(delta @ u, torch.zeros(d, 2, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(delta @ keys.T, delta @ k_suit.T, atol=1e-10)
    assert delta.abs().max() > 1e-3
    alpha = projected_update(keys, resid, torch.eye(d_ff), torch.zeros(d_ff, d_ff), 0.1)
    assert (alpha @ u).abs().max() > 1e-3  # AlphaEdit does write along U: the test can fail


def test_subject_subspace_worked_example() -> None:
    """Keys (3, 0, 0) and (0, 1, 0): σ² = 9, 1, energy 0.9 after one direction. τ = 0.4 -> m = 1
    (±e₁); τ = 0.95 -> m = 2."""
    keys = torch.tensor([[3.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    one = subject_subspace(keys, 0.4)
    assert one.shape == (3, 1) and torch.allclose(one.abs()[:, 0], torch.tensor([1.0, 0.0, 0.0]))
    assert subject_subspace(keys, 0.95).shape == (3, 2)
    with pytest.raises(ValueError, match="tau"):
        subject_subspace(keys, 1.0)


def test_null_space_projector_and_share_worked_example() -> None:
    """C = diag(1, 0.01), threshold 0.02 (absolute): P = diag(0, 1); keys (1, 1) have half their
    energy in C's null space, (0, 2) all of it, (3, 0) none; relative threshold 0.02 × 1 agrees."""
    c = torch.diag(torch.tensor([1.0, 0.01]))
    p = null_space_projector(c, 2e-2)
    assert torch.allclose(p, torch.diag(torch.tensor([0.0, 1.0])), atol=1e-7)
    assert null_space_share(torch.tensor([[1.0, 1.0]]), p) == pytest.approx(0.5)
    assert null_space_share(torch.tensor([[0.0, 2.0], [3.0, 0.0]]), p) == pytest.approx(0.5)
    assert torch.allclose(null_space_projector(c, 2e-2, relative=True), p, atol=1e-7)
