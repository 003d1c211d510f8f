"""Expected information gain and the baselines' question scores (paper Sec. 3, Eq. for the
Rao-Blackwellised EIG estimator).

Shapes: ``probs`` is ``[N, M, K]``: the answer distribution p(y | θ_n, x_m) over K options for N
hypotheses θ_n and M candidate questions x_m (each row sums to 1); ``weights`` is ``[N]`` (uniform
when ``None``). All functions are numpy, natural log (nats).

    EIG(x) ≈ H[p̂(y | x)] − Σ_n w_n H[p(y | θ_n, x)],   p̂(y | x) = Σ_n w_n p(y | θ_n, x)

``exact_eig`` is the same expression with the exact posterior over a finite hypothesis space
(the oracle-likelihood mode of the synthetic world), so the estimator can be checked against it.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "STRATEGY_SCORES",
    "eig_estimate",
    "entropy",
    "exact_eig",
    "predictive",
    "score_questions",
    "split_score",
]

EPS = 1e-12


def entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    """Shannon entropy (nats) along ``axis``; 0 log 0 = 0."""
    p = np.asarray(p, dtype=float)
    return -(p * np.log(np.clip(p, EPS, 1.0))).sum(axis)


def _weights(n: int, weights: np.ndarray | None) -> np.ndarray:
    if weights is None:
        return np.full(n, 1.0 / n)
    w = np.asarray(weights, dtype=float)
    if w.shape != (n,) or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"weights must be [N={n}] non-negative with a positive sum")
    return w / w.sum()


def _check(probs: np.ndarray) -> np.ndarray:
    probs = np.asarray(probs, dtype=float)
    if probs.ndim != 3 or probs.shape[0] == 0:
        raise ValueError(f"probs must be [N, M, K] with N >= 1, got shape {probs.shape}")
    return probs


def predictive(probs: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """p̂(y | x_m) = Σ_n w_n p(y | θ_n, x_m): ``[M, K]``."""
    probs = _check(probs)
    return np.einsum("n,nmk->mk", _weights(probs.shape[0], weights), probs)


def eig_estimate(probs: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Rao-Blackwellised EIG estimate per question, ``[M]``: H[p̂] − mean_n H[p(·|θ_n, x)]."""
    probs = _check(probs)
    w = _weights(probs.shape[0], weights)
    marginal = entropy(np.einsum("n,nmk->mk", w, probs))
    conditional = np.einsum("n,nm->m", w, entropy(probs))
    return marginal - conditional


def exact_eig(likelihood: np.ndarray, posterior: np.ndarray) -> np.ndarray:
    """The true EIG ``[M]`` over a finite hypothesis space: ``likelihood`` ``[H, M, K]``,
    ``posterior`` ``[H]`` (the exact Bayes posterior given the history)."""
    return eig_estimate(likelihood, posterior)


def split_score(probs: np.ndarray, weights: np.ndarray | None = None, yes: int = 0) -> np.ndarray:
    """Split baseline: −|p̂(yes | x) − 0.5| (the question nearest an even split scores highest)."""
    return -np.abs(predictive(probs, weights)[:, yes] - 0.5)


def entropy_only(probs: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Entropy-only baseline: H[p̂(y | x)] with no conditional (aleatoric) term."""
    return entropy(predictive(probs, weights))


STRATEGY_SCORES = {"bed": eig_estimate, "entropy": entropy_only, "split": split_score}


def score_questions(
    strategy: str, probs: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """Score ``[M]`` of the M candidates under ``strategy`` (bed | entropy | split)."""
    if strategy not in STRATEGY_SCORES:
        raise ValueError(f"unknown scoring strategy {strategy!r}; choose {sorted(STRATEGY_SCORES)}")
    return STRATEGY_SCORES[strategy](probs, weights)
