"""Meta-Router (arXiv 2509.25535): route a query to the premium model iff m̂(x) − w·ΔC > 0.

Causal framing: the label source is the treatment, T = 1 gold-standard, T = 0 preference /
LLM judge. Its effect on the label, δ(x) = E[y | x, T=1] − E[y | x, T=0] = m(x) − η(x), is the
preference bias (a CATE). We estimate δ̂ with econml's cross-fitted ``DRLearner`` (or
the R-learner ``NonParamDML``, ``LinearDRLearner`` / a T-learner), correct the preference labels
to y + δ̂(x), and fit the final quality-gain model m̂ on gold ∪ corrected data. Baselines:
gold-only, preference-only, naive pooling; control: the same correction with the true δ
(``oracle_corrected``, simulations only).

Forests as the official code (yichistat/Meta-router @ bfeeb8b, ``create_random_forest_models``):
the outcome / m̂ forest :data:`OUTCOME_FOREST` (also the nuisance outcome model), the CATE
final stage :data:`EFFECT_FOREST`; the propensity model is a logistic regression (econml needs
a classifier; upstream regresses T with a forest and clips).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "LEARNERS",
    "METHODS",
    "MetaRouter",
    "cost_quality_curve",
    "estimate_bias",
    "fit_method",
    "predict_gain",
]

LEARNERS = ("dr", "r", "lineardr", "tlearner", "dr_official", "r_official")
METHODS = ("gold_only", "preference_only", "pooled", "dr_corrected")
OUTCOME_FOREST = {"n_estimators": 100, "max_depth": 20, "max_features": "sqrt"}
EFFECT_FOREST = {
    "n_estimators": 200,
    "max_depth": 30,
    "min_samples_split": 5,
    "min_samples_leaf": 2,
    "max_features": "sqrt",
}
CV_FOLDS = 3


def _forest(seed: int, settings: dict[str, Any] = OUTCOME_FOREST) -> Any:
    from sklearn.ensemble import RandomForestRegressor

    return RandomForestRegressor(**settings, n_jobs=1, random_state=seed)


def _check_arms(treatment: np.ndarray) -> None:
    gold, pref = int((treatment == 1).sum()), int((treatment == 0).sum())
    if gold == 0 or pref == 0:
        empty = "T=1 (gold)" if gold == 0 else "T=0 (preference)"
        raise ValueError(
            f"treatment arm {empty} is empty: Meta-Router needs both gold and "
            f"preference labels ({gold} gold, {pref} preference rows)"
        )
    if gold < 2 * CV_FOLDS or pref < 2 * CV_FOLDS:
        raise ValueError(
            f"too few rows per arm for {CV_FOLDS}-fold cross-fitting "
            f"({gold} gold, {pref} preference; need >= {2 * CV_FOLDS} each)"
        )


def estimate_bias(
    x: np.ndarray, y: np.ndarray, t: np.ndarray, learner: str = "dr", seed: int = 0
) -> Any:
    """Fitted CATE estimator of δ(x) (``.effect(x)``): econml's, cross-fitted with 3 folds, or
    the official code's in-sample learners (``dr_official``, ``r_official``)."""
    from sklearn.linear_model import LogisticRegression

    _check_arms(t)
    if learner in ("dr_official", "r_official"):  # the official in-sample learners (insample.py)
        from llm_methods.meta_router.insample import InSampleBiasLearner

        return InSampleBiasLearner(learner, seed).fit(y, t, X=x)
    if learner == "dr":
        from econml.dr import DRLearner

        est = DRLearner(
            model_propensity=LogisticRegression(),
            model_regression=_forest(seed),
            model_final=_forest(seed, EFFECT_FOREST),
            cv=CV_FOLDS,
            random_state=seed,
        )
    elif learner == "r":  # the R-learner: residual-on-residual with a forest final stage
        from econml.dml import NonParamDML

        est = NonParamDML(
            model_y=_forest(seed),
            model_t=LogisticRegression(),
            model_final=_forest(seed, EFFECT_FOREST),
            discrete_treatment=True,
            cv=CV_FOLDS,
            random_state=seed,
        )
    elif learner == "lineardr":
        from econml.dr import LinearDRLearner

        est = LinearDRLearner(
            model_propensity=LogisticRegression(),
            model_regression=_forest(seed),
            cv=CV_FOLDS,
            random_state=seed,
        )
    elif learner == "tlearner":
        from econml.metalearners import TLearner

        est = TLearner(models=_forest(seed))
    else:
        raise ValueError(f"unknown learner {learner!r} (known: {', '.join(LEARNERS)})")
    est.fit(y, t, X=x)
    return est


