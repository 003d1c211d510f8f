"""95 % intervals of ``robotics-remac eval``'s success rates, from :mod:`iclr26_common.effects`.

Each cell's success rate is the mean of its episodes' 0/1 outcomes: its interval is SciPy's BCa
bootstrap over the episodes (a t-interval under 10 episodes; all episodes alike give an exact,
zero-width interval; one episode gives none). Every method of one run plays the same episodes
at a delay (the same ``--seed``: target motion, jumps and action noise), so a method's success
minus the baseline's (the first ``--method``) gets a *paired* interval over the episodes. The
resampling seed is ``--seed``, recorded in ``results.csv``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from iclr26_common.effects import interval_columns

if TYPE_CHECKING:
    from iclr26_common.effects import Interval

__all__ = [
    "difference_columns",
    "difference_interval",
    "success_columns",
    "success_interval",
]

UNITS = "episodes"


def success_interval(success: np.ndarray, seed: int) -> Interval | None:
    """The success rate over ``success`` (0/1 per episode) with its 95 % interval, ``None``
    for a single episode."""
    from iclr26_common.effects import mean_interval

    try:
        return mean_interval(np.asarray(success, float), seed=seed, units=UNITS)
    except ValueError:
        return None


def difference_interval(success: np.ndarray, baseline: np.ndarray, seed: int) -> Interval | None:
    """success rate - the baseline's on the same episodes, with a paired 95 % interval;
    ``None`` for a single episode."""
    from iclr26_common.effects import paired_interval

    try:
        return paired_interval(
            np.asarray(success, float), np.asarray(baseline, float), seed=seed, units=UNITS
        )
    except ValueError:
        return None


def success_columns(success: np.ndarray, seed: int) -> tuple[dict[str, Any], Interval | None]:
    """``success_low``, ``success_high``, ``success_ci_method``, ``success_n``,
    ``success_resample_seed`` of one cell (empty low/high and method ``none`` without an
    interval), and the interval."""
    interval = success_interval(success, seed)
    return interval_columns("success", interval, len(success)), interval


def difference_columns(
    success: np.ndarray | None, baseline: np.ndarray | None, name: str, seed: int
) -> tuple[dict[str, Any], Interval | None]:
    """``baseline`` (its method name), ``success_diff`` and its ``_low/_high/_ci_method/_n/
    _resample_seed`` against the baseline on the same episodes; all empty for the baseline's own
    row (``success`` or ``baseline`` None)."""
    if success is None or baseline is None:
        empty = dict.fromkeys(interval_columns("success_diff", None, 0), "")
        return {"baseline": name, "success_diff": "", **empty}, None
    interval = difference_interval(success, baseline, seed)
    diff = float(np.mean(success) - np.mean(baseline))
    return {
        "baseline": name,
        "success_diff": diff,
        **interval_columns("success_diff", interval, len(success)),
    }, interval
