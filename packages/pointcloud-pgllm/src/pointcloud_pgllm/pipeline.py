"""The PGLLM pipeline: graph over the support set, in-context guidance, score refinement.

For support clouds with features ``[N, D]`` and captions ``[N]`` (PGLLM^T: the unlabelled test
set is the support set), :func:`pgllm_scores` returns the class scores ``[N, C]`` of the paper's
ablation ladder:

- ``none``: the scorer sees the query caption only (``S_0``);
- ``guidance``: the captions of the query's ``guidance_k`` (3) nearest graph neighbours are
  appended to the prompt, without labels;
- ``propagation``: ``S_0`` refined by label propagation on the graph;
- ``both``: the guided scores refined by propagation (full PGLLM).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from pointcloud_pgllm.constants import (
    GUIDANCE_NEIGHBOURS,
    PROPAGATION_ALPHA,
    PROPAGATION_K,
    PROPAGATION_STEPS,
)
from pointcloud_pgllm.graph import build_graph, nearest_neighbours, propagate
from pointcloud_pgllm.metrics import accuracy, auroc, fpr_at_95_tpr, msp
from pointcloud_pgllm.scorers import Query, Scorer

__all__ = [
    "ABLATIONS",
    "IDProbabilityScorer",
    "PGLLMConfig",
    "evaluate",
    "make_queries",
    "pgllm_scores",
]

ABLATIONS = ("none", "guidance", "propagation", "both")


@dataclass
class PGLLMConfig:
    """Graph variant and K, guidance neighbours, propagation a and T (defaults: official K = 10
    Euclidean graph, 3 guidance captions, a = 0.5, T = 5). ``normalize`` L2-normalises the
    features first, for the graph and the guidance neighbours: needed for our encoder's
    features, whose large norms make the official ``exp(-d)`` weights underflow to 0 (W would
    collapse to its diagonal). The official scripts use PointLLM's features raw, so
    ``api.classify`` / ``detect_ood`` (and the CLI) pass ``normalize=False`` with given features
    (README, Deviations)."""

    graph: str = "official"
    graph_k: int = PROPAGATION_K
    guidance_k: int = GUIDANCE_NEIGHBOURS
    alpha: float = PROPAGATION_ALPHA
    steps: int = PROPAGATION_STEPS
    normalize: bool = True  # L2-normalise features before the graph (see README, Deviations)
    timings: dict[str, float] = field(default_factory=dict)


def make_queries(captions: Sequence[str], neighbours: np.ndarray | None = None) -> list[Query]:
    """Queries from captions; ``neighbours`` ``[N, k]`` adds those nodes' captions as guidance."""
    if neighbours is None:
        return [Query(c) for c in captions]
    return [
        Query(c, tuple(captions[j] for j in row))
        for c, row in zip(captions, neighbours, strict=True)
    ]


#: Queries per ``scorer.score`` call while progress is shown.
SCORE_CHUNK = 16


def _score(
    scorer: Scorer,
    queries: list[Query],
    class_names: Sequence[str],
    description: str,
    quiet: bool,
) -> np.ndarray:
    """``scorer.score(queries, class_names)`` as float64 ``[N, C]``; with progress (not
    ``quiet``) in chunks of :data:`SCORE_CHUNK` queries."""
    if quiet or len(queries) <= SCORE_CHUNK:
        return np.asarray(scorer.score(queries, class_names), dtype=np.float64)
    from iclr26_common.progress import progress

    starts = range(0, len(queries), SCORE_CHUNK)
    parts = [
        np.asarray(scorer.score(queries[i : i + SCORE_CHUNK], class_names), dtype=np.float64)
        for i in progress(starts, description=f"{description} ({len(queries)} queries)")
    ]
    return np.concatenate(parts)


