"""Checks of the estimator and of the LLM likelihood table: exact posterior, EIG rank agreement
as N grows (a unit test and a reported curve, formerly claim b), the table's informativeness
against ground truth."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from llm_methods.bed.belief import REJECT_ABOVE, REJECT_BELOW, FilterBelief
from llm_methods.bed.eig import eig_estimate, exact_eig
from llm_methods.bed.worlds import World

__all__ = ["eig_agreement", "exact_posterior", "table_informativeness"]


def exact_posterior(
    p_yes: np.ndarray, questions: Sequence[int], answers: Sequence[bool]
) -> np.ndarray:
    """``[E]`` Bayes posterior over entities (uniform prior) given the answers."""
    post = np.ones(p_yes.shape[0])
    for q, a in zip(questions, answers, strict=True):
        post = post * (p_yes[:, q] if a else 1.0 - p_yes[:, q])
    if post.sum() <= 0:
        raise ValueError("the answers have zero probability under every entity")
    return post / post.sum()


def eig_agreement(
    world: World, ns: Sequence[int], n_states: int, seed: int = 0, max_asked: int = 8
) -> dict[str, dict[int, float]]:
    """Mean Spearman rank correlation between the estimated and the exact EIG over the unasked
    questions, at random game states (a random target, 0..``max_asked`` random questions
    answered by the exact answerer), for each N in ``ns``:

    - ``"posterior"``: θ_1..θ_N drawn from the exact posterior (the estimator itself);
    - ``"filtered"``: θ from sample-then-filter (prior proposals, thresholds 0.8/0.2, N kept).
    """
    from scipy.stats import spearmanr

    rng = np.random.default_rng(seed)
    lik = world.likelihood()
    n_e, n_q = world.p_yes.shape
    rho: dict[str, dict[int, list[float]]] = {"posterior": {}, "filtered": {}}
    for _ in range(n_states):
        target = int(rng.integers(n_e))
        asked = [
            int(q) for q in rng.choice(n_q, int(rng.integers(0, max_asked + 1)), replace=False)
        ]
        answers = [bool(rng.random() < world.p_yes[target, q]) for q in asked]
        post = exact_posterior(world.p_yes, asked, answers)
        pool = np.setdiff1d(np.arange(n_q), asked)
        exact = exact_eig(lik[:, pool], post)
        if np.ptp(exact) < 1e-12:
            continue
        for n in ns:
            sample = rng.choice(n_e, n, p=post)
            est = eig_estimate(lik[sample][:, pool])
            rho["posterior"].setdefault(n, []).append(_spearman(spearmanr, est, exact))
            belief = FilterBelief(
                propose=lambda k, g: g.integers(0, n_e, k),
                p_yes=lambda h, q: world.p_yes[h][:, q],
                n=n,
                max_proposals=64 * n_e,
            )
            belief.questions, belief.answers = list(asked), list(answers)
            kept = belief.start(rng)
            est_f = eig_estimate(lik[kept][:, pool])
            rho["filtered"].setdefault(n, []).append(_spearman(spearmanr, est_f, exact))
    return {k: {n: float(np.mean(v)) for n, v in d.items()} for k, d in rho.items()}


def _spearman(spearmanr, a: np.ndarray, b: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    if np.ptp(a) < 1e-12:
        return 0.0  # a constant estimate ranks nothing
    return float(spearmanr(a, b).statistic)


def table_informativeness(p_yes: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """How informative an LLM yes/no likelihood table is about a 0/1 ground truth: ROC AUC,
    accuracy at 0.5, the accuracy of always answering the majority, the mean p(yes) on true-yes
    and true-no cells, the fraction of cells in the filter's reject zone, and the fraction of
    cells where the true answer would reject the true hypothesis (the filter's false rejections)."""
    from sklearn.metrics import roc_auc_score

    t = truth.ravel().astype(bool)
    p = p_yes.ravel()
    majority = max(t.mean(), 1 - t.mean())
    wrong_reject = (t & (p < REJECT_BELOW)) | (~t & (p > REJECT_ABOVE))
    return {
        "auc": round(float(roc_auc_score(t, p)), 4) if 0 < t.mean() < 1 else float("nan"),
        "accuracy": round(float(((p > 0.5) == t).mean()), 4),
        "majority_accuracy": round(float(majority), 4),
        "mean_p_yes_true_yes": round(float(p[t].mean()), 4),
        "mean_p_yes_true_no": round(float(p[~t].mean()), 4),
        "reject_zone_fraction": round(float(((p > REJECT_ABOVE) | (p < REJECT_BELOW)).mean()), 4),
        "false_reject_fraction": round(float(wrong_reject.mean()), 4),
    }
