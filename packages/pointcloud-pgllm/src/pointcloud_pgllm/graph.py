"""The point graph over the support set and the label-propagation score refinement.

Three graph variants (PyG ``edge_index`` / ``edge_weight``), selectable by name:

- ``"official"`` (the reproduction default): the official ``ACC.py`` / ``AUROC.py`` operator
  exactly. ``knn`` [N, N] holds ``exp(-d)`` of each node's K Euclidean nearest other nodes (row
  i, K = 10 in ``ACC.py``, K = 3 in ``AUROC.py`` via ``n_neighbors=4``) and 1 on the diagonal;
  ``W = knn + knnᵀ`` (so the diagonal is 2) and ``D = diag(knn.sum(1))``, the row sums of the
  asymmetric ``knn``, not of W. ``Ŵ = D^{-1/2} W D^{-1/2}`` is then not degree-normalised.
- ``"symmetric"`` (ours, kept as an option): the same k-NN edges, W = knn + knnᵀ with diagonal 1
  and D the degree of that symmetric W, so ``Ŵ`` is the usual symmetric normalisation.
- ``"paper"``: cosine similarity top-K (paper K = 3, best K = 7 on MN40), weight = the cosine
  similarity clamped at 0, symmetrised as W + Wᵀ, no self-loops, D the degree of W.

Refinement (paper Eq. for PGLLM's propagation): ``S_t = a Ŵ S_{t-1} + (1 - a) S_0``, a = 0.5,
T = 5; ``S_0`` is ``[N, C]``. For "symmetric" / "paper" ``torch_geometric.nn.LabelPropagation``
computes the same iteration (tests).
"""

from __future__ import annotations

import torch

from pointcloud_pgllm._pyg import Data, add_self_loops, to_undirected
from pointcloud_pgllm.constants import PROPAGATION_ALPHA, PROPAGATION_STEPS

__all__ = ["GRAPH_VARIANTS", "build_graph", "dense_adjacency", "nearest_neighbours", "propagate"]

GRAPH_VARIANTS = ("official", "symmetric", "paper")


def nearest_neighbours(
    features: torch.Tensor, k: int, metric: str = "euclidean"
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` nearest other nodes of each node: indices ``[N, k]`` and distances ``[N, k]``
    (Euclidean distance, or ``1 - cosine`` for ``metric="cosine"``), nearest first."""
    n = features.shape[0]
    if not 1 <= k < n:
        raise ValueError(f"k must be in 1..{n - 1} for {n} nodes, got {k}")
    x = features.float()
    if metric == "cosine":
        x = torch.nn.functional.normalize(x, dim=1)
        dist = 1.0 - x @ x.T
    elif metric == "euclidean":
        dist = torch.cdist(x, x)
    else:
        raise ValueError(f"metric must be 'cosine' or 'euclidean', got {metric!r}")
    dist.fill_diagonal_(float("inf"))
    top = dist.topk(k, dim=1, largest=False)
    return top.indices, top.values.clamp_min(0.0)


def build_graph(features: torch.Tensor, k: int, variant: str = "official") -> Data:
    """PyG graph over ``features`` ``[N, D]``: ``edge_index`` [2, E], ``edge_weight`` [E], and
    for ``"official"`` the node attribute ``degree`` [N] (row sums of the asymmetric knn)."""
    if variant not in GRAPH_VARIANTS:
        raise ValueError(f"graph variant must be one of {GRAPH_VARIANTS}, got {variant!r}")
    n = features.shape[0]
    metric = "cosine" if variant == "paper" else "euclidean"
    index, dist = nearest_neighbours(features, k, metric)
    rows = torch.arange(n).repeat_interleave(index.shape[1])
    edge_index = torch.stack([rows, index.reshape(-1)])
    weight = (1.0 - dist).clamp_min(0.0) if variant == "paper" else torch.exp(-dist)
    degree = 1.0 + weight.sum(dim=1)  # official D: row sums of knn (its diagonal is 1)
    edge_index, weight = to_undirected(edge_index, weight.reshape(-1), num_nodes=n, reduce="add")
    if variant == "paper":
        return Data(edge_index=edge_index, edge_weight=weight, num_nodes=n)
    diagonal = 2.0 if variant == "official" else 1.0  # official: knn + knnᵀ of a unit diagonal
    edge_index, weight = add_self_loops(edge_index, weight, fill_value=diagonal, num_nodes=n)
    if variant == "official":
        return Data(edge_index=edge_index, edge_weight=weight, degree=degree, num_nodes=n)
    return Data(edge_index=edge_index, edge_weight=weight, num_nodes=n)


def dense_adjacency(graph: Data) -> torch.Tensor:
    """W as a dense ``[N, N]`` matrix (for tests and small graphs)."""
    n = int(graph.num_nodes)
    w = torch.zeros(n, n, dtype=graph.edge_weight.dtype)
    w.index_put_((graph.edge_index[0], graph.edge_index[1]), graph.edge_weight, accumulate=True)
    return w


def propagate(
    scores: torch.Tensor,
    graph: Data,
    alpha: float = PROPAGATION_ALPHA,
    steps: int = PROPAGATION_STEPS,
) -> torch.Tensor:
    """``S_T`` from ``S_0 = scores`` ``[N, C]``: ``S_t = a Ŵ S_{t-1} + (1 - a) S_0``,
    ``Ŵ = D^{-1/2} W D^{-1/2}`` (sparse; ``D`` the graph's own ``degree`` when it has one, as
    the official operator does, else the degree of the symmetric W)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    s0 = torch.as_tensor(scores, dtype=torch.float32)
    row, col = graph.edge_index
    weight = graph.edge_weight.to(s0.dtype)
    if getattr(graph, "degree", None) is not None:
        degree = graph.degree.to(s0.dtype)
    else:
        degree = torch.zeros(s0.shape[0], dtype=s0.dtype).index_add_(0, row, weight)
    inv_sqrt = degree.clamp_min(1e-12).rsqrt()
    norm = inv_sqrt[row] * weight * inv_sqrt[col]
    s = s0
    for _ in range(steps):
        spread = torch.zeros_like(s0).index_add_(0, row, norm.unsqueeze(1) * s[col])
        s = alpha * spread + (1.0 - alpha) * s0
    return s