def pgllm_scores(
    features: torch.Tensor | np.ndarray,
    captions: Sequence[str],
    scorer: Scorer,
    class_names: Sequence[str],
    config: PGLLMConfig | None = None,
    ablations: Sequence[str] = ABLATIONS,
    quiet: bool = True,
) -> dict[str, np.ndarray]:
    """Scores ``[N, C]`` per requested ablation; ``config.timings`` gets seconds per stage.
    ``quiet=False`` shows progress of the scorer on stderr: the queries then go to
    ``scorer.score`` in chunks of :data:`SCORE_CHUNK` (every scorer here scores each query on
    its own, so the scores are the same)."""
    config = config or PGLLMConfig()
    unknown = [a for a in ablations if a not in ABLATIONS]
    if unknown:
        raise ValueError(f"unknown ablation {unknown[0]!r}; known: {', '.join(ABLATIONS)}")
    feats = torch.as_tensor(np.asarray(features), dtype=torch.float32)
    if config.normalize:
        feats = torch.nn.functional.normalize(feats, dim=1)
    if len(captions) != feats.shape[0]:
        raise ValueError(f"{len(captions)} captions for {feats.shape[0]} feature rows")
    timings = config.timings
    out: dict[str, np.ndarray] = {}
    graph = None
    if {"propagation", "both"} & set(ablations):
        t = time.perf_counter()
        graph = build_graph(feats, config.graph_k, config.graph)
        timings["graph_s"] = time.perf_counter() - t
    if {"none", "propagation"} & set(ablations):
        t = time.perf_counter()
        plain = _score(scorer, make_queries(captions), class_names, "scoring", quiet)
        timings["score_plain_s"] = time.perf_counter() - t
        out["none"] = plain
    if {"guidance", "both"} & set(ablations):
        t = time.perf_counter()
        metric = "cosine" if config.graph == "paper" else "euclidean"
        index, _ = nearest_neighbours(feats, config.guidance_k, metric)
        guided = _score(
            scorer, make_queries(captions, index.numpy()), class_names, "scoring guided", quiet
        )
        timings["score_guided_s"] = time.perf_counter() - t
        out["guidance"] = guided
    t = time.perf_counter()
    if graph is not None and "propagation" in ablations:
        out["propagation"] = (
            propagate(torch.as_tensor(out["none"]), graph, config.alpha, config.steps)
            .double()
            .numpy()
        )
    if graph is not None and "both" in ablations:
        out["both"] = (
            propagate(torch.as_tensor(out["guidance"]), graph, config.alpha, config.steps)
            .double()
            .numpy()
        )
    timings["propagate_s"] = time.perf_counter() - t
    return {name: out[name] for name in ablations}


class IDProbabilityScorer:
    """Adapter for the paper's single-probability OOD prompt: wraps a scorer with
    ``id_probability(queries, class_names) -> [N]`` (e.g. ``HTTPChatScorer``) as a one-column
    scorer ``[N, 1]``, so that guidance and propagation refine the ID probability itself."""

    def __init__(self, inner: Any) -> None:
        if not hasattr(inner, "id_probability"):
            raise ValueError(
                f"{type(inner).__name__} has no single-probability prompt (id_probability)"
            )
        self.inner = inner

    def score(self, queries: Sequence[Query], class_names: Sequence[str]) -> np.ndarray:
        return np.asarray(self.inner.id_probability(queries, class_names), dtype=np.float64)[
            :, None
        ]


def evaluate(
    scores: np.ndarray, labels: np.ndarray, id_score: np.ndarray | None = None
) -> dict[str, float]:
    """Recognition accuracy on the ID samples (``labels >= 0``) and OOD AUROC / FPR95 with ID
    positive (when both ID and OOD samples, ``labels == -1``, exist) of ``id_score`` (default:
    the max-softmax of ``scores``)."""
    labels = np.asarray(labels)
    is_id = labels >= 0
    result = {"accuracy": accuracy(scores[is_id], labels[is_id])}
    if is_id.any() and (~is_id).any():
        id_score = msp(scores) if id_score is None else np.asarray(id_score).reshape(-1)
        result["auroc"] = auroc(id_score, is_id)
        result["fpr95"] = fpr_at_95_tpr(id_score, is_id)
    return result
