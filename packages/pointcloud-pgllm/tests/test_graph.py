from __future__ import annotations

import numpy as np
import pytest
import torch

from pointcloud_pgllm.graph import build_graph, dense_adjacency, nearest_neighbours, propagate


@pytest.fixture
def feats() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(12, 5)


def _official_dense(feats: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
    """W and D^-1/2 as the official AUROC.py / ACC.py build them, with sklearn (independent of
    our nearest_neighbours): knn rows exp(-d) of the k nearest others, diagonal 1."""
    from sklearn.neighbors import NearestNeighbors

    x = feats.double().numpy()
    dist, idx = NearestNeighbors(n_neighbors=k + 1).fit(x).kneighbors(x)
    knn = np.zeros((len(x), len(x)))
    knn[np.arange(len(x)).repeat(k), idx[:, 1:].reshape(-1)] = np.exp(-dist[:, 1:].reshape(-1))
    np.fill_diagonal(knn, 1.0)
    return knn + knn.T, np.diag(1.0 / np.sqrt(knn.sum(1)))


@pytest.mark.parametrize("k", [3, 10])
def test_official_graph_has_diagonal_two_and_its_own_degree(feats: torch.Tensor, k: int) -> None:
    """Issue 22: the official W = knn + knnᵀ has diagonal 2, D the row sums of knn."""
    g = build_graph(feats, k, "official")
    w = dense_adjacency(g)
    w_ref, d_ref = _official_dense(feats, k)
    torch.testing.assert_close(torch.diagonal(w), torch.full((12,), 2.0))
    np.testing.assert_allclose(w.double().numpy(), w_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.degree.double().numpy() ** -0.5, np.diag(d_ref), rtol=1e-5)
    s0 = np.random.default_rng(0).random((12, 4))
    a_hat = d_ref @ w_ref @ d_ref
    s = s0.copy()
    for _ in range(5):
        s = 0.5 * a_hat @ s + 0.5 * s0
    np.testing.assert_allclose(propagate(torch.as_tensor(s0), g).double().numpy(), s, rtol=1e-5)
    # ours differs: diagonal 1 and the degree of the symmetric W
    sym = propagate(torch.as_tensor(s0), build_graph(feats, k, "symmetric")).double().numpy()
    assert np.abs(sym - s).max() > 1e-3


def test_symmetric_graph_is_exp_weighted_with_unit_diagonal(feats: torch.Tensor) -> None:
    w = dense_adjacency(build_graph(feats, 3, "symmetric"))
    torch.testing.assert_close(w, w.T)
    torch.testing.assert_close(torch.diagonal(w), torch.ones(12))
    # W = knn + knn^T: entry (i, j) is exp(-d) once per direction that lists j among i's 3-NN
    idx, dist = nearest_neighbours(feats, 3)
    knn = torch.zeros(12, 12)
    knn.scatter_(1, idx, torch.exp(-dist))
    expected = knn + knn.T + torch.eye(12)
    torch.testing.assert_close(w, expected)


def test_paper_graph_uses_cosine_similarity(feats: torch.Tensor) -> None:
    w = dense_adjacency(build_graph(feats, 2, "paper"))
    assert torch.diagonal(w).abs().sum() == 0
    n = torch.nn.functional.normalize(feats, dim=1)
    cos = n @ n.T
    i, j = (w > 0).nonzero()[0].tolist()
    c = float(cos[i, j].clamp_min(0))
    assert float(w[i, j]) == pytest.approx(c, abs=1e-6) or float(w[i, j]) == pytest.approx(
        2 * c, abs=1e-6
    )


def test_graph_validation(feats: torch.Tensor) -> None:
    with pytest.raises(ValueError, match="k must be in"):
        build_graph(feats, 12)
    with pytest.raises(ValueError, match="graph variant"):
        build_graph(feats, 3, "dense")


def test_propagate_matches_the_dense_formula(feats: torch.Tensor) -> None:
    g = build_graph(feats, 4, "symmetric")
    s0 = torch.rand(12, 3)
    w = dense_adjacency(g)
    d = w.sum(1).rsqrt()
    w_hat = d[:, None] * w * d[None, :]
    s = s0.clone()
    for _ in range(5):
        s = 0.5 * w_hat @ s + 0.5 * s0
    torch.testing.assert_close(propagate(s0, g), s)
    torch.testing.assert_close(propagate(s0, g, steps=0), s0)


def test_propagate_equals_pyg_label_propagation(feats: torch.Tensor) -> None:
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    from torch_geometric.nn.models import LabelPropagation

    g = build_graph(feats, 4, "symmetric")
    labels = torch.tensor([0, 1, 2] * 4)
    mask = torch.zeros(12, dtype=torch.bool)
    mask[:5] = True
    s0 = torch.zeros(12, 3)
    s0[mask] = torch.nn.functional.one_hot(labels[mask], 3).float()
    # PyG normalises only when no weights are given: pass D^-1/2 W D^-1/2 from its own gcn_norm
    ei, norm = gcn_norm(g.edge_index, g.edge_weight, 12, add_self_loops=False)
    ref = LabelPropagation(num_layers=5, alpha=0.5)(
        labels, ei, mask=mask, edge_weight=norm, post_step=lambda y: y
    )
    torch.testing.assert_close(propagate(s0, g, 0.5, 5), ref)


def test_propagate_converges_to_sklearn_label_spreading(feats: torch.Tensor) -> None:
    """Without self-loops (LabelSpreading drops the diagonal) and many steps, the row-normalised
    fixed point equals sklearn's closed-form label distributions."""
    from sklearn.semi_supervised import LabelSpreading

    g = build_graph(feats, 4, "paper")
    w = dense_adjacency(g).double().numpy()
    y = np.array([0, 1, 2, -1, -1, -1, 0, -1, -1, 1, -1, 2])
    model = LabelSpreading(kernel=lambda a, b: w, alpha=0.5, max_iter=500, tol=1e-12).fit(
        np.zeros((12, 1)), y
    )
    s0 = torch.zeros(12, 3, dtype=torch.float64)
    s0[y >= 0, y[y >= 0]] = 1.0
    s = propagate(s0, g, 0.5, 200).double().numpy()
    np.testing.assert_allclose(s / s.sum(1, keepdims=True), model.label_distributions_, atol=1e-5)
