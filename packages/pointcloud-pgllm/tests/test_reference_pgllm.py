"""Reference check (issue 22): our ``graph="official"`` operator reproduces the official
``AUROC.py`` propagation on fixed inputs (numbers in ``data/reference``, see its README)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

from pointcloud_pgllm.graph import build_graph, propagate
from pointcloud_pgllm.metrics import fpr_at_95_tpr

REF = json.loads(
    (Path(__file__).parent / "data" / "reference" / "official_auroc_k3.json").read_text()
)


def test_official_operator_reproduces_official_auroc_propagation() -> None:
    feats = torch.tensor(REF["features"], dtype=torch.float32)
    s0 = torch.tensor(REF["scores_s0"], dtype=torch.float64).unsqueeze(1)
    graph = build_graph(feats, REF["k"], "official")
    ours = propagate(s0, graph, REF["alpha"], REF["steps"]).double().numpy()[:, 0]
    np.testing.assert_allclose(ours, REF["propagated"], rtol=2e-5, atol=1e-6)
    is_id = np.asarray(REF["is_id"], dtype=bool)
    assert roc_auc_score(is_id, ours) == REF["auroc"]
    assert fpr_at_95_tpr(ours, is_id) == 0.9  # printed by the official script: FPR95 0.9000


def test_our_symmetric_operator_differs_from_the_official_one() -> None:
    """The pre-issue-22 operator (diagonal 1, D of the symmetric W) is not the official one."""
    feats = torch.tensor(REF["features"], dtype=torch.float32)
    s0 = torch.tensor(REF["scores_s0"]).unsqueeze(1)
    ours = propagate(s0, build_graph(feats, REF["k"], "symmetric")).double().numpy()[:, 0]
    assert np.abs(ours - np.asarray(REF["propagated"])).max() > 1e-2
