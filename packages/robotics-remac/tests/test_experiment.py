from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iclr26_common import Experiment, derive_verdict
from iclr26_common.testing import registered_experiment
from robotics_remac.experiment import EXEC_HORIZON, EXPERIMENT, HORIZON, run, settings
from robotics_remac.experiment_claims import (
    LATENCY_BATCHES,
    LATENCY_RATIO_MAX,
    MEASURED_KEYS,
    NAIVE_DROP_MIN,
    claims,
    drop,
    verdict_checks,
)

GOOD = {
    "naive_d0": 0.9,
    "naive_d4": 0.5,
    "naive_d3": 0.6,
    "naive_drop": 0.4,
    "remac_d0": 0.9,
    "remac_d4": 0.8,
    "remac_drop": 0.1,
    "lora_only_d4": 0.52,
    "remac_misestimated": 0.7,
    "naive_latency_ms_b1": 1.0,
    "remac_merged_latency_ms_b1": 1.02,
    "latency_ratio_b1": 1.02,
    "latency_ratio_b8": 1.0,
    "latency_ratio_b32": 0.99,
    "latency_ratio": 1.02,
    "zero_action_d0": 0.1,
    "lora_only_d4_paired": 0.51,
    "naive_d4_paired": 0.5,
    "paired_diff": 0.01,
    "paired_ci_low": -0.015,
    "paired_ci_high": 0.035,
    "paired_episodes": 1200.0,
}


def test_entry_point_and_experiment() -> None:
    assert registered_experiment("robotics-remac.async") is EXPERIMENT
    assert isinstance(EXPERIMENT, Experiment) and "2601.20130" in EXPERIMENT.paper


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, (True, True, True, True, True)),
        ({"naive_drop": 0.05}, (False, False, True, True, True)),
        ({"remac_drop": 0.25}, (True, False, True, True, True)),
        # LoRA-only's paired CI wholly above the band (a gain): decided, not held
        ({"paired_ci_low": 0.06, "paired_ci_high": 0.12}, (True, True, False, True, True)),
        # ... or wholly below it
        ({"paired_ci_low": -0.2, "paired_ci_high": -0.051}, (True, True, False, True, True)),
        ({"latency_ratio": 1.2}, (True, True, True, False, True)),
        ({"remac_misestimated": 0.55}, (True, True, True, True, False)),
        # inclusive thresholds
        (
            {
                "naive_drop": 0.10,
                "remac_drop": 0.05,
                "paired_ci_low": -0.05,
                "paired_ci_high": 0.05,
                "latency_ratio": 1.05,
            },
            (True, True, True, True, True),
        ),
        # naive does not drop at all: REMAC cannot be "flatter"
        ({"naive_drop": 0.0, "remac_drop": 0.0}, (False, False, True, True, True)),
    ],
)
def test_verdict_rule(change: dict, expected: tuple) -> None:
    m = {**GOOD, **change}
    assert tuple(verdict_checks(m).values()) == expected
    claim_list = claims(m)
    assert [c.criterion_met for c in claim_list] == list(expected)
    # where naive does not drop 10 points, (b) cannot be tested: inconclusive, (a) not held
    if m["naive_drop"] < NAIVE_DROP_MIN:
        assert claim_list[1].verdict == "inconclusive"
    else:
        assert [c.held for c in claim_list] == list(expected)
    assert derive_verdict(claim_list) == ("held" if all(expected) else "not held")


@pytest.mark.parametrize(
    ("change", "verdicts"),
    [
        # margins of exactly 25 points pass (inclusive)
        ({"zero_action_d0": 0.65}, ["held"] * 5),
        # the base policy is no better than doing nothing: only the latency claim is testable
        (
            {"zero_action_d0": 0.7},
            ["inconclusive", "inconclusive", "inconclusive", "held", "inconclusive"],
        ),
        # REMAC itself learned nothing at d=0: only (b) is untestable
        ({"remac_d0": 0.3, "remac_drop": 0.0}, ["held", "inconclusive", "held", "held", "held"]),
        # the paired CI straddles the +5-point edge: (c) cannot be decided with these episodes
        (
            {"paired_ci_low": 0.02, "paired_ci_high": 0.08},
            ["held", "held", "inconclusive", "held", "held"],
        ),
        (
            {"paired_ci_low": -0.09, "paired_ci_high": -0.01},
            ["held", "held", "inconclusive", "held", "held"],
        ),
    ],
)
def test_preconditions_make_claims_inconclusive(change: dict, verdicts: list) -> None:
    claim_list = claims({**GOOD, **change})
    assert [c.verdict for c in claim_list] == verdicts
    for claim in claim_list:
        assert (claim.verdict == "inconclusive") == bool(claim.failed_preconditions)


