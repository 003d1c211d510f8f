"""Recognition and OOD metrics as the paper reports them."""

from __future__ import annotations

import numpy as np

__all__ = ["accuracy", "auroc", "fpr_at_95_tpr", "msp"]


def msp(scores: np.ndarray) -> np.ndarray:
    """Max-softmax OOD score ``[N]`` of refined class scores ``[N, C]`` (higher = more ID): the
    scores are non-negative probabilities, so the rows are renormalised to sum to 1 and the max
    taken (the softmax of log-probabilities)."""
    s = np.clip(np.asarray(scores, dtype=np.float64), 0.0, None)
    total = s.sum(axis=1, keepdims=True)
    s = np.where(total > 0, s / np.where(total > 0, total, 1.0), 1.0 / s.shape[1])
    return s.max(axis=1)


def accuracy(scores: np.ndarray, labels: np.ndarray) -> float:
    """Top-1 accuracy of argmax ``scores`` ``[N, C]`` against ``labels`` ``[N]``."""
    labels = np.asarray(labels)
    return (
        float((np.asarray(scores).argmax(axis=1) == labels).mean()) if len(labels) else float("nan")
    )


def auroc(id_score: np.ndarray, is_id: np.ndarray) -> float:
    """AUROC with ID as the positive class (higher score = more ID)."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(np.asarray(is_id, dtype=int), id_score))


def fpr_at_95_tpr(id_score: np.ndarray, is_id: np.ndarray) -> float:
    """FPR95: the false-positive rate at the first ROC threshold where TPR >= 0.95 (ID positive)."""
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(np.asarray(is_id, dtype=int), id_score)
    return float(fpr[int(np.argmax(tpr >= 0.95))])
