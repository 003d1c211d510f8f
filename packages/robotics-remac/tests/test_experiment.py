from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iclr26_common import Experiment, derive_verdict
from iclr26_common.testing import registered_experiment
from robotics_remac.experiment import EXEC_HORIZON, EXPERIMENT, HORIZON, run, settings
from robotics_remac.experiment_claims import (
    LATENCY_BATCHES,
    MEASURED_KEYS,
    SAMPLE_KEYS,
    claims,
    drop,
    effects,
)

N = 300  # planted episodes per cell
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
    "lora_only_d4_paired": 0.5,
    "naive_d4_paired": 0.5,
    "continued_d4_paired": 0.5,
    "paired_episodes": 1200.0,
}


def outcomes(rate: float, n: int = N) -> np.ndarray:
    """0/1 successes of ``n`` shared episodes, the first ``round(rate·n)`` succeeding: planted
    cells are paired (an episode one method solves, a better one solves too)."""
    x = np.zeros(n)
    x[: round(rate * n)] = 1.0
    return x


def latencies(ratio: float, seed: int, n: int = 100) -> np.ndarray:
    """``n`` planted per-boundary latencies (s): 2 ms x ``ratio``, 5 % log-normal jitter."""
    return 0.002 * ratio * np.exp(np.random.default_rng(seed).normal(0.0, 0.05, n))


def good_samples(**rates: float) -> dict[str, np.ndarray]:
    """Samples under which every claim holds (GOOD's rates); ``rates`` override a cell's rate
    (``latency_ratio_bB`` the merged / naive latency ratio at batch ``B``)."""
    r = {
        "naive_d0": 0.9,
        "naive_d3": 0.6,
        "naive_d4": 0.5,
        "remac_d0": 0.9,
        "remac_d4": 0.8,
        "remac_d3_told2": 0.75,
        "remac_d3_told4": 0.7,
        "paired_lora_only": 0.5,
        "paired_naive": 0.5,
        "paired_continued": 0.5,
        **{f"latency_ratio_b{b}": 1.0 for b in LATENCY_BATCHES},
        **rates,
    }
    s = {
        k: outcomes(v, 1200 if k.startswith("paired") else N)
        for k, v in r.items()
        if not k.startswith("latency")
    }
    for i, b in enumerate(LATENCY_BATCHES):
        s[f"latency_naive_b{b}"] = latencies(1.0, 2 * i)
        s[f"latency_remac_merged_b{b}"] = latencies(r[f"latency_ratio_b{b}"], 2 * i + 1)
    assert set(s) == set(SAMPLE_KEYS)
    return s


CLAIM_ORDER = list(MEASURED_KEYS)


def verdicts(m: dict | None = None, **rates: float) -> dict[str, str]:
    return {
        k: c.verdict
        for k, c in zip(
            CLAIM_ORDER, claims({**GOOD, **(m or {})}, good_samples(**rates)), strict=True
        )
    }


def test_entry_point_and_experiment() -> None:
    assert registered_experiment("robotics-remac.async") is EXPERIMENT
    assert isinstance(EXPERIMENT, Experiment) and "2601.20130" in EXPERIMENT.paper


def test_every_claim_is_decided_by_an_interval() -> None:
    """The planted signal holds every claim, each through its effect's 95 % interval (none on a
    point estimate), paired over the shared episodes for the success claims."""
    claim_list = claims(GOOD, good_samples())
    assert [c.verdict for c in claim_list] == ["held"] * 5
    assert all(c.effect is not None and c.reason == "interval" for c in claim_list)
    eff = effects(good_samples())
    assert eff["naive_drops"].method == "paired bootstrap"
    assert eff["naive_drops"].estimate == pytest.approx(40.0)
    assert eff["remac_flatter"].estimate == pytest.approx(0.5 * 40 - 10)
    assert eff["misestimate"].estimate == pytest.approx(100 * (0.725 - 0.6))
    assert eff["latency"].method == "bootstrap" and eff["latency"].unit == "log-%"
    assert derive_verdict(claim_list) == "held"


# Each criterion can fail: a planted change that breaks exactly one claim ("not held").
@pytest.mark.parametrize(
    ("rates", "broken"),
    [
        (
            {
                "naive_d4": 0.85,
                "naive_d3": 0.85,
                "remac_d3_told2": 0.95,
                "remac_d3_told4": 0.95,
                "remac_d4": 0.88,
            },
            "naive_drops",
        ),
        ({"remac_d4": 0.55}, "remac_flatter"),
        ({"paired_lora_only": 0.6}, "lora_only_like_naive"),
        ({"latency_ratio_b8": 1.3}, "latency"),
        ({"remac_d3_told2": 0.5, "remac_d3_told4": 0.5}, "misestimate"),
    ],
)
def test_each_criterion_can_fail(rates: dict, broken: str) -> None:
    got = verdicts(**rates)
    assert got[broken] == "not held", got
    assert all(v == "held" for k, v in got.items() if k != broken and k != "remac_flatter") or (
        broken == "naive_drops"
    )


