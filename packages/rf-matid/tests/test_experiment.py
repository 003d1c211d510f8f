from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from iclr26_common import Experiment, derive_verdict
from iclr26_common.testing import registered_experiment
from rf_matid.benchmark import BenchmarkRow
from rf_matid.experiment import (
    ANGLE_GAP_MAX,
    EXPERIMENT,
    S1_MIN_LEARNED,
    SPLIT_SEED,
    SPLITS,
    Measurement,
    SharedItems,
    claims,
    per_seed_accuracy,
    report,
    results_table,
    run,
    settings,
    shared_items,
)

#: ``benchmark_row`` (conftest) and factories like it: keyword fields -> a BenchmarkRow
RowFactory = Callable[..., BenchmarkRow]

N_ITEMS = 135  # about the shared spectra of the full run (S1 test x angles 2/5/8)


def _scores(rate: float, seeds: int = 4, items: int = N_ITEMS, seed: int = 0) -> np.ndarray:
    """0/1 correctness ``[seeds, items]`` with about ``rate`` ones."""
    return (np.random.default_rng(seed).random((seeds, items)) < rate).astype(float)


def _flip(scores: np.ndarray, fraction: float, seed: int = 1) -> np.ndarray:
    """``scores`` with about ``fraction`` of its correct answers turned wrong."""
    lost = np.random.default_rng(seed).random(scores.shape) < fraction
    return np.where(lost, 0.0, scores)


def _shared(s1: np.ndarray, s3: np.ndarray) -> SharedItems:
    return SharedItems([f"f{i}.csv" for i in range(s1.shape[1])], s1, s3)


def test_registered_under_the_entry_point_group() -> None:
    assert registered_experiment("rf-matid.benchmark") is EXPERIMENT
    assert isinstance(EXPERIMENT, Experiment) and "2601.20377" in EXPERIMENT.paper


# ------------------------------------------------------------------ claim (a): S1 >= 80 %


@pytest.mark.parametrize(
    ("s1", "verdict"),
    [
        ([0.90, 0.92, 0.88, 0.91], "held"),  # planted: well above 80 %
        ([0.55, 0.60, 0.52, 0.58], "not held"),  # a model far below: the interval is below 80
        ([0.852, 0.789, 0.85, 0.79], "inconclusive"),  # the issue-22 spread straddles 80 %
    ],
)
def test_claim_a_can_hold_fail_and_be_underpowered(s1: list[float], verdict: str) -> None:
    shared = _shared(_scores(0.9), _scores(0.9))
    a, _ = claims(s1, shared)
    assert a.verdict == verdict
    assert a.effect is not None and a.effect.method == "t" and a.effect.n == 4
    assert a.effect.threshold == 80.0 and a.effect.direction == ">="
    assert a.effect.estimate == pytest.approx(100 * np.mean(s1))


# ------------------------------------------------------ claim (d): S3-mod1 within 5 pts of S1


def test_claim_d_holds_when_the_angle_costs_little() -> None:
    """Planted: the S3-mod1 model loses ~1 % of the S1 model's correct answers."""
    s1 = _scores(0.9, seeds=8, items=600)
    _, d = claims([0.9] * 8, _shared(s1, _flip(s1, 0.01)))
    assert d.verdict == "held", d.effect
    assert d.effect is not None and d.effect.high <= ANGLE_GAP_MAX


def test_claim_d_fails_for_a_model_worse_by_more_than_the_margin() -> None:
    """The null method of a within-margin claim: a model 30 points worse is "not held"."""
    s1 = _scores(0.9)
    _, d = claims([0.9] * 4, _shared(s1, _flip(s1, 0.33)))
    assert d.verdict == "not held", d.effect
    assert d.effect is not None and d.effect.low > ANGLE_GAP_MAX


def test_claim_d_is_underpowered_near_the_margin() -> None:
    """A gap of about 5 points with four seeds straddles the threshold."""
    s1 = _scores(0.9)
    s3 = np.stack(
        [
            _flip(row, f, seed=k)
            for k, (row, f) in enumerate(zip(s1, (0.0, 0.1, 0.03, 0.09), strict=True))
        ]
    )
    _, d = claims([0.9] * 4, _shared(s1, s3))
    assert d.verdict == "inconclusive" and d.reason == "underpowered", d.effect