def test_scale_and_execution_horizon() -> None:
    for quick in (True, False):
        cfg = settings(quick)
        assert {0, 3, 4} <= set(cfg["delays"])
        assert {"naive", "lora_only", "remac", "planner"} <= set(cfg["methods"])
        for d in cfg["delays"]:  # one e valid for every delay
            assert max(1, d) <= EXEC_HORIZON <= HORIZON - d
    assert settings(False)["episodes"] >= 200
    assert drop({0: 0.9, 4: 0.4}) == pytest.approx(0.5)


@pytest.mark.slow
def test_quick_run_end_to_end(tmp_path: Path) -> None:
    import csv
    import math

    result = run(quick=True, out_dir=tmp_path)
    assert (tmp_path / "success_vs_delay.png").stat().st_size > 0
    assert result.metrics["demos_read_back"] == settings(True)["demos"]
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    # 4 methods x 3 delays + REMAC told the wrong delay twice; every cell ran its episodes
    cells = {(r["method"], int(r["delay"]), int(r["assumed_delay"])) for r in rows}
    expected = {(m, d, d) for m in ("naive", "lora_only", "remac", "planner") for d in (0, 3, 4)}
    assert cells == expected | {("remac", 3, 2), ("remac", 3, 4)} and len(rows) == len(cells)
    for row in rows:
        assert 0.0 <= float(row["ci_low"]) <= float(row["success"]) <= float(row["ci_high"]) <= 1.0
        assert int(row["episodes"]) == settings(True)["episodes"]
        assert math.isfinite(float(row["prefix_deviation"])) and float(row["mean_steps"]) > 0
    # each claim carries the numbers it was judged on (finite), and a verdict its rule implies
    assert [c.measured.keys() for c in result.claims] == [
        set(keys) for keys in MEASURED_KEYS.values()
    ]
    measured = {k: v for c in result.claims for k, v in c.measured.items()}
    assert all(math.isfinite(v) for v in measured.values())
    for claim in result.claims:  # inconclusive exactly when a pre-registered control failed
        assert (claim.verdict == "inconclusive") == bool(claim.failed_preconditions)
    assert 0.0 <= result.metrics["zero_action_d0"] <= 1.0
    # the prefix-aware ceiling is reported (it needs no training: it succeeds at quick scale)
    planner_d0 = next(r for r in rows if (r["method"], r["delay"]) == ("planner", "0"))
    assert result.metrics["planner_d0"] == pytest.approx(float(planner_d0["success"]), abs=1e-4)
    assert result.metrics["planner_d0"] > 0.5 and "| planner |" in result.table_markdown
    by_key = dict(zip(MEASURED_KEYS, result.claims, strict=True))
    assert by_key["naive_drops"].criterion_met == (measured["naive_drop"] >= NAIVE_DROP_MIN)
    assert by_key["latency"].criterion_met == (measured["latency_ratio"] <= LATENCY_RATIO_MAX)
    naive_d0 = next(r for r in rows if (r["method"], r["delay"]) == ("naive", "0"))
    assert measured["naive_d0"] == pytest.approx(float(naive_d0["success"]), abs=1e-4)
    for b in LATENCY_BATCHES:  # claim (d) is measured in the loop at every batch size
        ratio = (
            result.metrics[f"remac_merged_latency_ms_b{b}"]
            / (result.metrics[f"naive_latency_ms_b{b}"])
        )
        assert result.metrics[f"latency_ratio_b{b}"] == pytest.approx(ratio, rel=1e-2)
    assert result.metrics["latency_ratio"] == max(
        result.metrics[f"latency_ratio_b{b}"] for b in LATENCY_BATCHES
    )


def test_paired_difference_ci_by_hand() -> None:
    from robotics_remac.rollout import paired_difference_ci

    # differences [1, 0, 0, 1]: mean 0.5, sample sd sqrt(1/3), half-width 1.96 sqrt(1/3) / 2
    mean, low, high = paired_difference_ci(np.array([1, 0, 1, 1]), np.array([0, 0, 1, 0]))
    assert mean == pytest.approx(0.5)
    assert (low, high) == pytest.approx((0.5 - 0.5658032638, 0.5 + 0.5658032638))
    with pytest.raises(ValueError, match="equal-length"):
        paired_difference_ci(np.ones(3), np.ones(4))


@pytest.mark.parametrize(("gain", "verdict"), [(0.0, "held"), (0.10, "not held")])
def test_claim_c_planted_gain(gain: float, verdict: str) -> None:
    """Planted paired successes of 1200 episodes: no gain -> held; a 10-point gain -> not held
    (the CI, about +-1.7 points wide, is wholly above the band). Pairing is what makes it
    decidable: the unpaired SE of the same two rates would be about 2 points."""
    from robotics_remac.rollout import paired_difference_ci

    rng = np.random.default_rng(0)
    naive = (rng.random(1200) < 0.5).astype(float)
    lora = naive.copy()
    zeros = np.flatnonzero(naive == 0)
    lora[rng.choice(zeros, int(gain * 1200), replace=False)] = 1.0
    diff, low, high = paired_difference_ci(lora, naive)
    paired = {"paired_diff": diff, "paired_ci_low": low, "paired_ci_high": high}
    claim_c = claims({**GOOD, **paired})[2]
    assert claim_c.verdict == verdict and not claim_c.failed_preconditions