# The null method (the baseline in the method's place) never passes: for the gain claims the
# baseline itself; for the margin claims (c, e: "no worse than") a method worse than the
# baseline by more than the margin; for (a) a "naive" that does not drop.
@pytest.mark.parametrize(
    ("rates", "claim"),
    [
        ({"naive_d4": 0.9}, "naive_drops"),  # no drop at all: exact 0 < 10 points
        ({"remac_d0": 0.9, "remac_d4": 0.5}, "remac_flatter"),  # REMAC = naive
        ({"paired_lora_only": 0.42}, "lora_only_like_naive"),  # 8 points worse than naive
        ({f"latency_ratio_b{b}": 1.9 for b in LATENCY_BATCHES}, "latency"),  # unmerged's cost
        ({"remac_d3_told2": 0.5, "remac_d3_told4": 0.5}, "misestimate"),  # 10 points worse
    ],
)
def test_null_method_is_not_held(rates: dict, claim: str) -> None:
    assert verdicts(**rates)[claim] == "not held"


def test_too_few_episodes_is_underpowered_not_a_verdict() -> None:
    """(c) on 64 paired episodes with a 3-point gain: the interval straddles +5 points."""
    s = good_samples()
    s["paired_naive"] = outcomes(0.5, 64)
    s["paired_continued"] = outcomes(0.5, 64)
    s["paired_lora_only"] = s["paired_naive"].copy()
    s["paired_lora_only"][[40, 41]] = 1.0
    (c,) = [
        c for k, c in zip(CLAIM_ORDER, claims(GOOD, s), strict=True) if k == "lora_only_like_naive"
    ]
    assert c.verdict == "inconclusive" and c.reason == "underpowered"


@pytest.mark.parametrize(
    ("m", "rates", "expected"),
    [
        # margins of exactly 25 points pass (inclusive)
        ({"zero_action_d0": 0.65}, {}, ["held"] * 5),
        # the base policy is no better than doing nothing: only the latency claim is testable
        (
            {"zero_action_d0": 0.7},
            {},
            ["inconclusive", "inconclusive", "inconclusive", "held", "inconclusive"],
        ),
        # REMAC itself learned nothing at d=0: only (b) is untestable
        ({"remac_d0": 0.3}, {}, ["held", "inconclusive", "held", "held", "held"]),
        # continued plain training of the base gains 10 points: the base is not converged, so
        # (c) cannot tell LoRA from more training (issue 38)
        ({}, {"paired_continued": 0.6}, ["held", "held", "inconclusive", "held", "held"]),
        # naive drops only 5 points: (a) not held and (b) has no drop to halve
        (
            {},
            {"naive_d4": 0.85, "remac_d4": 0.85},
            ["not held", "inconclusive", "held", "held", "held"],
        ),
    ],
)
def test_preconditions_make_claims_inconclusive(m: dict, rates: dict, expected: list) -> None:
    claim_list = claims({**GOOD, **m}, good_samples(**rates))
    assert [c.verdict for c in claim_list] == expected
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
    for claim in by_key.values():  # decided by the effect's interval, never a point estimate
        decision = claim.effect.decide()
        assert claim.criterion_met == (None if decision == "underpowered" else decision == "held")
    # the reported numbers are rounded to 4 decimals: 100 x that is 0.01 points
    drop_pts = 100 * measured["naive_drop"]
    assert by_key["naive_drops"].effect.estimate == pytest.approx(drop_pts, abs=0.011)
    assert by_key["lora_only_like_naive"].effect.n == settings(True)["paired_episodes"]
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


def test_paired_comparison_uses_the_same_episodes() -> None:
    """The same policy as "LoRA-only", naive and the continued base: identical episodes give
    identical per-episode outcomes, so the paired effect is exact (zero width) at 0."""
    import torch

    from robotics_remac.experiment import paired_comparison
    from robotics_remac.experiment_claims import continued_gain
    from robotics_remac.model import FlowPolicy

    torch.manual_seed(0)
    policy = FlowPolicy(channels=8, hidden=8, token_hidden=4, depth=1).eval()
    rates, s = paired_comparison({"lora_only": policy, "base": policy, "continued": policy}, 32, 1)
    assert rates["paired_episodes"] == 32 and set(s) == {
        "paired_lora_only",
        "paired_naive",
        "paired_continued",
    }
    np.testing.assert_array_equal(s["paired_lora_only"], s["paired_naive"])
    gain = continued_gain(s)
    assert gain.method == "exact" and gain.estimate == 0.0


