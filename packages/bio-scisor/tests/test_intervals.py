"""95 % intervals beside the Spearman / AUC numbers of ``bio-scisor score`` and ``proteingym``
(iclr26_common.effects: SciPy's bootstrap or a t-interval, the resampling seed recorded)."""

from __future__ import annotations

import numpy as np
import pytest

from bio_scisor.metrics import (
    INTERVAL_SEED,
    auc_interval,
    proteingym_summary,
    spearman,
    spearman_difference_interval,
    spearman_interval,
    summary_interval,
)
from iclr26_common.effects import interval_columns, interval_text

FAST = 499  # resamples: enough for the planted cases, small for the test's runtime


def _assay(n: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=n)
    return truth + noise * rng.normal(size=n), truth


def test_spearman_interval_is_over_variants_and_excludes_zero_when_planted() -> None:
    scores, truth = _assay(80, 0.5, 0)
    interval = spearman_interval(scores, truth, n_resamples=FAST)
    assert interval is not None and interval.method == "bootstrap"
    assert interval.n == 80 and interval.units == "variants"
    assert interval.resample_seed == INTERVAL_SEED
    assert interval.estimate == pytest.approx(spearman(scores, truth))
    assert 0 < interval.low <= interval.estimate <= interval.high < 1
    # unrelated scores: the interval covers 0
    noise = np.random.default_rng(1).normal(size=80)
    unrelated = spearman_interval(noise, truth, n_resamples=FAST)
    assert unrelated is not None and unrelated.low < 0 < unrelated.high


def test_too_few_or_constant_variants_have_no_interval() -> None:
    scores, truth = _assay(9, 0.5, 0)
    assert spearman_interval(scores, truth, n_resamples=FAST) is None  # under 10 variants
    assert spearman_interval(np.ones(30), np.arange(30.0), n_resamples=FAST) is None
    text = interval_text(None, 9, "variants")
    assert text == "(n=9 variants, too few for an interval)" and "±" not in text
    columns = interval_columns("spearman", None, 9)
    assert columns["spearman_low"] == "" and columns["spearman_ci_method"] == "none"
    assert columns["spearman_n"] == 9


def test_paired_difference_of_identical_scores_is_exactly_zero() -> None:
    scores, truth = _assay(50, 0.5, 2)
    same = spearman_difference_interval(scores, scores.copy(), truth, n_resamples=FAST)
    assert same is not None and same.method == "exact"
    assert same.estimate == same.low == same.high == 0.0
    assert interval_text(same, 50, "variants") == "(exact, n=50 variants)"


def test_paired_difference_of_separated_scores_excludes_zero() -> None:
    good, truth = _assay(60, 0.2, 3)
    bad = np.random.default_rng(4).normal(size=60)
    diff = spearman_difference_interval(good, bad, truth, n_resamples=FAST)
    assert diff is not None and diff.method == "bootstrap" and diff.n == 60
    assert diff.estimate == pytest.approx(spearman(good, truth) - spearman(bad, truth))
    assert 0 < diff.low <= diff.estimate <= diff.high
    columns = interval_columns("spearman_diff", diff, 60)
    assert float(columns["spearman_diff_low"]) > 0 and columns["spearman_diff_n"] == 60
    assert columns["spearman_diff_resample_seed"] == INTERVAL_SEED


def test_summary_interval_is_over_proteins() -> None:
    """One type: a t-interval under 10 proteins; several types: under 10 none, from 10 a
    bootstrap of ProteinGym's type-balanced mean (the same estimate as the summary)."""
    rng = np.random.default_rng(5)

    def protein(noise: float, kind: str, name: str) -> tuple:
        truth = rng.normal(size=30)
        return truth + noise * rng.normal(size=30), truth, kind, name

    three = [protein(0.5 + 0.2 * i, "Stability", f"P{i}") for i in range(3)]
    interval, n = summary_interval(three, n_resamples=FAST)
    assert n == 3 and interval is not None and interval.method == "t" and interval.n == 3
    assert interval.estimate == pytest.approx(proteingym_summary(three, n_boot=10)["spearman"])
    one, n_one = summary_interval(three[:1], n_resamples=FAST)
    assert one is None and n_one == 1
    mixed = [*three, protein(0.5, "Activity", "Q1")]
    assert summary_interval(mixed, n_resamples=FAST)[0] is None  # 4 proteins, 2 types
    many = [protein(0.3 + 0.1 * i, ("Stability", "Activity")[i % 2], f"R{i}") for i in range(12)]
    interval, n = summary_interval(many, n_resamples=FAST)
    assert n == 12 and interval is not None and interval.method == "bootstrap"
    assert interval.units == "proteins" and interval.resample_seed == INTERVAL_SEED
    assert interval.estimate == pytest.approx(proteingym_summary(many, n_boot=10)["spearman"])
    assert 0 < interval.low <= interval.estimate <= interval.high


def test_auc_interval_of_separated_classes_excludes_one_half() -> None:
    rng = np.random.default_rng(6)
    pathogenic = np.arange(40) % 2 == 0
    scores = rng.normal(size=40) - 2.0 * pathogenic  # benign score higher: AUC near 1
    interval = auc_interval(scores, pathogenic, n_resamples=FAST)
    assert interval is not None and interval.n == 40 and interval.low > 0.5
    assert auc_interval(scores[:8], pathogenic[:8], n_resamples=FAST) is None
