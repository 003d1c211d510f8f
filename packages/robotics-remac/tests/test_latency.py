"""Claim (d)'s in-loop latency measurement and the delay driven by measured latency."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from robotics_remac.env import ChaseParams, expert_action
from robotics_remac.experiment import EXEC_HORIZON, HORIZON, latency_metrics
from robotics_remac.experiment_claims import LATENCY_RATIO_MAX, MEASURED_KEYS
from robotics_remac.latency import MeasuredDelay
from robotics_remac.rollout import loop_latency, rollout


def expert_chunker(obs, prefix, d, e, gen):  # type: ignore[no-untyped-def]
    """The expert's current action held over the chunk (deterministic)."""
    u = torch.from_numpy(expert_action(obs.numpy())).float()
    return u[:, None, :].expand(-1, prefix.shape[1], -1).clone()


def zeros_chunker(obs, prefix, d, e, gen):  # type: ignore[no-untyped-def]
    return torch.zeros_like(prefix)


def slow_chunker(per_episode_s: float):  # type: ignore[no-untyped-def]
    """A planted slow policy: sleeps ``per_episode_s`` per episode in the batch."""

    def chunk(obs, prefix, d, e, gen):  # type: ignore[no-untyped-def]
        time.sleep(per_episode_s * obs.shape[0])
        return torch.zeros_like(prefix)

    return chunk


def test_rollout_records_one_latency_per_boundary() -> None:
    # zero actions never succeed: 120 steps / e=4 = 30 boundaries after the first chunk
    stats = rollout(zeros_chunker, 3, 2, HORIZON, EXEC_HORIZON, seed=0)
    assert stats.chunk_latency_s.shape == (30,)
    assert (stats.chunk_latency_s > 0).all()


def test_loop_latency_reacts_to_a_planted_slow_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    # The loop's timer is a virtual clock that only the policies advance (1 ms per episode for
    # the fast one, 3 ms for the slow one): the planted latencies are exact whatever the load.
    import types

    from robotics_remac import rollout as rollout_module

    clock = FakeClock()
    monkeypatch.setattr(rollout_module, "time", types.SimpleNamespace(perf_counter=clock))

    def planted(per_episode_s: float):  # type: ignore[no-untyped-def]
        def chunk(obs, prefix, d, e, gen):  # type: ignore[no-untyped-def]
            clock.now += per_episode_s * obs.shape[0]
            return torch.zeros_like(prefix)

        return chunk

    lat = loop_latency(
        {"naive": planted(0.001), "remac_merged": planted(0.003)},
        batches=(1, 8),
        min_chunks=4,
        delay=2,
        horizon=HORIZON,
        exec_horizon=EXEC_HORIZON,
    )
    assert all(len(v) >= 4 for per in lat.values() for v in per.values())
    slow, fast = lat["remac_merged"], lat["naive"]
    # the planted 3 ms (batch 1) and 24 ms (batch 8) are the loop's numbers, and 1 / 8 ms
    assert np.allclose(slow[1], 0.003) and np.allclose(slow[8], 0.024)
    assert np.allclose(fast[1], 0.001) and np.allclose(fast[8], 0.008)
    m = latency_metrics(lat)
    assert m["latency_ratio_b1"] == pytest.approx(3.0) and m["latency_ratio_b8"] == pytest.approx(
        3.0
    )
    assert m["latency_ratio"] > LATENCY_RATIO_MAX


def test_latency_metrics_by_hand() -> None:
    ms = 1e-3
    lat = {
        "naive": {1: np.array([1, 2, 9]) * ms, 32: np.array([4.0, 4.0]) * ms},
        "remac_merged": {1: np.array([2, 2, 0.5]) * ms, 32: np.array([5.0, 5.0]) * ms},
    }
    m = latency_metrics(lat)
    assert m["naive_latency_ms_b1"] == pytest.approx(2.0)
    assert m["remac_merged_latency_ms_b32"] == pytest.approx(5.0)
    assert m["latency_ratio_b1"] == pytest.approx(1.0)
    assert m["latency_ratio_b32"] == pytest.approx(1.25)
    assert m["latency_ratio"] == pytest.approx(1.25)  # the worst batch decides
    assert "latency_ratio" in MEASURED_KEYS["latency"]