def test_claim_d_identical_models_give_an_exact_zero_gap() -> None:
    s1 = _scores(0.9)
    _, d = claims([0.9] * 4, _shared(s1, s1.copy()))
    assert d.effect is not None and d.effect.method == "exact" and d.effect.estimate == 0.0
    assert d.verdict == "held"


def test_claim_d_is_inconclusive_while_s1_is_near_chance() -> None:
    """The 3-epoch run of the review: a split claim was "held" with every seed predicting one
    class from an S1 of 30 %. Now (d) is not decided below S1 = 50 %."""
    s1 = _scores(0.3)
    _, d = claims([0.29, 0.31, 0.30, 0.30], _shared(s1, s1.copy()))
    assert d.verdict == "inconclusive" and d.criterion_met is True
    (failed,) = d.failed_preconditions
    assert failed.measured == {"S1_pct": 30.0, "chance_pct": 6.25}
    assert "50 %" in failed.criterion
    _, just = claims([S1_MIN_LEARNED] * 4, _shared(s1, s1.copy()))
    assert just.verdict == "held"


# --------------------------------------------- demoted claims (issue 39): generator properties


def test_demoted_b_the_generator_makes_near_range_easier() -> None:
    """Claim (b) (S2-mod2: nearer distances are harder) cannot be tested on this generator: its
    echo falls as 1/R against a fixed leakage, so the S2-mod2 test range (<= 700 mm) has a
    higher echo-to-interference ratio than its train range. Only the real data can test (b)."""
    from rf_matid.synth import echo_to_interference_db

    distances = np.arange(200, 2001, 50)
    ratio = echo_to_interference_db(distances)
    near, far = ratio[distances <= 700], ratio[distances >= 750]
    assert near.mean() > far.mean() + 5


def test_demoted_c_the_far_range_does_not_overlap_the_training_range() -> None:
    """Claim (c) (S2-mod3 drops >= 10 points) held at 7x the paper's effect because every
    far test distance (1500-2000 mm) has a lower echo-to-interference ratio than every training
    distance (200-1450 mm): a property of the generator, not evidence about the paper."""
    from rf_matid.synth import echo_to_interference_db

    distances = np.arange(200, 2001, 50)
    ratio = echo_to_interference_db(distances)
    train, test = ratio[distances <= 1450], ratio[distances >= 1500]
    assert test.max() < train.min()
    assert np.all(np.diff(ratio) < 0)  # monotone: no distance in one range resembles the other


# ----------------------------------------------------------------- scale and the whole run


def test_scale_follows_the_paper_split() -> None:
    for quick in (True, False):
        config = settings(quick)
        assert config["samples_per_position"] >= 2  # S1: random split over repeated measurements
        assert len(config["seeds"]) >= 2  # an interval needs two seeds
    assert len(settings(False)["seeds"]) >= 4
    assert SPLIT_SEED == 42 and SPLITS == ("S1", "S3-mod1")


@pytest.mark.parametrize("quick", [True, False])
def test_settings_cover_every_split(quick: bool) -> None:
    from rf_matid.splits import make_split

    config = settings(quick)
    distances, angles = np.meshgrid(config["distances_mm"], config["angles_deg"])
    for split in SPLITS:
        name, _, mod = split.partition("-mod")
        parts = make_split(distances.ravel(), angles.ravel(), name, int(mod or 0))
        assert all(len(parts[p]) > 0 for p in ("train", "val", "test")), split


