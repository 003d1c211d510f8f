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

95 % intervals beside these numbers (``bio-scisor score`` / ``proteingym``) come from
:mod:`iclr26_common.effects` (SciPy's BCa bootstrap, a t-interval below 10 units), never from a
hand-written resampler: :func:`spearman_interval` over an assay's variants (paired: score and
measurement of a variant stay together), :func:`auc_interval` over a protein's variants,
:func:`summary_interval` over the (UniProt_ID, coarse_selection_type) rows of the summary. The
ProteinGym SE above is kept as ProteinGym computes it, for comparison with the leaderboard.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from scipy.stats import rankdata, spearmanr

if TYPE_CHECKING:
    from iclr26_common.effects import Interval

__all__ = [
    "INTERVAL_SEED",
    "AssayScores",
    "assay_spearman",
    "auc_interval",
    "clinical_auc",
    "clinical_summary",
    "proteingym_summary",
    "spearman",
    "spearman_difference_interval",
    "spearman_interval",
    "summary_interval",
]

#: The resampling seed of every interval of ``bio-scisor score`` / ``proteingym`` (recorded
#: beside each interval; the commands have no ``--seed``).
INTERVAL_SEED = 0
#: Bootstrap resamples of the Spearman / AUC intervals (SciPy's default).
N_RESAMPLES = 9999


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


# ------------------------------------------------------------------------------ intervals


def _rank_spearman(scores: np.ndarray, truth: np.ndarray) -> float:
    """Spearman's rho as the Pearson correlation of average ranks (ties as ``spearmanr``);
    NaN for a constant input (a resample can be one)."""
    a, b = rankdata(scores), rankdata(truth)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def _variant_interval(
    columns: tuple[np.ndarray, ...],
    statistic: Callable[..., float],
    seed: int,
    n_resamples: int,
) -> Interval | None:
    """``statistic(*columns)`` with a 95 % BCa bootstrap interval over the variants (the rows
    of ``columns``, each (N,), resampled together;
    :func:`iclr26_common.effects.statistic_interval`); ``None`` where it has none (too few
    variants, or a resample on which the statistic is undefined)."""
    from iclr26_common.effects import statistic_interval

    try:
        return statistic_interval(
            tuple(np.asarray(column, float) for column in columns),
            statistic,
            seed=seed,
            units="variants",
            n_resamples=n_resamples,
        )
    except ValueError:
        return None


def spearman_interval(
    scores: np.ndarray,
    truth: np.ndarray,
    seed: int = INTERVAL_SEED,
    n_resamples: int = N_RESAMPLES,
) -> Interval | None:
    """Spearman(score, DMS score) of one assay with a 95 % BCa bootstrap interval over its
    variants (:func:`iclr26_common.effects.statistic_interval`, paired, seed ``seed``); ``None``
    when there is none: under 10 variants, or the correlation is undefined (constant values)."""
    return _variant_interval((scores, truth), _rank_spearman, seed, n_resamples)


def spearman_difference_interval(
    scores: np.ndarray,
    baseline: np.ndarray,
    truth: np.ndarray,
    seed: int = INTERVAL_SEED,
    n_resamples: int = N_RESAMPLES,
) -> Interval | None:
    """Spearman(scores, truth) - Spearman(baseline, truth) on the same variants, with a paired
    95 % BCa bootstrap interval (the variants resampled together); ``None`` as
    :func:`spearman_interval`. Identical scores give an exact 0."""
    return _variant_interval(
        (scores, baseline, truth),
        lambda a, b, y: _rank_spearman(a, y) - _rank_spearman(b, y),
        seed,
        n_resamples,
    )


def _auc(scores: np.ndarray, pathogenic: np.ndarray) -> float:
    """:func:`clinical_auc` unrounded, on float labels (1 = pathogenic), for resampling."""
    bad = pathogenic > 0.5
    n_path, n_benign = int(bad.sum()), int((~bad).sum())
    if n_path == 0 or n_benign == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[~bad].sum() - n_benign * (n_benign + 1) / 2) / (n_benign * n_path))


def auc_interval(
    scores: np.ndarray,
    pathogenic: np.ndarray,
    seed: int = INTERVAL_SEED,
    n_resamples: int = N_RESAMPLES,
) -> Interval | None:
    """The benign-vs-pathogenic AUC of one protein with a 95 % BCa bootstrap interval over its
    variants; ``None`` under 10 variants or when a resample can miss a class."""
    return _variant_interval((scores, pathogenic), _auc, seed, n_resamples)


def _type_balanced_mean(values: np.ndarray, kinds: np.ndarray) -> float:
    """ProteinGym's average: the mean over selection types of the mean over their rows."""
    return float(np.mean([values[kinds == k].mean() for k in np.unique(kinds)]))


def summary_interval(
    assays: Sequence[AssayScores | tuple[np.ndarray, np.ndarray, str, str]],
    seed: int = INTERVAL_SEED,
    n_resamples: int = N_RESAMPLES,
) -> tuple[Interval | None, int]:
    """A 95 % interval of :func:`proteingym_summary`'s ``spearman`` over its independent units,
    the (UniProt_ID, coarse_selection_type) rows (called proteins), and the number of such rows
    with a defined Spearman.

    One selection type: the average is the mean over the proteins, with
    :func:`~iclr26_common.effects.mean_interval` (a t-interval under 10 proteins, BCa from 10).
    Several types: the type-balanced mean re-computed on each resample of the proteins (BCa,
    :func:`~iclr26_common.effects.statistic_interval`; ProteinGym's own SE resamples within each
    type instead), from 10 proteins; under that ``None``: too few to resample across types."""
    from iclr26_common.effects import mean_interval, statistic_interval

    items = [AssayScores(*a) for a in assays]
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for a in items:
        groups[(a.uniprot_id, a.selection_type)].append(assay_spearman(a.scores, a.dms_scores))
    rows = [(kind, _nanmean(v)) for (_, kind), v in groups.items()]
    rows = [(kind, value) for kind, value in rows if not np.isnan(value)]
    n = len(rows)
    values = np.array([value for _, value in rows], dtype=float)
    kinds = sorted({kind for kind, _ in rows})
    try:
        if len(kinds) == 1:
            return mean_interval(values, seed=seed, units="proteins", binary=False), n
        codes = np.array([kinds.index(kind) for kind, _ in rows], dtype=float)
        return (
            statistic_interval(
                (values, codes),
                _type_balanced_mean,
                seed=seed,
                units="proteins",
                n_resamples=n_resamples,
            ),
            n,
        )
    except ValueError:  # one protein, or under 10 across several types
        return None, n