@dataclass
class MetaRouter:
    """m̂ (a forest on gold ∪ bias-corrected preference labels) and the routing rule."""

    learner: str = "dr"
    seed: int = 0
    forest: Any = None
    bias_model: Any = None
    info: dict[str, Any] = field(default_factory=dict)

    def fit(
        self, x: np.ndarray, y: np.ndarray, t: np.ndarray, delta: np.ndarray | None = None
    ) -> MetaRouter:
        """Estimate δ̂ (or take the given ``delta``, the oracle control) and fit m̂ on gold ∪
        the preference labels corrected to y + δ̂."""
        t = np.asarray(t).astype(int)
        if delta is None:
            self.bias_model = estimate_bias(x, y, t, self.learner, self.seed)
            delta = np.asarray(self.bias_model.effect(x)).reshape(-1)
        else:
            _check_arms(t)
            self.learner = "oracle"
        corrected = np.where(t == 1, y, y + delta)
        self.forest = _forest(self.seed).fit(x, corrected)
        self.info = {
            "n_gold": int(t.sum()),
            "n_preference": int((t == 0).sum()),
            "mean_bias": float(delta[t == 0].mean()),
        }
        return self

    def gain(self, x: np.ndarray) -> np.ndarray:
        """m̂(x), the predicted quality gain of the premium model."""
        return self.forest.predict(x)

    def route(self, x: np.ndarray, w: float, cost_diff: float = 1.0) -> np.ndarray:
        """1 = premium model, iff m̂(x) − w·ΔC > 0 (paper's routing rule)."""
        return (self.gain(x) - w * cost_diff > 0).astype(int)


def fit_method(
    method: str, x: np.ndarray, y: np.ndarray, t: np.ndarray, seed: int = 0, learner: str = "dr"
) -> Any:
    """A fitted model with ``.predict(x)`` (baselines) or ``.gain(x)`` (Meta-Router)."""
    t = np.asarray(t).astype(int)
    if method == "dr_corrected":
        return MetaRouter(learner, seed).fit(x, y, t)
    rows = {"gold_only": t == 1, "preference_only": t == 0, "pooled": np.ones_like(t, bool)}
    if method not in rows:
        raise ValueError(f"unknown method {method!r} (known: {', '.join(METHODS)})")
    if rows[method].sum() < 2:
        raise ValueError(f"{method}: fewer than 2 training rows")
    return _forest(seed).fit(x[rows[method]], y[rows[method]])


def predict_gain(model: Any, x: np.ndarray) -> np.ndarray:
    return model.gain(x) if isinstance(model, MetaRouter) else model.predict(x)


def cost_quality_curve(
    gain_hat: np.ndarray, gain: np.ndarray, q_weak: np.ndarray, shares: np.ndarray
) -> np.ndarray:
    """Mean realised quality when the ``share`` of queries with the highest m̂ go to the premium
    model (sweeping w in the routing rule traces exactly these points)."""
    order = np.argsort(-gain_hat, kind="stable")
    cum = np.concatenate([[0.0], np.cumsum(gain[order])])
    k = np.round(shares * len(gain)).astype(int)
    return q_weak.mean() + cum[k] / len(gain)
