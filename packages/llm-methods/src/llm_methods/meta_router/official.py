"""The official Meta-Router data file, its efficiency-gain metric and overlap diagnostics.

The official release (yichistat/Meta-router @ bfeeb8b, ``PC50_varstd_RF_100G.py``) ships
``1_PC50_varstd.csv``: per HealthBench question the top-50 principal components of a text
embedding (``embd.PC1`` … ``embd.PC50``), the gold-standard quality gain ``GL`` and the
preference-based quality gain ``PL``. Each Monte-Carlo run splits it at random into 500 test
questions, 100 gold questions (their ``GL``) and the rest as preference questions (their
``PL``), fits every method and evaluates the **efficiency gain**:

- a method's curve (``evaluate_total_efficiency_vs_ratio``): sort the test questions by the
  predicted gain m̂ (descending); for k = 0 … #{m̂ > 0} the total efficiency is the sum of the
  first k test ``GL`` at ratio k / 500 (the curve stops at the last positive prediction);
  *Random*: the same over a random order, k = 0 … 500;
- on the grid r = 0.2, 0.21, …, 0.8 (61 points) each run's curve is interpolated (a run whose
  curve stops before r is left out at r), the median over runs is taken per method, and the
  efficiency gain is median(method) − median(Random); the official plot divides it by
  0.03523782 × 500 (an undocumented constant; we report the raw gain and its area).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "GRID",
    "efficiency_curve",
    "efficiency_gain",
    "overlap_diagnostics",
    "read_official_csv",
    "split_run",
]

GRID = np.linspace(0.2, 0.8, 61)
N_TEST, N_GOLD = 500, 100  # the official split
PLOT_SCALE = 0.03523782 * 500  # the official plot's divisor, reported alongside


def read_official_csv(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X = embd.PC1.., GL, PL) of the official CSV; one-line errors name file, row, column."""
    from llm_methods.meta_router.data import RouterDataError, _numeric, read_csv_frame

    path = Path(path)
    frame = read_csv_frame(path)
    pcs = sorted(
        (c for c in frame.columns if c.startswith("embd.PC") and c[7:].isdigit()),
        key=lambda c: int(c[7:]),
    )
    missing = [c for c in ("GL", "PL") if c not in frame.columns] + ([] if pcs else ["embd.PC1"])
    if missing:
        raise RouterDataError(
            f"{path}: missing column(s) {', '.join(missing)} (the official "
            "Meta-Router CSV has embd.PC1.., GL, PL)"
        )
    if len(frame) <= N_TEST + N_GOLD:
        raise RouterDataError(
            f"{path}: {len(frame)} rows; the official split needs more than "
            f"{N_TEST} test + {N_GOLD} gold rows"
        )
    x = np.column_stack([_numeric(frame, c, path) for c in pcs])
    return x, _numeric(frame, "GL", path), _numeric(frame, "PL", path)


def split_run(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(test, gold, preference) row indices of one official run (``np.random.seed(seed)``)."""
    order = np.random.RandomState(seed).permutation(n)
    return order[:N_TEST], order[N_TEST : N_TEST + N_GOLD], order[N_TEST + N_GOLD :]


def efficiency_curve(
    gain_hat: np.ndarray | None, labels: np.ndarray, rng: np.random.Generator | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(ratios, total efficiency) of one run; ``gain_hat=None``: the Random baseline."""
    n = len(labels)
    if gain_hat is None:
        order = (rng or np.random.default_rng()).permutation(n)
        k = n
    else:
        order = np.argsort(-gain_hat, kind="stable")
        k = int(np.sum(gain_hat > 0))
        if k == 0:  # no positive prediction: upstream returns a flat zero curve on [0, 1]
            return np.linspace(0, 1, 101), np.zeros(101)
    totals = np.concatenate([[0.0], np.cumsum(labels[order][:k])])
    return np.arange(k + 1) / n, totals


def efficiency_gain(
    runs: list[tuple[np.ndarray, np.ndarray]],
    random_runs: list[tuple[np.ndarray, np.ndarray]],
    grid: np.ndarray = GRID,
) -> np.ndarray:
    """Official efficiency gain on ``grid``: median over runs of the method's interpolated total
    efficiency minus that of Random (NaN where no run's curve reaches the ratio)."""

    def medians(curves: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        out = np.full(len(grid), np.nan)
        for i, r in enumerate(grid):
            vals = [
                np.interp(r, ratios, totals)
                for ratios, totals in curves
                if len(ratios) and r <= ratios.max()
            ]
            if vals:
                out[i] = float(np.median(vals))
        return out

    return medians(runs) - medians(random_runs)


def overlap_diagnostics(x: np.ndarray, t: np.ndarray, seed: int = 0) -> dict[str, Any]:
    """How predictable the label source T is from the query features (no overlap = DR cannot
    correct): 5-fold CV accuracy and AUC of a logistic propensity model vs the majority rate,
    propensity quantiles per arm and the share of rows the official DR mask keeps
    (|e(1 − e)| > 0.05)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    from llm_methods.meta_router.model import _check_arms

    t = np.asarray(t).astype(int)
    _check_arms(t)
    folds = StratifiedKFold(min(5, int(np.bincount(t).min())), shuffle=True, random_state=seed)
    e = cross_val_predict(
        LogisticRegression(max_iter=1000), x, t, cv=folds, method="predict_proba"
    )[:, 1]
    q = (5, 50, 95)
    return {
        "cv_accuracy": float(np.mean((e > 0.5) == t)),
        "majority_rate": float(max(t.mean(), 1 - t.mean())),
        "cv_auc": float(roc_auc_score(t, e)),
        "propensity_gold_p5_p50_p95": np.percentile(e[t == 1], q).round(4).tolist(),
        "propensity_pref_p5_p50_p95": np.percentile(e[t == 0], q).round(4).tolist(),
        "official_mask_kept": float(np.mean(np.abs(e * (1 - e)) > 0.05)),
    }


def overlap_line(diag: dict[str, Any]) -> str:
    return (
        f"overlap: T predicted from x at CV accuracy {diag['cv_accuracy']:.3f} (majority "
        f"{diag['majority_rate']:.3f}, AUC {diag['cv_auc']:.3f}); propensity p5/p50/p95 "
        f"gold {diag['propensity_gold_p5_p50_p95']}, preference "
        f"{diag['propensity_pref_p5_p50_p95']}; the official DR mask would keep "
        f"{diag['official_mask_kept']:.1%} of rows"
    )
