"""ProteinGym-style summary: Spearman per assay, averaged within coarse_selection_type, then
across types, with a bootstrap standard error (variants resampled within each assay)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from scipy.stats import spearmanr

__all__ = ["proteingym_summary", "spearman"]


def spearman(scores: np.ndarray, truth: np.ndarray) -> float:
    """Spearman's rho (NaN-free: a constant input gives 0.0)."""
    scores, truth = np.asarray(scores, float), np.asarray(truth, float)
    if len(scores) < 2 or np.ptp(scores) == 0 or np.ptp(truth) == 0:
        return 0.0
    return float(spearmanr(scores, truth).statistic)


def _summary(rhos: Sequence[float], types: Sequence[str]) -> float:
    groups: dict[str, list[float]] = defaultdict(list)
    for rho, kind in zip(rhos, types, strict=True):
        groups[kind].append(rho)
    return float(np.mean([np.mean(v) for v in groups.values()]))


def proteingym_summary(
    assays: Sequence[tuple[np.ndarray, np.ndarray, str]], n_boot: int = 200, seed: int = 0
) -> dict[str, float]:
    """``assays``: (scores, DMS_scores, coarse_selection_type) per assay.

    Returns {"spearman": summary, "se": bootstrap standard error}.
    """
    types = [kind for _, _, kind in assays]
    value = _summary([spearman(s, y) for s, y, _ in assays], types)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        rhos = []
        for s, y, _ in assays:
            idx = rng.integers(0, len(s), len(s))
            rhos.append(spearman(np.asarray(s)[idx], np.asarray(y)[idx]))
        boots.append(_summary(rhos, types))
    return {"spearman": value, "se": float(np.std(boots, ddof=1)) if n_boot > 1 else 0.0}
