"""Scaling-law fits (Chinchilla approach 3) with bootstrap confidence intervals.

* ``L(N, D) = L∞ + A N^-α + B D^-β`` (paper Eq. for the sum power law), fitted as
  ``log L̂ = LSE(a - α log N, b - β log D, e)`` with ``A = e^a, B = e^b, L∞ = e^e``, minimising
  the Huber loss (δ = 1e-3) of ``log L̂ - log L`` with L-BFGS (unconstrained, as Hoffmann et
  al. 2022) from the best points of a grid of initialisations;
* the compute frontier ``L(C) = L∞ + F C^-γ`` fitted the same way to the lower envelope of all
  (C, L) points;
* compute-optimal allocation ``N_opt ∝ C^a, D_opt ∝ C^b`` with ``a = β/(α+β)``,
  ``b = α/(α+β)`` and the implied frontier exponent ``γ = αβ/(α+β)``.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

__all__ = [
    "HUBER_DELTA",
    "PowerLawFit",
    "compute_frontier",
    "compute_optimal",
    "fit_compute_law",
    "fit_nd_law",
    "fit_sum_of_powers",
    "frontier_fit",
    "seed_bootstrap_fit",
]

HUBER_DELTA = 1e-3
#: L-BFGS-B iterations per start (the Huber loss with δ = 1e-3 is nearly L1 in log space, which
#: takes a few hundred iterations to settle).
MAX_ITER = 1000
INIT_EXPONENTS = (0.1, 0.4, 0.8, 1.5)
INIT_LOG_AMPLITUDES = (0.0, 3.0, 6.0, 10.0)
INIT_LOG_OFFSETS = (-4.0, -2.0, 0.0)
#: L-BFGS runs start from the grid points with the lowest objective (the grid is screened in
#: one vectorised pass first; running L-BFGS from all of it costs minutes per fit).
N_STARTS = 10


def _terms(theta: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``[a_k - α_k x_k ..., e]`` per point, shape (n, K+1)."""
    k = x.shape[1]
    terms = np.empty((x.shape[0], k + 1))
    terms[:, :k] = theta[:k] - theta[k : 2 * k] * x
    terms[:, k] = theta[2 * k]
    return terms


def _objective_and_gradient(
    theta: np.ndarray, x: np.ndarray, log_l: np.ndarray, delta: float
) -> tuple[float, np.ndarray]:
    """Huber loss (δ = ``delta``) of ``LSE(a_k - α_k x_k, e) - log L`` summed over points, and
    its gradient in ``theta = [a_1..a_K, α_1..α_K, e]``; ``x`` (n, K), ``log_l`` (n,).

    Plain numpy on purpose: scipy's ``logsumexp`` costs ~10x more per call on these tiny
    arrays, and the optimiser calls this hundreds of times per start."""
    k = x.shape[1]
    terms = _terms(theta, x)
    top = terms.max(axis=1, keepdims=True)
    weights = np.exp(terms - top)
    total = weights.sum(axis=1)
    r = top[:, 0] + np.log(total) - log_l
    small = np.abs(r) <= delta
    value = float(np.where(small, 0.5 * r * r, delta * (np.abs(r) - 0.5 * delta)).sum())
    dr = np.where(small, r, delta * np.sign(r))
    w = weights * (dr / total)[:, None]  # d value / d term = softmax(terms) * huber'(r)
    grad = np.empty_like(theta)
    grad[:k] = w[:, :k].sum(axis=0)
    grad[k : 2 * k] = -(w[:, :k] * x).sum(axis=0)
    grad[2 * k] = w[:, k].sum()
    return value, grad


def _objective(theta: np.ndarray, x: np.ndarray, log_l: np.ndarray, delta: float) -> float:
    """The Huber objective alone (see :func:`_objective_and_gradient`)."""
    return _objective_and_gradient(np.asarray(theta, float), x, log_l, delta)[0]


