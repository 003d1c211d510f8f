from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pointcloud_pgllm.graph import build_graph, propagate
from pointcloud_pgllm.metrics import msp


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(4, 20),
    c=st.integers(1, 5),
    k=st.integers(1, 3),
    seed=st.integers(0, 10_000),
    alpha=st.floats(0.0, 1.0),
)
def test_propagation_keeps_scores_non_negative_and_bounded(
    n: int, c: int, k: int, seed: int, alpha: float
) -> None:
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(n, 3, generator=g)
    s0 = torch.rand(n, c, generator=g)
    assert (propagate(s0, build_graph(feats, k, "official"), alpha, 5) >= 0).all()
    graph = build_graph(feats, k, "symmetric")
    s = propagate(s0, graph, alpha, 5)
    assert (s >= 0).all()
    # ||Ŵ||_2 <= 1 for the symmetric normalisation (not for the official operator, whose D is
    # the row sums of the asymmetric knn), so ||S_T|| stays within ||S_0||
    assert float(s.norm()) <= float(s0.norm()) * (1 + 1e-5)
    if alpha == 0.0:
        torch.testing.assert_close(s, s0)


@settings(max_examples=50, deadline=None)
@given(
    rows=st.lists(st.lists(st.floats(0.0, 100.0), min_size=3, max_size=3), min_size=1, max_size=8)
)
def test_msp_lies_between_uniform_and_one(rows: list[list[float]]) -> None:
    m = msp(np.asarray(rows))
    assert ((m >= 1 / 3 - 1e-12) & (m <= 1 + 1e-12)).all()
