from __future__ import annotations

import numpy as np
import pytest
import torch

from robotics_remac.env import ChaseParams, expert_action
from robotics_remac.rollout import check_delay, rollout, wilson_interval


def expert_chunker(obs, prefix, d, e, gen):  # type: ignore[no-untyped-def]
    """The expert's current action repeated over the chunk (a zero-order-hold plan)."""
    u = torch.from_numpy(expert_action(obs.numpy())).float()
    return u[:, None, :].expand(-1, prefix.shape[1], -1).clone()


@pytest.mark.parametrize(("d", "e"), [(8, 1), (-1, 1), (4, 5), (2, 1), (0, 0)])
def test_bad_delays_are_rejected(d: int, e: int) -> None:
    with pytest.raises(ValueError, match="must satisfy"):
        check_delay(d, e, 8)


def test_delay_at_least_horizon_is_an_error_in_rollout() -> None:
    with pytest.raises(ValueError, match="0 <= d < H=8"):
        rollout(expert_chunker, 2, 8, 8, 1)


def test_sync_ignores_the_delay_and_async_suffers_from_it() -> None:
    params = ChaseParams()
    sync0 = rollout(expert_chunker, 200, 0, 8, 4, "sync", params=params)
    sync4 = rollout(expert_chunker, 200, 4, 8, 4, "sync", params=params)
    late = rollout(expert_chunker, 200, 4, 8, 4, "async", params=params)
    np.testing.assert_array_equal(sync0.success, sync4.success)
    assert late.success_rate < sync4.success_rate
    assert late.prefix_deviation > sync4.prefix_deviation
    row = late.row()
    assert row["ci_low"] <= row["success"] <= row["ci_high"] and row["episodes"] == 200


def test_temporal_ensembling_runs_and_smooths() -> None:
    te = rollout(expert_chunker, 50, 2, 8, 2, "te")
    naive = rollout(expert_chunker, 50, 2, 8, 2, "async")
    assert te.boundary_jerk < naive.boundary_jerk


def test_misestimated_delay_is_passed_to_the_chunker() -> None:
    seen = []

    def chunker(obs, prefix, d, e, gen):  # type: ignore[no-untyped-def]
        seen.append(d)
        return expert_chunker(obs, prefix, d, e, gen)

    rollout(chunker, 3, 3, 8, 4, assumed_delay=2, params=ChaseParams(max_steps=12))
    assert seen[0] == 0 and set(seen[1:]) == {2}


def test_wilson_interval() -> None:
    lo, hi = wilson_interval(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-3) and hi == pytest.approx(0.5962, abs=1e-3)
    assert wilson_interval(0, 10)[0] == 0.0