def _one_blas_thread():
    """A context with one BLAS thread where ``threadpoolctl`` is installed (L-BFGS-B's tiny BLAS
    calls crawl when BLAS threads are oversubscribed), else a no-op."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: not a dependency of this package
        return contextlib.nullcontext()
    return threadpool_limits(1)


def _lbfgs(theta0: np.ndarray, x: np.ndarray, log_l: np.ndarray, delta: float):
    """One L-BFGS-B run (scipy, float64, analytic gradient) of the Huber objective."""
    from scipy.optimize import minimize

    with _one_blas_thread():
        result = minimize(
            _objective_and_gradient,
            np.asarray(theta0, dtype=np.float64),
            args=(x, log_l, delta),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": MAX_ITER, "ftol": 1e-15, "gtol": 1e-12},
        )
    return np.asarray(result.x, dtype=np.float64), float(result.fun)


@dataclass
class PowerLawFit:
    """Result of one fit: ``log_amplitudes`` a_k, ``exponents`` α_k, ``log_offset`` e, the final
    Huber objective, and (after :func:`seed_bootstrap_fit`) percentile CIs per named quantity,
    the bootstrap draws, and the fraction of draws that were not finite (no fit, or α+β <= 0),
    which the CIs leave out."""

    log_amplitudes: np.ndarray
    exponents: np.ndarray
    log_offset: float
    objective: float
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    samples: dict[str, np.ndarray] = field(default_factory=dict)
    nonfinite: dict[str, float] = field(default_factory=dict)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """``L̂`` at log-variables ``x`` (n, K)."""
        x = np.atleast_2d(x)
        terms = np.concatenate(
            [
                self.log_amplitudes[None, :] - self.exponents[None, :] * x,
                np.full((x.shape[0], 1), self.log_offset),
            ],
            axis=1,
        )
        return np.exp(logsumexp(terms, axis=1))

    @property
    def loss_floor(self) -> float:
        return float(np.exp(self.log_offset))


def _inits(k: int) -> list[np.ndarray]:
    grid = itertools.product(
        itertools.product(INIT_LOG_AMPLITUDES, repeat=k),
        itertools.product(INIT_EXPONENTS, repeat=k),
        INIT_LOG_OFFSETS,
    )
    return [np.array([*a, *al, e], dtype=np.float64) for a, al, e in grid]


def _screen(grid: np.ndarray, x: np.ndarray, log_l: np.ndarray, delta: float, keep: int):
    """The ``keep`` rows of ``grid`` (G, 2K+1) with the lowest Huber objective."""
    k = x.shape[1]
    a, alpha, e = grid[:, :k], grid[:, k : 2 * k], grid[:, 2 * k]
    terms = a[:, None, :] - alpha[:, None, :] * x[None, :, :]  # (G, n, K)
    terms = np.concatenate([terms, np.broadcast_to(e[:, None, None], (len(grid), len(x), 1))], 2)
    r = np.abs(logsumexp(terms, axis=2) - log_l[None, :])
    obj = np.where(r <= delta, 0.5 * r**2, delta * (r - 0.5 * delta)).sum(1)
    return grid[np.argsort(obj, kind="stable")[:keep]]


def fit_sum_of_powers(
    x: np.ndarray,
    loss: np.ndarray,
    inits: list[np.ndarray] | None = None,
    delta: float = HUBER_DELTA,
) -> PowerLawFit:
    """Fits ``L = e^e + sum_k e^{a_k} exp(-α_k x_k)`` to ``loss`` (n,) at log-variables ``x``
    (n, K): Huber in log space, L-BFGS from the ``N_STARTS`` best points of the
    initialisation grid (or from every one of ``inits``), the best optimum kept."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    loss = np.asarray(loss, dtype=np.float64)
    if x.shape[0] != loss.shape[0] or x.shape[0] < 2 * x.shape[1] + 1:
        raise ValueError(f"need >= {2 * x.shape[1] + 1} points with matching shapes")
    if np.any(loss <= 0) or not np.all(np.isfinite(loss)) or not np.all(np.isfinite(x)):
        raise ValueError("losses must be positive and finite, variables finite")
    k = x.shape[1]
    log_l = np.log(loss)
    if inits is None:
        starts = list(_screen(np.array(_inits(k)), x, log_l, delta, N_STARTS))
    else:
        starts = list(inits)
    best_theta, best_value = None, np.inf
    for theta0 in starts:
        theta, value = _lbfgs(theta0, x, log_l, delta)
        if np.all(np.isfinite(theta)) and value < best_value:
            best_theta, best_value = theta, value
    if best_theta is None:
        raise ValueError("every L-BFGS start diverged")
    return PowerLawFit(
        log_amplitudes=best_theta[:k],
        exponents=best_theta[k : 2 * k],
        log_offset=float(best_theta[2 * k]),
        objective=float(best_value),
    )


def compute_optimal(alpha: float, beta: float) -> dict[str, float]:
    """``a = β/(α+β)``, ``b = α/(α+β)``, ``γ = αβ/(α+β)`` (NaN when α + β = 0)."""
    total = alpha + beta
    if total <= 0:
        return {"a": float("nan"), "b": float("nan"), "gamma": float("nan")}
    return {"a": beta / total, "b": alpha / total, "gamma": alpha * beta / total}


def fit_nd_law(n_params: np.ndarray, n_data: np.ndarray, loss: np.ndarray) -> PowerLawFit:
    """``L(N, D) = L∞ + A N^-α + B D^-β`` (exponents ``[α, β]``)."""
    x = np.stack([np.log(np.asarray(n_params, float)), np.log(np.asarray(n_data, float))], 1)
    return fit_sum_of_powers(x, loss)


def fit_compute_law(compute: np.ndarray, loss: np.ndarray) -> PowerLawFit:
    """``L(C) = L∞ + F C^-γ`` (exponents ``[γ]``)."""
    return fit_sum_of_powers(np.log(np.asarray(compute, float))[:, None], loss)