def test_paired_comparison_uses_the_same_episodes() -> None:
    """The same policy as "LoRA-only" and as naive: identical episodes give a zero-width CI."""
    import torch

    from robotics_remac.experiment import paired_comparison
    from robotics_remac.model import FlowPolicy

    torch.manual_seed(0)
    policy = FlowPolicy(channels=8, hidden=8, token_hidden=4, depth=1).eval()
    out = paired_comparison({"lora_only": policy, "base": policy}, 32, seed=1)
    assert out["paired_diff"] == out["paired_ci_low"] == out["paired_ci_high"] == 0.0
    assert out["paired_episodes"] == 32


def test_claim_d_planted_slow_policy() -> None:
    """Claim (d) judged on in-loop latencies: a planted slow "REMAC" (a policy sleeping 2 ms per
    episode of the batch) fails it; the same two measurements the other way round pass it."""
    import time

    import torch

    from robotics_remac.experiment import latency_metrics
    from robotics_remac.rollout import loop_latency

    def fast(obs, prefix, d, e, gen):  # type: ignore[no-untyped-def]
        return torch.zeros_like(prefix)

    def slow(obs, prefix, d, e, gen):  # type: ignore[no-untyped-def]
        time.sleep(0.002 * obs.shape[0])
        return torch.zeros_like(prefix)

    lat = loop_latency({"naive": fast, "remac_merged": slow}, (1, 8), 4, 2, HORIZON, EXEC_HORIZON)
    m = latency_metrics(lat)
    planted = {**GOOD, **{k: v for k, v in m.items() if k in GOOD}}
    planted.update({f"latency_ratio_b{b}": m.get(f"latency_ratio_b{b}", 1.0) for b in (1, 8, 32)})
    (held_before,) = [c for c in claims(GOOD) if "inference time" in c.text]
    (slow_claim,) = [c for c in claims(planted) if "inference time" in c.text]
    assert held_before.held and not slow_claim.held
    swapped = latency_metrics({"naive": lat["remac_merged"], "remac_merged": lat["naive"]})
    assert swapped["latency_ratio"] < 1 < m["latency_ratio"]
    (fast_claim,) = [c for c in claims({**GOOD, **swapped}) if "inference time" in c.text]
    assert fast_claim.held


def test_miniature_ema_keeps_the_finetune() -> None:
    """Upstream's 0.999 over a 360-step finetune leaves ~70 % of the weight on the initial
    (≈ zero) LoRA snapshot; the miniature decay puts < 1e-4 there and caps at upstream's."""
    from robotics_remac.experiment import UPSTREAM_EMA_DECAY, miniature_ema_decay

    assert UPSTREAM_EMA_DECAY**360 > 0.69
    decay = miniature_ema_decay(360)
    assert decay**360 < 1e-4
    assert miniature_ema_decay(10**7) == UPSTREAM_EMA_DECAY
    assert 0.0 <= miniature_ema_decay(3) < decay
    with pytest.raises(ValueError, match="positive"):
        miniature_ema_decay(0)


def test_report_writes_up_planted_numbers_without_training(tmp_path: Path) -> None:
    """The report is built from a Measurement alone (no training): planted numbers come out in
    the summary, the table, the CSV and the judged claims."""
    import csv

    from robotics_remac.experiment import Measurement, report

    cfg = settings(True)
    rows = [
        {
            "method": m,
            "delay": d,
            "assumed_delay": d,
            "success": 0.5 + 0.01 * d,
            "ci_low": 0.4,
            "ci_high": 0.6,
        }
        for m in cfg["methods"]
        for d in cfg["delays"]
    ]
    metrics = {
        **GOOD,
        "lora_only_d4": 0.52,
        "planner_d0": 0.97,
        "planner_d4": 0.95,
        "planner_drop": 0.02,
        **{f"{n}_latency_ms_b{b}": 1.0 for n in LATENCY_NAMES for b in LATENCY_BATCHES},
    }
    timings = {"data_s": 1.0, "base_fit_s": 2.0}
    result = report(Measurement(cfg, rows, metrics, timings, 60, 0.97), tmp_path)
    assert result.summary.startswith("naive 0.900->0.500, REMAC 0.900->0.800")
    assert "| remac | 0.500 [0.40, 0.60] | 0.530 [0.40, 0.60] | 0.540 [0.40, 0.60] |" in (
        result.table_markdown
    )
    assert [c.verdict for c in result.claims] == ["held"] * 5
    assert result.metrics["demos_read_back"] == 60 and result.metrics["finetune_ema_decay"] == 0.97
    assert "not run here: bid" in result.scale
    written = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert len(written) == len(rows) and (tmp_path / "success_vs_delay.png").stat().st_size > 0


LATENCY_NAMES = ("naive", "remac_merged", "remac_unmerged")