def test_claim_d_planted_slow_policy() -> None:
    """Claim (d) judged on in-loop latencies: a planted slow "REMAC" (a policy sleeping 2 ms per
    episode of the batch) fails it; the same two measurements the other way round pass it."""
    import time

    import torch

    from robotics_remac.experiment_claims import latency_effects
    from robotics_remac.rollout import loop_latency

    def fast(obs, prefix, d, e, gen):  # type: ignore[no-untyped-def]
        return torch.zeros_like(prefix)

    def slow(obs, prefix, d, e, gen):  # type: ignore[no-untyped-def]
        time.sleep(0.002 * obs.shape[0])
        return torch.zeros_like(prefix)

    lat = loop_latency({"naive": fast, "remac_merged": slow}, (1, 8), 12, 2, HORIZON, EXEC_HORIZON)
    s = good_samples()
    for b in LATENCY_BATCHES:  # batch 32 reuses batch 8's measurements
        src = 1 if b == 1 else 8
        s[f"latency_naive_b{b}"], s[f"latency_remac_merged_b{b}"] = (
            lat["naive"][src],
            lat["remac_merged"][src],
        )
    assert {e.decide() for e in latency_effects(s).values()} == {"not held"}
    (slow_claim,) = [c for c in claims(GOOD, s) if "inference time" in c.text]
    assert slow_claim.verdict == "not held"
    for b in LATENCY_BATCHES:  # swapped: merged is the fast one
        s[f"latency_naive_b{b}"], s[f"latency_remac_merged_b{b}"] = (
            s[f"latency_remac_merged_b{b}"],
            s[f"latency_naive_b{b}"],
        )
    (fast_claim,) = [c for c in claims(GOOD, s) if "inference time" in c.text]
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
    result = report(Measurement(cfg, rows, metrics, timings, 60, 0.97, good_samples()), tmp_path)
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


def test_paired_difference_ci_by_hand() -> None:
    """``rollout.paired_difference_ci`` (kept public; the claims use ``paired_effect`` since
    issue 38)."""
    from robotics_remac.rollout import paired_difference_ci

    # differences [1, 0, 0, 1]: mean 0.5, sample sd sqrt(1/3), half-width 1.96 sqrt(1/3) / 2
    mean, low, high = paired_difference_ci(np.array([1, 0, 1, 1]), np.array([0, 0, 1, 0]))
    assert mean == pytest.approx(0.5)
    assert (low, high) == pytest.approx((0.5 - 0.5658032638, 0.5 + 0.5658032638))
    with pytest.raises(ValueError, match="equal-length"):
        paired_difference_ci(np.ones(3), np.ones(4))


def test_weight_ema_of_the_continued_control() -> None:
    """Claim (c)'s control evaluates an EMA of its weights like the LoRA-only finetune: with
    decay 0.5, weights 1 after the first step then 3 after the second give the EMA 2 (by hand),
    copied into the weights when fit ends; frozen parameters are left alone."""
    import torch

    from robotics_remac.experiment import _weight_ema_callback

    module = torch.nn.Module()
    module.policy = torch.nn.Linear(2, 1)
    module.policy.bias.requires_grad_(False)
    callback = _weight_ema_callback(0.5)
    with torch.no_grad():
        module.policy.weight.fill_(1.0)
        module.policy.bias.fill_(7.0)
        callback.on_train_batch_end(None, module, None, None, 0)
        module.policy.weight.fill_(3.0)
        callback.on_train_batch_end(None, module, None, None, 1)
    callback.on_train_end(None, module)
    assert module.policy.weight.tolist() == [[2.0, 2.0]]
    assert module.policy.bias.tolist() == [7.0]


def test_continued_control_trains_with_the_ema_callback(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_continue_base(..., ema_decay=d)`` fits with the EMA callback; without it, none."""
    import iclr26_common.lightning as lightning_helpers
    from robotics_remac import experiment
    from robotics_remac.model import FlowPolicy

    seen: list[list[object]] = []

    class FakeTrainer:
        def __init__(self, callbacks: list[object]) -> None:
            self.callbacks = list(callbacks)

        def fit(self, module: object, dm: object) -> None:
            seen.append(self.callbacks)

    monkeypatch.setattr(
        lightning_helpers, "quiet_trainer", lambda callbacks=(), **kw: FakeTrainer(callbacks)
    )
    base = FlowPolicy(horizon=8, channels=32, hidden=64, token_hidden=16, depth=2)
    experiment._continue_base(base, None, 1, False, 0.9)
    experiment._continue_base(base, None, 1, False)
    assert [type(c).__name__ for c in seen[0]] == ["WeightEMA"] and seen[1] == []
