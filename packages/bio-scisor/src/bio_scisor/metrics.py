"""Spearman and ProteinGym's summary of indel assays (``performance_DMS_benchmarks.py``,
``--indel_mode`` branch), so a user's numbers are comparable to the leaderboard:

1. Spearman(DMS_score, model score) per assay, rounded to 3 decimals (ProteinGym rounds the
   DMS-level table before it aggregates); a constant input gives NaN, which the means skip.
2. Mean over the assays of each (UniProt_ID, coarse_selection_type) pair.
3. Mean over the proteins within each coarse_selection_type.
4. Mean over the selection types: the reported average.

The standard error is ProteinGym's ``compute_bootstrap_standard_error_functional_categories``:
within each selection type, resample its (UniProt_ID, type) rows with replacement and take the
mean; average over the types; the standard deviation (ddof 1) over ``n_boot`` resamples
(10,000 in ProteinGym). ProteinGym bootstraps the *difference* to a reference model
(TranceptEVE_M for indels); pass ``reference`` (per-assay Spearman of that model) to do the same.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from scipy.stats import rankdata, spearmanr

__all__ = [
    "AssayScores",
    "assay_spearman",
    "clinical_auc",
    "clinical_summary",
    "proteingym_summary",
    "spearman",
]


def spearman(scores: np.ndarray, truth: np.ndarray) -> float:
    """Spearman's rho (NaN-free: a constant input gives 0.0; used by the experiment)."""
    scores, truth = np.asarray(scores, float), np.asarray(truth, float)
    if len(scores) < 2 or np.ptp(scores) == 0 or np.ptp(truth) == 0:
        return 0.0
    return float(spearmanr(scores, truth).statistic)


class AssayScores(NamedTuple):
    """One assay: model scores (N,), DMS scores (N,), coarse_selection_type, UniProt_ID."""

    scores: np.ndarray
    dms_scores: np.ndarray
    selection_type: str
    uniprot_id: str


def assay_spearman(scores: np.ndarray, truth: np.ndarray) -> float:
    """ProteinGym's per-assay value: spearmanr(DMS_score, score), NaN if undefined, 3 decimals."""
    scores, truth = np.asarray(scores, float), np.asarray(truth, float)
    if len(scores) < 2 or np.ptp(scores) == 0 or np.ptp(truth) == 0:
        return float("nan")
    return round(float(spearmanr(truth, scores).statistic), 3)


def _nanmean(values: Sequence[float] | np.ndarray) -> float:
    arr = np.asarray(values, dtype=float)
    return float(np.mean(arr[~np.isnan(arr)])) if (~np.isnan(arr)).any() else float("nan")


def proteingym_summary(
    assays: Sequence[AssayScores | tuple[np.ndarray, np.ndarray, str, str]],
    n_boot: int = 10_000,
    seed: int = 0,
    reference: Sequence[float] | None = None,
) -> dict[str, object]:
    """ProteinGym's indel summary of ``assays`` (see the module docstring).

    Returns {"spearman": average over selection types, "se": bootstrap SE (of the difference to
    ``reference`` when given), "by_type": {type: value}, "per_assay": [rho], "n_assays",
    "n_proteins"}.
    """
    items = [AssayScores(*a) for a in assays]
    if not items:
        raise ValueError("no assays to summarise")
    rhos = [assay_spearman(a.scores, a.dms_scores) for a in items]
    if reference is not None and len(reference) != len(items):
        raise ValueError(f"reference has {len(reference)} values for {len(items)} assays")
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, a in enumerate(items):
        groups[(a.uniprot_id, a.selection_type)].append(i)
    protein = {key: _nanmean([rhos[i] for i in idx]) for key, idx in groups.items()}
    by_type: dict[str, list[float]] = defaultdict(list)
    for (_, kind), value in protein.items():
        by_type[kind].append(value)
    type_means = {kind: _nanmean(v) for kind, v in by_type.items()}
    value = _nanmean(list(type_means.values()))
    # bootstrap over (UniProt_ID, type) rows within each type
    diff = dict(protein)
    if reference is not None:
        ref = {
            key: _nanmean([round(float(reference[i]), 3) for i in idx])
            for key, idx in groups.items()
        }
        diff = {key: protein[key] - ref[key] for key in protein}
    rng = np.random.default_rng(seed)
    total = np.zeros(n_boot)
    for kind in by_type:
        rows = np.array([diff[key] for key in diff if key[1] == kind], dtype=float)
        picks = rows[rng.integers(0, len(rows), size=(n_boot, len(rows)))]
        with warnings.catch_warnings():  # a resample of only NaN rows is NaN, as in pandas
            warnings.simplefilter("ignore", RuntimeWarning)
            total += np.nanmean(picks, axis=1)
    total /= len(by_type)
    se = float(np.nanstd(total, ddof=1)) if n_boot > 1 else 0.0
    return {
        "spearman": value,
        "se": se,
        "by_type": type_means,
        "per_assay": rhos,
        "n_assays": len(items),
        "n_proteins": len({a.uniprot_id for a in items}),
    }


def clinical_auc(scores: np.ndarray, pathogenic: np.ndarray) -> float:
    """ProteinGym's clinical metric for one protein: ROC AUC of the model's fitness score for
    separating benign (the positive, fitter class) from pathogenic variants, i.e.
    P(score_benign > score_pathogenic) with ties counting 1/2 (Mann-Whitney U / (n_b n_p));
    NaN when one class is absent; rounded to 3 decimals as ProteinGym's per-protein table."""
    scores = np.asarray(scores, dtype=float)
    pathogenic = np.asarray(pathogenic, dtype=bool)
    if scores.shape != pathogenic.shape or scores.ndim != 1:
        raise ValueError(f"scores {scores.shape} and labels {pathogenic.shape} must be (N,)")
    n_path, n_benign = int(pathogenic.sum()), int((~pathogenic).sum())
    if n_path == 0 or n_benign == 0:
        return float("nan")
    ranks = rankdata(scores)  # average ranks for ties
    u = ranks[~pathogenic].sum() - n_benign * (n_benign + 1) / 2
    return round(float(u / (n_benign * n_path)), 3)


def clinical_summary(aucs: Sequence[float], n_boot: int = 10_000, seed: int = 0) -> dict:
    """Average of the per-protein AUCs (proteins with an undefined AUC left out), as ProteinGym's
    ``Average_AUC`` of the clinical indel benchmark, with a bootstrap SE over the proteins (ours:
    the repository ships the clinical tables, not the script that aggregates them)."""
    values = np.asarray(aucs, dtype=float)
    values = values[~np.isnan(values)]
    if len(values) == 0:
        return {"auc": float("nan"), "se": float("nan"), "n_proteins": 0}
    rng = np.random.default_rng(seed)
    boots = values[rng.integers(0, len(values), size=(n_boot, len(values)))].mean(axis=1)
    se = float(np.std(boots, ddof=1)) if n_boot > 1 else 0.0
    return {"auc": float(values.mean()), "se": se, "n_proteins": len(values)}