def compute_frontier(compute: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """Indices of the lower envelope: points with a loss below every point of smaller compute,
    sorted by compute."""
    compute, loss = np.asarray(compute, float), np.asarray(loss, float)
    order = np.argsort(compute, kind="stable")
    keep, best = [], np.inf
    for i in order:
        if loss[i] < best:
            keep.append(i)
            best = loss[i]
    return np.array(keep, dtype=np.int64)


def _quantities(fit: PowerLawFit, names: tuple[str, ...]) -> dict[str, float]:
    out = {name: float(v) for name, v in zip(names, fit.exponents, strict=True)}
    if names == ("alpha", "beta"):
        out.update(compute_optimal(out["alpha"], out["beta"]))
    return out


def seed_bootstrap_fit(
    x: np.ndarray,
    losses: np.ndarray,
    groups: np.ndarray,
    names: tuple[str, ...],
    n_boot: int = 100,
    seed: int = 0,
    level: float = 0.95,
    select: Callable[[np.ndarray], np.ndarray] | None = None,
) -> PowerLawFit:
    """Fit to the seed means plus a bootstrap over independent runs.

    ``x`` (P, K) log-variables, ``losses`` (P, S): the loss of each point under each of S seeds;
    points with the same ``groups`` value (P,) come from one run per seed (e.g. the D values of
    one width, whose cooldowns branch from one trunk) and are resampled together: a replicate
    draws, for each group, S seeds with replacement and averages their losses. The point fit
    uses all S seeds. ``select(mean_losses)`` picks the points to fit (default all; e.g. the
    compute frontier). Each refit starts from the point optimum and one random grid point;
    percentile CIs at ``level`` for each exponent in ``names`` and, for ``("alpha", "beta")``,
    for ``a``, ``b``, ``γ``, over the finite draws; ``nonfinite[key]`` is the fraction of draws
    left out (too few selected points, every start diverged, or α+β <= 0). With one seed there
    is nothing to resample: no CIs.
    """
    x = np.asarray(x, dtype=np.float64)
    x = x[:, None] if x.ndim == 1 else x
    losses = np.asarray(losses, dtype=np.float64)
    losses = losses[:, None] if losses.ndim == 1 else losses
    groups = np.asarray(groups)
    if losses.shape[0] != x.shape[0] or groups.shape != (x.shape[0],):
        raise ValueError("x, losses and groups must have one row per point")
    pick = select if select is not None else (lambda m: np.arange(len(m)))
    mean = losses.mean(axis=1)
    chosen = pick(mean)
    fit = fit_sum_of_powers(x[chosen], mean[chosen])
    n_seeds = losses.shape[1]
    if n_seeds < 2:
        return fit
    rng = np.random.default_rng(seed)
    grid = _inits(x.shape[1])
    theta_best = np.concatenate([fit.log_amplitudes, fit.exponents, [fit.log_offset]])
    draws: dict[str, list[float]] = {}
    members = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    for _ in range(n_boot):
        replicate = np.empty_like(mean)
        for rows in members:
            drawn = rng.integers(0, n_seeds, size=n_seeds)
            replicate[rows] = losses[np.ix_(rows, drawn)].mean(axis=1)
        chosen = pick(replicate)
        start = grid[int(rng.integers(len(grid)))]
        quantities = {key: float("nan") for key in _quantities(fit, names)}
        if len(chosen) >= 2 * x.shape[1] + 1:
            with contextlib.suppress(ValueError):  # every start diverged: a non-finite draw
                boot = fit_sum_of_powers(x[chosen], replicate[chosen], inits=[theta_best, start])
                quantities = _quantities(boot, names)
        for key, value in quantities.items():
            draws.setdefault(key, []).append(value)
    tail = 100 * (1 - level) / 2
    for key, values in draws.items():
        arr = np.asarray(values)
        fit.samples[key] = arr
        finite = arr[np.isfinite(arr)]
        fit.nonfinite[key] = float(1.0 - finite.size / arr.size)
        if finite.size:
            fit.ci[key] = (
                float(np.percentile(finite, tail)),
                float(np.percentile(finite, 100 - tail)),
            )
    return fit


def frontier_fit(
    cost: np.ndarray, losses: np.ndarray, groups: np.ndarray, n_boot: int, seed: int = 0
) -> PowerLawFit | None:
    """``L(C) = L∞ + F C^-γ`` on the lower envelope (:func:`compute_frontier`) of the seed-mean
    losses over ``cost`` (compute, or training seconds), the envelope re-taken in every
    bootstrap replicate; None when the envelope has fewer than 3 points."""
    cost = np.asarray(cost, dtype=np.float64)
    losses = np.asarray(losses, dtype=np.float64).reshape(len(cost), -1)
    if len(compute_frontier(cost, losses.mean(axis=1))) < 3:
        return None
    return seed_bootstrap_fit(
        np.log(cost)[:, None],
        losses,
        groups,
        ("gamma",),
        n_boot,
        seed,
        select=lambda mean: compute_frontier(cost, mean),
    )
