"""Claim intervals (issue 35 §3): a verdict follows from a 95 % interval against the
pre-registered threshold; planted effects show every criterion can hold, fail and be
underpowered; paired designs gain power; non-finite and inconsistent effects are refused."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from iclr26_common import Claim, Experiment, Precondition, Result
from iclr26_common.effects import (
    Effect,
    bootstrap_effect,
    difference_effect,
    exact_effect,
    format_effect,
    paired_effect,
    points_effect,
    t_effect,
    units_needed,
)
from iclr26_common.index import write_index
from iclr26_common.report import claim_kind, write_result


@pytest.fixture
def rng() -> np.random.Generator:
    """Each test draws its planted data from its own fixed stream (order-independent)."""
    return np.random.default_rng(20261206)


# ------------------------------------------------------------------ the intervals themselves


def test_t_interval_is_the_textbook_one() -> None:
    # 1..5: mean 3, SD sqrt(2.5) = 1.5811, t(0.975, 4) = 2.7764 -> half-width 1.9632 (by hand)
    effect = t_effect([1, 2, 3, 4, 5], name="x", threshold=0)
    assert effect.method == "t" and effect.n == 5 and effect.estimate == 3
    assert effect.low == pytest.approx(3 - 1.9632, abs=1e-3)
    assert effect.high == pytest.approx(3 + 1.9632, abs=1e-3)
    assert effect.spread == pytest.approx(1.5811, abs=1e-4)


def test_zero_spread_is_exact_not_nan() -> None:
    effect = t_effect([0.7, 0.7, 0.7], name="x", threshold=0.5)
    assert effect.method == "exact" and effect.low == effect.high == effect.estimate == 0.7
    assert effect.decide() == "held"
    null = paired_effect(
        [[1, 0, 1] * 5] * 3, [[1, 0, 1] * 5] * 3, name="gain", threshold=2, seed=0, scale=100
    )
    assert (null.method, null.estimate, null.low, null.high) == ("exact", 0.0, 0.0, 0.0)
    assert all(math.isfinite(v) for v in (null.low, null.high, null.spread or 0.0))


def test_rates_of_outcomes_get_wilson_intervals_never_exact() -> None:
    # 20/20 successes is not certain: Wilson gives [0.839, 1] (by hand: z = 1.96,
    # centre (20 + 1.92) / 23.84 = 0.919, half-width 1.96 * sqrt(0 + 0.96) / 23.84 = 0.081)
    full = t_effect([1] * 20, name="success", threshold=0.8, units="episodes")
    assert full.method == "wilson" and full.estimate == 1.0
    assert full.low == pytest.approx(0.839, abs=1e-3) and full.high == pytest.approx(1.0)
    assert full.decide() == "held"
    # 4 of 5: inside [0, 1] (a t-interval gives [0.24, 1.36])
    four = bootstrap_effect([1, 1, 0, 1, 1], name="hs", threshold=0.5, seed=0)
    assert four.method == "wilson" and 0 <= four.low < 0.8 < four.high <= 1
    assert four.decide() == "underpowered"


def test_seed_spread_is_not_resampled_away() -> None:
    # no true gain, but each retrained seed shifts the method by a few points: 3 seeds x 200
    # items; resampling items alone (each averaged over the seeds) would be far too narrow
    rng = np.random.default_rng(5)
    items = rng.uniform(40, 80, size=200)
    offsets = np.array([5.0, -4.0, 1.5])
    base = items + rng.normal(0, 1, size=(3, 200))
    method = items + offsets[:, None] + rng.normal(0, 1, size=(3, 200))
    effect = paired_effect(method, base, name="gain", unit="pts", threshold=2.0, seed=0)
    assert effect.method == "paired t over seeds" and effect.n == 3
    # the criterion names the seeds once (it read "(paired t over seeds, over seeds (each ...")
    assert "(paired t over seeds (each averaged over 200 items)) on that side" in (
        effect.criterion()
    )
    assert effect.low < 0 < effect.high and effect.decide() == "underpowered"
    # with the same seed offsets on both arms (the design's own noise only) items decide
    same = paired_effect(base + 3.0, base, name="gain", threshold=2.0, seed=0)
    assert same.decide() == "held"


def test_few_units_never_get_a_bootstrap() -> None:
    # a bootstrap over 3 seeds would return about [min, max]; a t-interval is far wider
    effect = bootstrap_effect([0.56, 0.73, 0.61], name="acc", threshold=0.5, seed=0)
    assert effect.method == "t"
    assert effect.low < 0.56 and effect.high > 0.73


def test_bootstrap_is_reproducible_from_its_recorded_seed(rng: np.random.Generator) -> None:
    values = rng.normal(1.0, 1.0, size=200)
    a = bootstrap_effect(values, name="x", threshold=0, seed=7)
    b = bootstrap_effect(values, name="x", threshold=0, seed=7)
    c = bootstrap_effect(values, name="x", threshold=0, seed=8)
    assert a.resample_seed == 7 and (a.low, a.high) == (b.low, b.high)
    assert (a.low, a.high) != (c.low, c.high)
    # close to the normal-theory interval mean +- 1.96 SE at n = 200
    se = values.std(ddof=1) / math.sqrt(values.size)
    assert a.low == pytest.approx(values.mean() - 1.96 * se, abs=0.4 * se)
    assert a.high == pytest.approx(values.mean() + 1.96 * se, abs=0.4 * se)


def test_units_needed_by_hand() -> None:
    # spread 1, distance 0.5: t(0.975, n-1) / sqrt(n) < 0.5 first at n = 18
    # (n = 17: 2.120 / 4.123 = 0.514; n = 18: 2.110 / 4.243 = 0.497)
    assert units_needed(1.0, 0.5, 0.0, ">=") == 18
    # normal critical value: (1.96 / 0.5)^2 = 15.4 -> 16
    assert units_needed(1.0, 0.5, 0.0, ">=", t_based=False) == 16
    assert units_needed(1.0, 0.0, 0.0, ">=") is None  # on the threshold: nothing decides it
    # the fewest, not within 5 %: n = 1539 is not enough at distance 0.05, n = 1540 is
    assert units_needed(1.0, 0.05, 0.0, ">=", t_based=False) == 1537
    needed = units_needed(1.0, 0.05, 0.0, ">=")
    from scipy import stats

    assert stats.t.ppf(0.975, needed - 1) / math.sqrt(needed) < 0.05
    assert stats.t.ppf(0.975, needed - 2) / math.sqrt(needed - 1) >= 0.05
    # an estimate within rounding of its threshold: (spread / distance)^2 ~ 1e31 units; on
    # 52aa8a9 scipy's t.ppf got that integer and raised TypeError
    assert units_needed(1.0, 0.1 + 1e-16, 0.1, ">=") is None
    assert units_needed(1.0, 1e-300, 0.0, ">=") is None


# ------------------------------------------------------------------ planted effects -> verdicts


@pytest.mark.parametrize(
    ("true_gain", "n_seeds", "expected"),
    [
        (10.0, 8, "held"),  # well above the threshold of 2
        (-6.0, 8, "not held"),  # well below
        (2.0, 3, "underpowered"),  # at the threshold with few seeds
    ],
)
def test_planted_effects_against_the_threshold(
    rng: np.random.Generator, true_gain: float, n_seeds: int, expected: str
) -> None:
    gains = true_gain + rng.normal(0.0, 1.5, size=n_seeds)
    effect = t_effect(gains, name="gain", unit="pts", threshold=2.0, direction=">=")
    assert effect.decide() == expected
    claim = Claim.test(text="The method gains at least 2 points.", effect=effect)
    verdict = {"held": "held", "not held": "not held", "underpowered": "inconclusive"}[expected]
    assert claim.verdict == verdict
    assert claim.reason == ("underpowered" if expected == "underpowered" else "interval")
    assert claim.criterion_met is {"held": True, "not held": False}.get(expected)


def test_upper_bound_and_within_directions() -> None:
    small = t_effect([0.1, 0.2, 0.15, 0.12], name="drop", threshold=1.0, direction="<=")
    large = t_effect([3.1, 3.2, 3.15, 3.12], name="drop", threshold=1.0, direction="<=")
    assert (small.decide(), large.decide()) == ("held", "not held")
    inside = t_effect([-0.2, 0.1, 0.0, 0.15], name="gap", threshold=1.0, direction="within")
    outside = t_effect([2.2, 2.1, 2.3, 2.15], name="gap", threshold=1.0, direction="within")
    straddle = t_effect([0.2, 1.8, 0.9, 1.4], name="gap", threshold=1.0, direction="within")
    assert [e.decide() for e in (inside, outside, straddle)] == [
        "held",
        "not held",
        "underpowered",
    ]


def test_paired_design_decides_where_the_unpaired_one_cannot(rng: np.random.Generator) -> None:
    # 40 items whose difficulty varies a lot; the method adds a small consistent 3 points
    difficulty = rng.uniform(20, 90, size=40)
    baseline = difficulty + rng.normal(0, 0.5, size=40)
    method = difficulty + 3.0 + rng.normal(0, 0.5, size=40)
    paired = paired_effect(method, baseline, name="gain", threshold=1.0, seed=0)
    unpaired = difference_effect(method, baseline, name="gain", threshold=1.0, seed=0)
    assert paired.method == "paired bootstrap" and paired.n == 40
    assert paired.decide() == "held"
    assert unpaired.decide() == "underpowered"
    assert (paired.high - paired.low) < 0.2 * (unpaired.high - unpaired.low)


def test_paired_seeds_by_items_resamples_items(rng: np.random.Generator) -> None:
    base = rng.integers(0, 2, size=(3, 64)).astype(float)  # 0/1 correctness, 3 seeds x 64 items
    better = np.maximum(base, rng.integers(0, 2, size=(3, 64)) * (rng.random((3, 64)) < 0.3))
    effect = paired_effect(better, base, name="gain", unit="pts", scale=100, threshold=2, seed=1)
    assert effect.n == 64 and "averaged over 3 seeds" in effect.units
    assert effect.estimate == pytest.approx(100 * (better.mean() - base.mean()))
    with pytest.raises(ValueError, match="same items and seeds"):
        paired_effect(better, base[:, :10], name="gain", threshold=0, seed=0)
    # the same design in points: 0/1 scores x 100, threshold and interval in points
    points = points_effect(better, base, name="gain", threshold=2, seed=1)
    assert points.unit == "pts" and points.estimate == pytest.approx(effect.estimate)
    assert (points.low, points.high) == pytest.approx((effect.low, effect.high))


def test_non_inferiority_fails_for_a_method_worse_by_more_than_the_margin(
    rng: np.random.Generator,
) -> None:
    items = rng.uniform(40, 80, size=50)
    base = items + rng.normal(0, 1, size=50)
    worse = items - 6.0 + rng.normal(0, 1, size=50)  # 6 points worse, margin 2
    same = items + rng.normal(0, 1, size=50)
    margin = 2.0
    assert (
        paired_effect(worse, base, name="acc - acc(base)", threshold=-margin, seed=0).decide()
        == "not held"
    )
    assert (
        paired_effect(same, base, name="acc - acc(base)", threshold=-margin, seed=0).decide()
        == "held"
    )


def test_a_null_method_is_not_held_for_a_gain_claim(rng: np.random.Generator) -> None:
    scores = rng.integers(0, 2, size=(4, 30)).astype(float)
    effect = paired_effect(scores, scores.copy(), name="gain", threshold=2, seed=0, scale=100)
    assert effect.method == "exact" and effect.decide() == "not held"


# ------------------------------------------------------------------ the Effect and the Claim


def test_effects_must_be_finite_and_consistent() -> None:
    good = dict(
        name="x", unit="", estimate=1.0, low=0.5, high=1.5, threshold=0, direction=">=", n=3
    )
    assert Effect(**good, method="t").decide() == "held"
    with pytest.raises(ValueError, match="finite"):
        Effect(**{**good, "high": math.inf}, method="t")
    with pytest.raises(ValueError, match="zero-width"):
        Effect(**{**good, "low": 1.0, "high": 1.0}, method="t")
    with pytest.raises(ValueError, match="zero-width"):
        Effect(**good, method="exact")
    with pytest.raises(ValueError, match="outside its interval"):
        Effect(**{**good, "estimate": 2.0}, method="t")
    with pytest.raises(ValueError, match="direction"):
        Effect(**{**good, "direction": ">"}, method="t")
    with pytest.raises(ValueError, match="at least 2 units"):
        t_effect([1.5], name="x", threshold=0)
    with pytest.raises(ValueError, match="finite"):
        t_effect([1.0, math.nan], name="x", threshold=0)


def test_a_failed_control_beats_the_interval() -> None:
    effect = exact_effect(5.0, name="flops ratio", unit="x", threshold=3.0)
    claim = Claim.test(
        text="Three times cheaper.",
        effect=effect,
        preconditions=[Precondition("gate selected a tile", "tiles >= 1", 0, False)],
    )
    assert (
        claim.verdict == "inconclusive" and claim.reason == "control failed: gate selected a tile"
    )
    assert claim.criterion_met is True  # what the interval alone said
    data = claim.to_dict()
    assert claim_kind(data) == "inconclusive (control failed)"
    assert data["effect"]["method"] == "exact" and data["effect"]["decision"] == "held"


def test_old_keyword_path_still_works_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match="point estimate"):
        claim = Claim("A beats B.", "gap >= 0.05", {"gap": 0.1}, True)
    assert claim.verdict == "held" and claim.reason == "point estimate" and claim.effect is None
    with pytest.warns(DeprecationWarning):
        judged = Claim.judge(text="t", criterion="c", measured={}, holds=False)
    assert judged.verdict == "not held"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Claim.test(text="t", effect=exact_effect(1.0, name="x", threshold=0))  # no warning
    with pytest.raises(ValueError, match="takes its verdict from the effect"):
        Claim("t", "c", {}, True, effect=exact_effect(1.0, name="x", threshold=0))


def _experiment() -> Experiment:
    return Experiment(name="demo", paper="P", claim="C", run=lambda quick, out: None)  # type: ignore[arg-type, return-value]


def test_result_json_report_and_index_carry_the_interval(
    rng: np.random.Generator, tmp_path: Path
) -> None:
    under = t_effect([1.0, 3.5, 2.2], name="gain", unit="pts", threshold=2.0, paper=4.1)
    held = paired_effect(
        rng.normal(5, 1, 30) + 3, rng.normal(5, 1, 30), name="gain", threshold=1, seed=3
    )
    result = Result(
        summary="s",
        metrics={},
        seeds=[0, 1, 2],
        scale="tiny",
        claims=[
            Claim.test(text="Gains 2 points.", effect=under),
            Claim.test(text="Gains 1 point.", effect=held),
        ],
    )
    assert result.verdict == "inconclusive"
    out = tmp_path / "demo"
    write_result(out, _experiment(), result, status="inconclusive", duration_s=1.0, quick=True)
    data = json.loads((out / "result.json").read_text())
    first, second = data["claims"]
    assert first["reason"] == "underpowered" and second["reason"] == "interval"
    for key in ("estimate", "low", "high", "threshold", "direction", "method", "n"):
        assert math.isfinite(first["effect"][key]) if key not in ("direction", "method") else True
    assert first["effect"]["low"] < first["effect"]["threshold"] < first["effect"]["high"]
    assert first["effect"]["paper"] == 4.1 and first["effect"]["n_needed"] > 3
    assert second["effect"]["resample_seed"] == 3
    md = (out / "report.md").read_text()
    assert "inconclusive** (underpowered)" in md
    assert "would decide it at the measured spread" in md
    assert "[" in format_effect(first["effect"]) and "vs >= 2" in format_effect(first["effect"])
    index = write_index(tmp_path).read_text()
    assert "0 inconclusive (control failed), 1 inconclusive (underpowered), 0 error" in index
    assert (
        "Claims (2): 1 held, 0 not held, 0 inconclusive (control failed), 1 inconclusive " in index
    )


# ------------------------------------------------------------------ intervals on a user's data


def test_intervals_for_commands_on_a_users_data(rng: np.random.Generator) -> None:
    from scipy import stats

    from iclr26_common.effects import mean_interval, paired_interval, statistic_interval

    x = rng.normal(size=120)
    y = x + rng.normal(size=120)
    rho = statistic_interval(
        (x, y), lambda a, b: stats.spearmanr(a, b).statistic, seed=0, n_resamples=999
    )
    assert rho.method == "bootstrap" and rho.n == 120 and rho.resample_seed == 0
    assert rho.low < rho.estimate < rho.high and 0.5 < rho.estimate < 0.9
    assert "[" in str(rho) and rho.to_dict()["units"] == "items"
    with pytest.raises(ValueError, match="at least 10 items"):
        statistic_interval((x[:5], y[:5]), lambda a, b: stats.spearmanr(a, b).statistic)
    with pytest.raises(ValueError, match="not finite on the data"):
        statistic_interval(
            (np.ones(20), y[:20]), lambda a, b: stats.spearmanr(a, b).statistic, seed=0
        )
    # one distinct value in 12: most resamples are constant, the correlation undefined there
    lone = np.zeros(12)
    lone[0] = 1.0
    with pytest.raises(ValueError, match="undefined on resamples"):
        statistic_interval(
            (lone, y[:12]), lambda a, b: stats.spearmanr(a, b).statistic, seed=0, n_resamples=999
        )
    assert mean_interval([0.5, 0.7, 0.6]).method == "t"
    same = paired_interval(x, x)
    assert (same.method, same.low, same.high) == ("exact", 0.0, 0.0)


# ------------------------------------------------------------------ stored outputs, any CPU


def test_portable_comparison_helpers() -> None:
    from iclr26_common.testing import (
        assert_mutation_detected,
        assert_portable_close,
        relative_error,
    )

    stored = np.array([[100.0, -50.0], [0.001, 3.0]])
    # one scale for the array: an error of 1e-3 on logits of size 100 is 1e-5 relative
    assert relative_error(stored + 1e-3, stored) == pytest.approx(1e-5)
    assert relative_error(np.zeros(3) + 1e-7, np.zeros(3)) == pytest.approx(1e-7)
    assert relative_error([1.0, math.nan], [1.0, math.nan]) == 0.0
    assert relative_error([1.0, math.nan], [1.0, 2.0]) == math.inf
    assert assert_portable_close(stored * (1 + 2e-6), stored, tol=1e-5) < 1e-5
    with pytest.raises(AssertionError, match=r"logits: relative error .* > tolerance"):
        assert_portable_close(stored * 1.001, stored, tol=1e-5, what="logits")
    with pytest.raises(AssertionError, match="shape"):
        relative_error(stored[:1], stored)
    assert assert_mutation_detected(stored[::-1], stored, tol=1e-5) > 1e-4
    with pytest.raises(AssertionError, match="the tolerance would hide it"):
        assert_mutation_detected(stored * (1 + 5e-5), stored, tol=1e-5)


def test_a_statistic_undefined_without_one_item_falls_back_to_the_percentile_interval() -> None:
    """BCa's jackknife leaves one item out: dispersion's binned correlation needs >= 3 bins and
    raised on 11 of 12 chunks (the quick main job on 071d37b ended in an error)."""
    import numpy as np

    from iclr26_common.effects import statistic_interval

    rng = np.random.default_rng(0)
    x = rng.normal(size=12)
    y = x + rng.normal(size=12)

    def needs_all_twelve(a, b):  # type: ignore[no-untyped-def]
        if len(a) < 12:
            raise ValueError("11 chunks give 2 bins of 4; need >= 3")
        return float(np.corrcoef(a, b)[0, 1])

    interval = statistic_interval((x, y), needs_all_twelve, n_resamples=999)
    assert interval.method == "bootstrap" and interval.low < interval.estimate < interval.high
