"""The official code's own bias learners, as a sensitivity variant of our cross-fitted ones.

The official release (yichistat/Meta-router @ bfeeb8b, ``PC50_varstd_RF_100G.py``, classes
``DRLearner`` and ``RLearner`` with the forests of ``create_random_forest_models``) estimates the
preference bias δ(x) **in-sample** (nuisances and pseudo-outcomes on the same rows), with a forest
*regressor* as propensity model (clipped), a mask on small denominators and δ̂ clipped to
[−1.2, 1.2]. Our default learners (``dr``, ``r`` in :mod:`llm_methods.meta_router.model`) are
econml's cross-fitted ones; these two (``dr_official``, ``r_official``) let a user see how much of
a verdict depends on that choice. Re-implemented from the description above, not copied.

DR pseudo-outcome (T = 1 gold, e(x) = P̂(T = 1 | x), μ̂(x, t) the outcome forest on [x, t])::

    ψ = (T − e) / (e (1 − e)) · (Y − μ̂(x, T)) + μ̂(x, 1) − μ̂(x, 0),   kept iff e (1 − e) > 0.05

R-learner (m̂(x) = E[Y | x]): ψ = (Y − m̂) / (T − e), kept iff |T − e| > 0.05, weights (T − e)².
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["DELTA_CLIP", "INSAMPLE_LEARNERS", "InSampleBiasLearner"]

INSAMPLE_LEARNERS = ("dr_official", "r_official")
DELTA_CLIP = 1.2  # official: predictions clipped to [−1.2, 1.2]
MASK = 0.05  # official: |denominator| > 0.05
PROPENSITY_CLIP = {"dr_official": (0.05, 0.95), "r_official": (0.1, 0.9)}
NUISANCE_FOREST = {"n_estimators": 100, "max_depth": 20, "max_features": "sqrt"}
EFFECT_FOREST = {
    "n_estimators": 200,
    "max_depth": 30,
    "min_samples_split": 5,
    "min_samples_leaf": 2,
    "max_features": "sqrt",
}


def _forest(settings: dict[str, Any], seed: int) -> Any:
    from sklearn.ensemble import RandomForestRegressor

    return RandomForestRegressor(**settings, n_jobs=1, random_state=seed)


@dataclass
class InSampleBiasLearner:
    """δ̂(x) the official way; ``.fit(y, t, X=x)`` and ``.effect(x)`` like econml's estimators.

    Shapes: x (n, d), y (n,), t (n,) with 1 = gold and 0 = preference.
    """

    learner: str = "dr_official"
    seed: int = 0

    def fit(self, y: np.ndarray, t: np.ndarray, X: np.ndarray) -> InSampleBiasLearner:
        if self.learner not in INSAMPLE_LEARNERS:
            raise ValueError(
                f"unknown learner {self.learner!r} (known: {', '.join(INSAMPLE_LEARNERS)})"
            )
        x, y, t = np.asarray(X, float), np.asarray(y, float), np.asarray(t).astype(int)
        lo, hi = PROPENSITY_CLIP[self.learner]
        e = np.clip(_forest(NUISANCE_FOREST, self.seed).fit(x, t).predict(x), lo, hi)
        effect = _forest(EFFECT_FOREST, self.seed)
        if self.learner == "dr_official":
            outcome = _forest(NUISANCE_FOREST, self.seed).fit(np.column_stack([x, t]), y)

            def mu(arm: np.ndarray) -> np.ndarray:
                return outcome.predict(np.column_stack([x, arm]))

            denominator = e * (1 - e)
            psi = (t - e) / denominator * (y - mu(t)) + mu(np.ones_like(t)) - mu(np.zeros_like(t))
            keep = np.abs(denominator) > MASK
            weights = None
        else:
            m = _forest(NUISANCE_FOREST, self.seed).fit(x, y).predict(x)
            denominator = t - e
            keep = np.abs(denominator) > MASK
            psi = np.zeros_like(y)
            psi[keep] = (y - m)[keep] / denominator[keep]
            weights = (denominator**2)[keep]
        if keep.sum() < 2:
            raise ValueError(
                f"{self.learner}: the official mask kept {int(keep.sum())} rows "
                "(no overlap between gold and preference rows); econml's cross-fitted dr "
                "learner (--learner dr) has no mask"
            )
        self.kept_share = float(keep.mean())
        self.effect_model = effect.fit(x[keep], psi[keep], sample_weight=weights)
        return self

    def effect(self, x: np.ndarray) -> np.ndarray:
        """δ̂(x), clipped to ±:data:`DELTA_CLIP` as upstream; shape (n,)."""
        return np.clip(self.effect_model.predict(np.asarray(x, float)), -DELTA_CLIP, DELTA_CLIP)
