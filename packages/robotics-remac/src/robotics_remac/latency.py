"""A delay driven by measured inference latency.

* :class:`MeasuredDelay` turns measured per-chunk latencies into the inference delay
  ``d = min(max_delay, ceil(latency / control_period))`` (steps of the controller that run while
  the chunk is computed). The true delay of a boundary follows that boundary's own latency; the
  delay the policy is *told* before inference starts (it cannot know the latency yet) is the same
  rule applied to the largest of the last ``window`` latencies, a conservative online estimate:
  telling a longer prefix than is executed keeps the executed actions consistent (the preserved
  prefix ``old[d:d_hat]`` equals what the chunk continues), telling a shorter one does not.

The latency of chunkers inside the asynchronous loop is measured by
:func:`robotics_remac.rollout.loop_latency` (it runs rollouts; this module imports nothing of the
package, so :mod:`robotics_remac.rollout` can import it without a cycle).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["MeasuredDelay"]


@dataclass
class MeasuredDelay:
    """Online delay from measured latency (stateful: :meth:`record` after each inference).

    ``control_period``: seconds per control step (the environment's ``dt``); ``max_delay``: the
    cap on ``d`` (a longer latency is counted in ``capped`` and treated as ``max_delay``);
    ``window``: how many recent latencies the told delay looks at; ``initial_delay``: the delay
    told before any measurement (default ``max_delay``); ``clock``: the timer (seconds).
    """

    control_period: float
    max_delay: int
    window: int = 16
    initial_delay: int | None = None
    clock: Callable[[], float] = time.perf_counter
    latencies: list[float] = field(default_factory=list)
    capped: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.control_period) and self.control_period > 0):
            raise ValueError(f"control_period must be > 0 seconds, got {self.control_period}")
        if self.max_delay < 0 or self.window < 1:
            raise ValueError(
                f"need max_delay >= 0 and window >= 1, got {self.max_delay}, {self.window}"
            )
        if self.initial_delay is not None and not 0 <= self.initial_delay <= self.max_delay:
            raise ValueError(
                f"initial_delay {self.initial_delay} must lie in 0..max_delay={self.max_delay}"
            )

    def steps(self, latency: float) -> int:
        """``ceil(latency / control_period)`` without the cap (0 for a zero latency)."""
        if not (math.isfinite(latency) and latency >= 0):
            raise ValueError(f"latency must be a finite number of seconds >= 0, got {latency}")
        return max(0, math.ceil(latency / self.control_period * (1 - 1e-12)))

    def delay_for(self, latency: float) -> int:
        """The delay a latency of ``latency`` seconds causes, capped at ``max_delay``."""
        return min(self.max_delay, self.steps(latency))

    def record(self, latency: float) -> int:
        """Stores one measured latency and returns the (capped) delay it caused."""
        if self.steps(latency) > self.max_delay:
            self.capped += 1
        self.latencies.append(float(latency))
        return self.delay_for(latency)

    def assumed(self) -> int:
        """The delay to tell the policy for the next chunk (before its latency is known)."""
        if not self.latencies:
            return self.max_delay if self.initial_delay is None else self.initial_delay
        return self.delay_for(max(self.latencies[-self.window :]))