def test_quick_run_end_to_end(tmp_path: Path) -> None:
    """The CI smoke run: data, 4 trainings, claims, plots."""
    result = run(True, tmp_path)
    config = settings(True)
    assert len(result.claims) == 2
    assert all(c.effect is not None for c in result.claims)
    assert result.verdict == derive_verdict(result.claims)
    assert result.seeds == config["seeds"]
    n_spectra = 16 * len(config["distances_mm"]) * len(config["angles_deg"]) * 2
    rows = result.metrics["rows"]
    assert [r["split"] for r in rows] == [s for s in SPLITS for _ in config["seeds"]]
    for row in rows:
        assert row["n_train"] + row["n_val"] + row["n_test"] == n_spectra
        assert row["epochs"] == config["epochs"]
        assert "test_files" not in row
    assert result.metrics["shared_spectra"] > 10
    per_seed = result.metrics["accuracy_per_seed"]["material_id"]["S1"]
    assert result.claims[0].effect.estimate == pytest.approx(100 * np.mean(per_seed))
    assert "S1" in result.table_markdown
    for name in result.plots:
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def _row(
    benchmark_row: RowFactory, split: str, seed: int, files: list[str], correct: list[int]
) -> BenchmarkRow:
    return benchmark_row(
        arch="material_id",
        split=split,
        seed=seed,
        epochs=8,
        n_test=len(files),
        accuracy=sum(correct) / len(correct),
        train_seconds=1.0,
        test_files=files,
        test_correct=correct,
    )


def test_shared_items_pairs_spectra_and_seeds(benchmark_row: RowFactory) -> None:
    s1_files = ["a", "b", "c", "d"]
    s3_files = ["c", "e", "a"]
    rows = [
        _row(benchmark_row, "S1", 0, s1_files, [1, 1, 0, 1]),
        _row(benchmark_row, "S3-mod1", 0, s3_files, [1, 0, 0]),
        _row(benchmark_row, "S1", 1, s1_files, [0, 1, 1, 1]),
        _row(benchmark_row, "S3-mod1", 1, s3_files, [0, 1, 1]),
    ]
    shared = shared_items(rows, [0, 1])
    assert shared.files == ["a", "c"]
    assert shared.s1.tolist() == [[1, 0], [0, 1]]  # a, c of seed 0; a, c of seed 1
    assert shared.s3.tolist() == [[0, 1], [1, 0]]
    rows[3] = _row(benchmark_row, "S3-mod1", 1, ["e"], [1])
    with pytest.raises(ValueError, match="shared spectra"):
        shared_items(rows, [0, 1])


def test_report_is_a_function_of_the_measured_numbers(benchmark_row: RowFactory) -> None:
    """The report text and metrics come from the measurement alone (no training, no files)."""
    config = settings(False)
    files = [f"x{i}.csv" for i in range(40)]
    rng = np.random.default_rng(0)
    rows = []
    for split, rate in (("S1", 0.9), ("S3-mod1", 0.88)):
        for seed in config["seeds"]:
            rows.append(
                _row(
                    benchmark_row, split, seed, files, (rng.random(40) < rate).astype(int).tolist()
                )
            )
    measurement = Measurement(
        quick=False,
        config=config,
        rows=rows,
        per_seed=per_seed_accuracy(rows, config["models"]),
        data_seconds=12.0,
        train_seconds=345.0,
        workers=2,
    )
    result = report(measurement, ["bars.png"])
    assert list(result.metrics["verdicts"]) == ["s1_high", "s3_mod1_near_s1"]
    assert result.metrics["shared_spectra"] == 40
    assert "Time: data 12 s, training and testing 345 s (2 parallel" in result.details
    assert "= 2464 spectra" in result.scale  # 16 classes x 7 distances x 11 angles x 2
    assert result.plots == ["bars.png"] and result.seeds == [0, 1, 2, 3]
    assert "95 %" in result.claims[0].criterion
    s1 = measurement.per_seed["material_id"]["S1"]
    assert f"S1 {100 * np.mean(s1):.1f} %" in result.summary
    assert result.metrics["timing_s"] == {"data": 12.0, "train_test": 345.0}


def test_results_table_shows_no_spread_for_one_seed(benchmark_row: RowFactory) -> None:
    """Issue 39: one seed has no spread; the table shows its value and n=1, not "± 0.0"."""
    files = ["a.csv", "b.csv"]
    rows = [_row(benchmark_row, split, 0, files, [1, 0]) for split in ("S1", "S3-mod1")]
    config = {**settings(True), "seeds": [0]}
    measurement = Measurement(
        quick=True,
        config=config,
        rows=rows,
        per_seed=per_seed_accuracy(rows, config["models"]),
        data_seconds=1.0,
        train_seconds=1.0,
        workers=1,
    )
    table = results_table(measurement)
    assert "| S1 | " in table and "| 50.0 | 50.0 (n=1) |" in table
    assert "± 0.0" not in table