def test_measured_delay_rule_by_hand() -> None:
    md = MeasuredDelay(control_period=0.05, max_delay=4, window=2)
    assert md.assumed() == 4  # nothing measured yet: the cap
    assert [md.delay_for(x) for x in (0.0, 0.001, 0.05, 0.0501, 0.1, 0.149, 0.5)] == [
        0,
        1,
        1,
        2,
        2,
        3,
        4,
    ]
    assert md.capped == 0
    assert [md.record(x) for x in (0.01, 0.12, 0.02)] == [1, 3, 1]
    assert md.assumed() == 3  # the largest of the last two (0.12, 0.02)
    md.record(0.03)
    assert md.assumed() == 1
    assert md.record(0.3) == 4 and md.capped == 1  # 6 steps, capped at 4
    assert MeasuredDelay(0.05, 4, initial_delay=1).assumed() == 1
    for bad in ({"control_period": 0.0}, {"max_delay": -1}, {"window": 0}, {"initial_delay": 5}):
        with pytest.raises(ValueError):
            MeasuredDelay(**{"control_period": 0.05, "max_delay": 4, **bad})
    with pytest.raises(ValueError, match="latency"):
        md.record(float("nan"))


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def timed_chunker(clock: FakeClock, latencies):  # type: ignore[no-untyped-def]
    """The expert chunker, taking the next planted latency of ``latencies`` on ``clock``."""
    it = iter(latencies)

    def chunk(obs, prefix, d, e, gen):  # type: ignore[no-untyped-def]
        clock.now += next(it)
        return expert_chunker(obs, prefix, d, e, gen)

    return chunk


def test_rollout_with_measured_delay_equals_the_fixed_delay_it_measures() -> None:
    clock = FakeClock()
    md = MeasuredDelay(control_period=0.05, max_delay=4, clock=clock)
    online = rollout(timed_chunker(clock, [0.12] * 100), 64, md, HORIZON, EXEC_HORIZON, seed=3)
    fixed = rollout(expert_chunker, 64, 3, HORIZON, EXEC_HORIZON, seed=3)  # ceil(0.12/0.05) = 3
    np.testing.assert_array_equal(online.success, fixed.success)
    assert online.prefix_deviation == pytest.approx(fixed.prefix_deviation)
    assert online.extra["mean_delay"] == 3 and online.extra["mean_assumed_delay"] == 3
    assert online.extra["underestimated"] == 0 and online.extra["capped"] == 0
    # a different measured latency is a different rollout (the delay really follows it)
    clock2 = FakeClock()
    md2 = MeasuredDelay(control_period=0.05, max_delay=4, clock=clock2)
    other = rollout(timed_chunker(clock2, [0.04] * 100), 64, md2, HORIZON, EXEC_HORIZON, seed=3)
    assert other.extra["mean_delay"] == 1 and other.success_rate > online.success_rate


def test_a_latency_spike_is_underestimated_once_then_assumed() -> None:
    clock = FakeClock()
    md = MeasuredDelay(control_period=0.05, max_delay=4, window=16, clock=clock)
    planted = [0.04] * 4 + [0.18] + [0.04] * 100  # the first chunk, 3 boundaries, then a spike
    stats = rollout(timed_chunker(clock, planted), 2, md, HORIZON, EXEC_HORIZON, seed=0)
    n = len(stats.chunk_latency_s)
    assert stats.extra["underestimated"] == pytest.approx(1 / n)  # told 1, took 4
    told_after = min(16, n - 4)  # the spike stays in the window for 16 boundaries
    assert stats.extra["mean_assumed_delay"] == pytest.approx((n + 3 * told_after) / n)
    assert stats.extra["mean_delay"] == pytest.approx((n + 3) / n)


def test_measured_delay_follows_a_really_slow_policy_up_to_the_cap() -> None:
    md = MeasuredDelay(control_period=0.01, max_delay=2)  # real clock
    params = ChaseParams(max_steps=24)
    stats = rollout(slow_chunker(0.015), 2, md, HORIZON, EXEC_HORIZON, seed=0, params=params)
    # each chunk sleeps 30 ms >= 3 control periods: every boundary runs at the cap
    assert stats.extra["mean_delay"] == 2 and stats.extra["capped"] == 1.0
    with pytest.raises(ValueError, match="assumed_delay"):
        rollout(zeros_chunker, 1, md, HORIZON, EXEC_HORIZON, assumed_delay=1)
