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

import itertools
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.special import logsumexp

__all__ = [
    "HUBER_DELTA",
    "PowerLawFit",
    "bootstrap_fit",
    "compute_frontier",
    "compute_optimal",
    "fit_compute_law",
    "fit_nd_law",
    "fit_sum_of_powers",
]

HUBER_DELTA = 1e-3
MAX_ITER = 100
INIT_EXPONENTS = (0.1, 0.4, 0.8, 1.5)
INIT_LOG_AMPLITUDES = (0.0, 3.0, 6.0, 10.0)
INIT_LOG_OFFSETS = (-4.0, -2.0, 0.0)
#: L-BFGS runs start from the grid points with the lowest objective (the grid is screened in
#: one vectorised pass first; running L-BFGS from all of it costs minutes per fit).
N_STARTS = 10


def _objective(theta: np.ndarray, x: np.ndarray, log_l: np.ndarray, delta: float) -> float:
    """Huber loss of ``LSE(a_k - α_k x_k, e) - log L`` (numpy, for checks).

    ``theta = [a_1..a_K, α_1..α_K, e]``; ``x`` (n, K) log-variables; ``log_l`` (n,).
    """
    k = x.shape[1]
    a, alpha, e = theta[:k], theta[k : 2 * k], theta[2 * k]
    terms = np.concatenate([a[None, :] - alpha[None, :] * x, np.full((x.shape[0], 1), e)], axis=1)
    r = np.abs(logsumexp(terms, axis=1) - log_l)
    return float(np.where(r <= delta, 0.5 * r**2, delta * (r - 0.5 * delta)).sum())


def _lbfgs(theta0: np.ndarray, x: torch.Tensor, log_l: torch.Tensor, delta: float):
    """One L-BFGS run (torch, float64, strong-Wolfe line search) of the Huber objective."""
    k = x.shape[1]
    theta = torch.tensor(theta0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [theta],
        lr=1.0,
        max_iter=MAX_ITER,
        tolerance_grad=1e-12,
        tolerance_change=1e-15,
        history_size=20,
        line_search_fn="strong_wolfe",
    )

    def objective() -> torch.Tensor:
        terms = torch.cat(
            [theta[:k] - theta[k : 2 * k] * x, theta[2 * k].expand(x.shape[0], 1)], dim=1
        )
        r = torch.logsumexp(terms, dim=1) - log_l
        return torch.nn.functional.huber_loss(r, torch.zeros_like(r), reduction="sum", delta=delta)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        value = objective()
        value.backward()
        return value

    opt.step(closure)
    with torch.no_grad():
        value = float(objective())
    return theta.detach().numpy().copy(), value


@dataclass
class PowerLawFit:
    """Result of one fit: ``log_amplitudes`` a_k, ``exponents`` α_k, ``log_offset`` e, the final
    Huber objective, and (after :func:`bootstrap_fit`) percentile CIs per named quantity."""

    log_amplitudes: np.ndarray
    exponents: np.ndarray
    log_offset: float
    objective: float
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    samples: dict[str, np.ndarray] = field(default_factory=dict)

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
    xt, lt = torch.from_numpy(x), torch.from_numpy(log_l)
    best_theta, best_value = None, np.inf
    for theta0 in starts:
        theta, value = _lbfgs(theta0, xt, lt, delta)
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


def bootstrap_fit(
    x: np.ndarray,
    loss: np.ndarray,
    names: tuple[str, ...],
    n_boot: int = 200,
    seed: int = 0,
    level: float = 0.95,
) -> PowerLawFit:
    """Full-grid fit plus ``n_boot`` refits on points resampled with replacement (each from the
    best full-data parameters and 1 random grid initialisations); percentile CIs at ``level``
    for each exponent in ``names`` and, for ``("alpha", "beta")``, for ``a``, ``b``, ``γ``."""
    x = np.asarray(x, dtype=np.float64)
    x = x[:, None] if x.ndim == 1 else x
    loss = np.asarray(loss, dtype=np.float64)
    fit = fit_sum_of_powers(x, loss)
    rng = np.random.default_rng(seed)
    grid = _inits(x.shape[1])
    theta_best = np.concatenate([fit.log_amplitudes, fit.exponents, [fit.log_offset]])
    draws: dict[str, list[float]] = {}
    n = len(loss)
    for _ in range(n_boot):
        idx = rng.integers(0, n, size=n)
        if len(np.unique(idx)) < 2 * x.shape[1] + 1:
            continue
        inits = [theta_best] + [grid[i] for i in rng.choice(len(grid), size=1, replace=False)]
        boot = fit_sum_of_powers(x[idx], loss[idx], inits=inits)
        for key, value in _quantities(boot, names).items():
            draws.setdefault(key, []).append(value)
    tail = 100 * (1 - level) / 2
    for key, values in draws.items():
        arr = np.asarray(values)
        fit.samples[key] = arr
        finite = arr[np.isfinite(arr)]
        if finite.size:
            fit.ci[key] = (
                float(np.percentile(finite, tail)),
                float(np.percentile(finite, 100 - tail)),
            )
    return fit
