"""Effects with 95 % intervals, and the verdict an interval gives against a pre-registered
threshold.

A claim is decided by an interval, not a point estimate: **held** when the whole 95 % interval
lies on the holding side of the threshold, **not held** when the whole interval lies on the other
side, **underpowered** (the claim is "inconclusive (underpowered)") when it straddles the
threshold. The intervals come from SciPy, never from a hand-written resampler:

- :func:`t_effect`: a t-interval over a few independent units (seeds): ``scipy.stats.ttest_1samp``.
  Below about 10 units a bootstrap returns about [min, max], so few units always get a t-interval.
- :func:`bootstrap_effect`: ``scipy.stats.bootstrap`` (BCa) over items, the resampling seed kept.
- :func:`paired_effect`: method and baseline measured on the same items (and seeds): the
  difference of their means with a paired interval (``scipy.stats.bootstrap(paired=True)`` over
  items, each item averaged over the seeds; a t-interval over the paired differences below
  :data:`MIN_BOOTSTRAP_UNITS` units).
- :func:`exact_effect`: a deterministic quantity (FLOPs, parameter bytes, a count on fixed data):
  a zero-width interval, ``method="exact"``.

An interval of zero width (every unit, or every paired difference, equal: a null method in the
method's place) is exact, not NaN. Every effect also says how many units its interval would need
to decide the paper's effect size (or, without one, the measured effect) at the measured spread
(:attr:`Effect.n_needed`), so an underpowered verdict always says what would decide it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "CONFIDENCE",
    "DIRECTIONS",
    "METHODS",
    "MIN_BOOTSTRAP_UNITS",
    "Effect",
    "Interval",
    "bootstrap_effect",
    "difference_effect",
    "exact_effect",
    "format_effect",
    "interval_columns",
    "interval_dict",
    "interval_or_none",
    "interval_text",
    "mean_interval",
    "paired_effect",
    "paired_interval",
    "points_effect",
    "proportion_effect",
    "statistic_interval",
    "t_effect",
    "units_needed",
]

#: The confidence level of every interval a claim is decided by.
CONFIDENCE = 0.95
#: ``>=``: the effect must be at least the threshold (a gain, or non-inferiority within a margin
#: with ``threshold = -margin``); ``<=``: at most the threshold; ``within``: ``|effect| <=
#: threshold`` (equivalence within a margin).
DIRECTIONS = (">=", "<=", "within")
METHODS = (
    "t",
    "bootstrap",
    "paired bootstrap",
    "paired t",
    "paired t over seeds",
    "welch t",
    "wilson",
    "exact",
)
#: Fewer independent units than this get a t-interval: a bootstrap over 2-3 seeds returns
#: about [min, max] and covers far less than 95 %.
MIN_BOOTSTRAP_UNITS = 10
#: Resamples of every bootstrap (SciPy's default).
N_RESAMPLES = 9999
#: :func:`statistic_interval` uses BCa up to this many items, the percentile interval above.
BCA_MAX_ITEMS = 500
#: The largest ``n_needed`` reported; beyond it the effect is "not decidable at this spread".
MAX_UNITS = 10**7

Direction = Literal[">=", "<=", "within"]
Decision = Literal["held", "not held", "underpowered"]


def _finite(owner: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"Effect.{owner} must be a number, got {value!r:.60}") from None
    if not math.isfinite(number):
        raise ValueError(f"Effect.{owner} must be finite, got {number}")
    return number


@dataclass(frozen=True)
class Effect:
    """The quantity a claim's criterion is about, with its 95 % interval.

    ``name``/``unit``: what is measured ("accuracy gain over GRPO", "pts"). ``estimate``,
    ``low``, ``high``: the point estimate and its interval (finite; ``low == high == estimate``
    only for ``method="exact"``). ``threshold``/``direction``: the pre-registered criterion
    (see :data:`DIRECTIONS`). ``method``: how the interval was computed (:data:`METHODS`);
    ``n``: the number of independent units it rests on, ``units`` what they are ("seeds",
    "items (each averaged over 3 seeds)"). ``paper``: the paper's own reported value of the same
    quantity, when it has one. ``resample_seed``: the bootstrap's seed. ``spread``: the per-unit
    standard deviation the interval implies, and ``n_needed`` the units an interval would need
    to decide ``paper`` (else ``estimate``) against the threshold at that spread (``None`` when
    no number of units can: the effect sits on the threshold).
    """

    name: str
    unit: str
    estimate: float
    low: float
    high: float
    threshold: float
    direction: Direction
    method: str
    n: int
    units: str = "units"
    paper: float | None = None
    resample_seed: int | None = None
    spread: float | None = None
    n_needed: int | None = None
    confidence: float = CONFIDENCE

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("Effect.name must be a non-empty string")
        for attr in ("estimate", "low", "high", "threshold", "confidence"):
            object.__setattr__(self, attr, _finite(attr, getattr(self, attr)))
        for attr in ("paper", "spread"):
            if getattr(self, attr) is not None:
                object.__setattr__(self, attr, _finite(attr, getattr(self, attr)))
        if self.direction not in DIRECTIONS:
            raise ValueError(
                f"Effect.direction must be one of {DIRECTIONS}, got {self.direction!r}"
            )
        if self.direction == "within" and self.threshold < 0:
            raise ValueError("Effect.threshold of a 'within' effect is a margin and must be >= 0")
        if self.method not in METHODS:
            raise ValueError(f"Effect.method must be one of {METHODS}, got {self.method!r}")
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 1:
            raise ValueError(f"Effect.n must be a positive integer, got {self.n!r}")
        if not self.low <= self.high:
            raise ValueError(f"Effect interval is reversed: low {self.low} > high {self.high}")
        slack = 1e-9 * max(1.0, abs(self.estimate))
        if not self.low - slack <= self.estimate <= self.high + slack:
            raise ValueError(
                f"Effect.estimate {self.estimate} lies outside its interval "
                f"[{self.low}, {self.high}]"
            )
        zero_width = self.low == self.high
        if (self.method == "exact") != zero_width:
            raise ValueError(
                "a zero-width interval is method='exact' and an exact effect has zero width "
                f"(method {self.method!r}, interval [{self.low}, {self.high}])"
            )
        if self.n_needed is not None and (not isinstance(self.n_needed, int) or self.n_needed < 1):
            raise ValueError(f"Effect.n_needed must be a positive integer, got {self.n_needed!r}")

    def decide(self) -> Decision:
        """held / not held / underpowered, from the interval against the threshold."""
        low, high, t = self.low, self.high, self.threshold
        if self.direction == ">=":
            return "held" if low >= t else ("not held" if high < t else "underpowered")
        if self.direction == "<=":
            return "held" if high <= t else ("not held" if low > t else "underpowered")
        if -t <= low and high <= t:
            return "held"
        return "not held" if (high < -t or low > t) else "underpowered"

    def criterion(self) -> str:
        """The criterion in words, e.g. ``gain >= 2 pts (95 % t-interval over seeds)``."""
        unit = f" {self.unit}" if self.unit else ""
        if self.direction == "within":
            rule = f"|{self.name}| <= {self.threshold:g}{unit}"
        else:
            rule = f"{self.name} {self.direction} {self.threshold:g}{unit}"
        pct = f"{self.confidence * 100:g} %"
        first, _, rest = self.units.partition(" ")
        if self.method.endswith(f" over {first}"):  # "paired t over seeds": units said once
            how = f"{self.method}{' ' + rest if rest else ''}"
        else:
            how = f"{self.method}, over {self.units}"
        return f"{rule}: the whole {pct} interval ({how}) on that side"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unit": self.unit,
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "threshold": self.threshold,
            "direction": self.direction,
            "method": self.method,
            "n": self.n,
            "units": self.units,
            "paper": self.paper,
            "resample_seed": self.resample_seed,
            "spread": self.spread,
            "n_needed": self.n_needed,
            "decision": self.decide(),
        }


def format_effect(effect: dict[str, Any] | Effect, *, advice: bool = True) -> str:
    """One line for a report: ``+4.6 pts [-1.2, 10.4] vs >= 2 (t, n=3 seeds; needs ~24)``;
    ``advice=False`` leaves out how many units would decide it (for a claim whose control
    failed: more units would not decide it)."""
    data = effect.to_dict() if isinstance(effect, Effect) else effect
    unit = f" {data.get('unit')}" if data.get("unit") else ""
    est, low, high = data.get("estimate"), data.get("low"), data.get("high")
    direction = data.get("direction")
    threshold = data.get("threshold")
    rule = f"|x| <= {threshold:.4g}" if direction == "within" else f"{direction} {threshold:.4g}"
    text = f"{est:.4g}{unit} [{low:.4g}, {high:.4g}] vs {rule}"
    text += f" ({data.get('method')}, n={data.get('n')} {data.get('units') or 'units'}"
    needed = data.get("n_needed")
    if advice and data.get("method") != "exact":
        target = "the paper's effect" if data.get("paper") is not None else "this effect"
        text += (
            f"; deciding {target} needs ~{needed}"
            if needed is not None
            else "; no number of units decides it (the effect sits on the threshold)"
        )
    if data.get("paper") is not None:
        text += f"; paper: {data['paper']:.4g}{unit}"
    return text + ")"


# ------------------------------------------------------------------------------ power


def _critical(n: int, confidence: float, t_based: bool) -> float:
    from scipy import stats

    q = 0.5 + confidence / 2
    return float(stats.t.ppf(q, n - 1)) if t_based else float(stats.norm.ppf(q))


def units_needed(
    spread: float,
    target: float,
    threshold: float,
    direction: Direction,
    *,
    t_based: bool = True,
    confidence: float = CONFIDENCE,
) -> int | None:
    """The fewest units whose interval (half-width ``crit * spread / sqrt(n)``) lies wholly on
    one side of the threshold when the true effect is ``target``. ``None`` when the target sits
    on the threshold (no number of units decides it) or more than :data:`MAX_UNITS` are needed.
    For ``within``, the distance is to the nearer margin edge."""
    if direction == "within":
        distance = abs(threshold) - abs(target)
        distance = abs(distance)
    else:
        distance = abs(target - threshold)
    if spread <= 0:
        return 2 if distance > 0 else None
    if distance <= 0:
        return None

    def decides(n: int) -> bool:
        return _critical(n, confidence, t_based) * spread / math.sqrt(n) < distance

    # the normal critical value gives a lower bound; the t one needs more at small n
    ratio = _critical(10**6, confidence, False) * spread / distance
    if not math.isfinite(ratio) or ratio > math.sqrt(MAX_UNITS):
        return None  # an estimate within rounding of its threshold: no feasible number decides it
    low = max(2, math.ceil(ratio**2) - 1)
    if decides(low):
        return low
    high = low
    while not decides(high):
        if high > MAX_UNITS:
            return None
        low, high = high, high * 2
    while high - low > 1:  # decides(high), not decides(low): bisect to the fewest
        mid = (low + high) // 2
        low, high = (low, mid) if decides(mid) else (mid, high)
    return high if high <= MAX_UNITS else None


# ------------------------------------------------------------------------------ intervals


def _array(values: Any, what: str) -> Any:
    import numpy as np

    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        raise ValueError(f"{what}: no values")
    if not np.isfinite(array).all():
        raise ValueError(f"{what}: values must be finite")
    return array


@dataclass(frozen=True)
class _Claim:
    """What every effect function is told about the claim (all but the data), passed on once
    to the interval it falls back to and to :func:`_effect`."""

    name: str
    threshold: float
    direction: Direction
    unit: str
    units: str
    paper: float | None
    confidence: float

    def kwargs(self, **changes: Any) -> dict[str, Any]:
        """The keyword arguments of a public effect function (``t_effect(x, **claim.kwargs())``)."""
        return {**dataclasses.asdict(self), **changes}


def _effect(
    claim: _Claim,
    estimate: float,
    low: float,
    high: float,
    spread: float,
    method: str,
    n: int,
    *,
    resample_seed: int | None = None,
    t_based: bool = False,
) -> Effect:
    """The :class:`Effect` of an interval: exact when it has no width, with the units needed
    to decide ``claim``'s (or the measured) effect at ``spread``."""
    name, threshold, direction, paper, confidence = (
        claim.name,
        claim.threshold,
        claim.direction,
        claim.paper,
        claim.confidence,
    )
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"{name}: the {method} interval is undefined on these values")
    if low == high:  # no spread at all: every unit (or paired difference) equal
        low = high = estimate
        method, spread = "exact", 0.0
    target = estimate if paper is None else paper
    needed = (
        n
        if method == "exact"
        else units_needed(
            spread, target, threshold, direction, t_based=t_based, confidence=confidence
        )
    )
    return Effect(
        name=name,
        unit=claim.unit,
        estimate=estimate,
        low=min(low, estimate),
        high=max(high, estimate),
        threshold=threshold,
        direction=direction,
        method=method,
        n=n,
        units=claim.units,
        paper=paper,
        resample_seed=resample_seed,
        spread=spread,
        n_needed=needed,
        confidence=confidence,
    )


def _mean_and_spread(x: Any) -> tuple[float, float]:
    """(mean, SD with ddof 1) of a 1-D array; exactly (value, 0.0) when every value is equal
    (the mean of equal floats can differ from them in the last bit)."""
    import numpy as np

    if np.all(x == x[0]):
        return float(x[0]), 0.0
    return float(np.mean(x)), float(np.std(x, ddof=1))


def t_effect(
    values: Sequence[float] | Any,
    *,
    name: str,
    threshold: float,
    direction: Direction = ">=",
    unit: str = "",
    units: str = "seeds",
    paper: float | None = None,
    confidence: float = CONFIDENCE,
    binary: bool | None = None,
) -> Effect:
    """The mean of ``values`` (one per independent unit, e.g. per seed) with its t-interval
    (``scipy.stats.ttest_1samp(...).confidence_interval``). Needs at least 2 units; equal
    values give an exact, zero-width interval. 0/1 outcomes get Wilson's score interval instead
    (:func:`proportion_effect`): a t-interval there can leave [0, 1], and a rate of 20/20 is
    not exact. ``binary``: whether ``values`` are 0/1 outcomes (default: when every value is 0
    or 1; differences are never outcomes: the paired helpers pass False)."""
    from scipy import stats

    claim = _Claim(name, threshold, direction, unit, units, paper, confidence)
    x = _array(values, name).ravel()
    if binary if binary is not None else _is_binary(x):
        return proportion_effect(int(x.sum()), int(x.size), **claim.kwargs())
    if x.size < 2:
        raise ValueError(f"{name}: a t-interval needs at least 2 units (got {x.size})")
    estimate, spread = _mean_and_spread(x)
    if spread == 0.0:
        low = high = estimate
    else:
        ci = stats.ttest_1samp(x, 0.0).confidence_interval(confidence_level=confidence)
        low, high = float(ci.low), float(ci.high)
    return _effect(claim, estimate, low, high, spread, "t", int(x.size), t_based=True)


def _mean_difference(scale: float) -> Callable[..., Any]:
    """``scale * (mean(x) - mean(y))`` along ``axis``: the vectorised statistic of the paired and
    unpaired bootstraps of a difference of means."""
    import numpy as np

    def statistic(x: Any, y: Any, axis: int = -1) -> Any:
        return scale * (np.mean(x, axis=axis) - np.mean(y, axis=axis))

    return statistic


def _is_binary(x: Any) -> bool:
    import numpy as np

    return bool(np.all((x == 0) | (x == 1)))


def proportion_effect(
    successes: int,
    n: int,
    *,
    name: str,
    threshold: float,
    direction: Direction = ">=",
    unit: str = "",
    units: str = "items",
    scale: float = 1.0,
    paper: float | None = None,
    confidence: float = CONFIDENCE,
) -> Effect:
    """``scale * successes / n`` (a rate of independent 0/1 outcomes) with Wilson's score
    interval (``scipy.stats.binomtest(...).proportion_ci(method="wilson")``): inside [0, 1]
    and of non-zero width also at 0/n and n/n. ``scale``: 100 for percent."""
    from scipy import stats

    if not 0 <= successes <= n or n < 1:
        raise ValueError(f"{name}: need 0 <= successes <= n and n >= 1 (got {successes}/{n})")
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(
        confidence_level=confidence, method="wilson"
    )
    p = successes / n
    low, high = scale * float(ci.low), scale * float(ci.high)
    # the per-unit spread the interval implies (for units_needed), never 0 for a 0/n rate
    spread = (high - low) / 2 * math.sqrt(n) / _critical(10**6, confidence, False)
    claim = _Claim(name, threshold, direction, unit, units, paper, confidence)
    return _effect(claim, scale * p, low, high, spread, "wilson", int(n))


def _bootstrap(
    data: tuple[Any, ...],
    statistic: Callable[..., Any],
    *,
    paired: bool,
    seed: int,
    confidence: float,
    vectorized: bool = True,
    n_resamples: int = N_RESAMPLES,
    bca: bool = True,
) -> tuple[float, float, float]:
    """(low, high, standard error) of SciPy's bootstrap over items (seed ``seed``): BCa where
    ``bca``, falling back to the percentile interval where BCa is undefined (a degenerate
    resample distribution, or a statistic that raises ``ValueError`` on BCa's leave-one-out
    jackknife samples, e.g. a binned correlation at its minimum size); (nan, nan, 0) where
    neither gives finite bounds."""
    import warnings

    import numpy as np
    from scipy import stats

    for method in ("BCa", "percentile") if bca else ("percentile",):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BCa's degenerate-distribution warning: we fall back
            try:
                res = stats.bootstrap(
                    data,
                    statistic,
                    paired=paired,
                    vectorized=vectorized,
                    n_resamples=n_resamples,
                    confidence_level=confidence,
                    method=method,
                    random_state=np.random.default_rng(seed),
                )
            except ValueError:
                if method != "BCa":
                    raise
                continue
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            return low, high, float(res.standard_error)
    return math.nan, math.nan, 0.0


def bootstrap_effect(
    values: Sequence[float] | Any,
    *,
    name: str,
    threshold: float,
    seed: int,
    direction: Direction = ">=",
    unit: str = "",
    units: str = "items",
    paper: float | None = None,
    confidence: float = CONFIDENCE,
    binary: bool | None = None,
) -> Effect:
    """The mean of ``values`` (one per item) with SciPy's BCa bootstrap interval, resampling
    seed ``seed`` (recorded). Fewer than :data:`MIN_BOOTSTRAP_UNITS` items get a t-interval
    instead (a bootstrap over a handful of units undercovers), 0/1 outcomes Wilson's interval
    (:func:`proportion_effect`; ``binary``: as in :func:`t_effect`), and a bootstrap SciPy
    cannot compute a t-interval."""
    import numpy as np

    claim = _Claim(name, threshold, direction, unit, units, paper, confidence)
    x = _array(values, name).ravel()
    outcomes = binary if binary is not None else _is_binary(x)
    if x.size < MIN_BOOTSTRAP_UNITS or outcomes:
        return t_effect(x, binary=outcomes, **claim.kwargs())
    estimate, spread = _mean_and_spread(x)
    low = high = estimate
    if spread > 0:
        low, high, _ = _bootstrap(
            (x,),
            lambda a, axis: np.mean(a, axis=axis),
            paired=False,
            seed=seed,
            confidence=confidence,
        )
        if not (math.isfinite(low) and math.isfinite(high)):
            return t_effect(x, **claim.kwargs())
    return _effect(
        claim, estimate, low, high, spread, "bootstrap", int(x.size), resample_seed=int(seed)
    )


def paired_effect(
    method: Sequence[float] | Any,
    baseline: Sequence[float] | Any,
    *,
    name: str,
    threshold: float,
    seed: int,
    direction: Direction = ">=",
    unit: str = "",
    scale: float = 1.0,
    paper: float | None = None,
    confidence: float = CONFIDENCE,
) -> Effect:
    """``scale * (mean(method) - mean(baseline))`` over shared items (and seeds), with a paired
    interval.

    ``method``/``baseline``: the per-item scores of both, shape ``(items,)`` or ``(seeds,
    items)`` (the same items and seeds for both: that is what makes the design paired).

    Over items: each item is one resampling unit, its scores averaged over the seeds, and
    ``scipy.stats.bootstrap(paired=True)`` resamples items (BCa, seed ``seed``; below
    :data:`MIN_BOOTSTRAP_UNITS` items, or where SciPy cannot compute it, a paired t-interval
    over the per-item differences). Over seeds (2 or more): a t-interval over the per-seed mean
    differences, which carries the spread between retrained models that the item resampling
    leaves out. The effect gets the **wider** of the two (its ``method``/``units`` say which).
    ``scale``: e.g. 100 for points from 0/1 scores. Every paired difference equal (a null
    method: the baseline in the method's place) gives an exact, zero-width interval."""

    a = _array(method, f"{name} (method)")
    b = _array(baseline, f"{name} (baseline)")
    if a.shape != b.shape:
        raise ValueError(
            f"{name}: method and baseline must be measured on the same items and seeds "
            f"(shapes {a.shape} and {b.shape})"
        )
    if a.ndim > 2:
        raise ValueError(f"{name}: scores must be (items,) or (seeds, items), got {a.shape}")
    seeds = a.shape[0] if a.ndim == 2 else 1
    a_items = a.mean(axis=0) if a.ndim == 2 else a
    b_items = b.mean(axis=0) if b.ndim == 2 else b
    units = f"items (each averaged over {seeds} seeds)" if seeds > 1 else "items"
    claim = _Claim(name, threshold, direction, unit, units, paper, confidence)
    by_items = _paired_over_items(a_items, b_items, claim, seed=seed, scale=scale)
    if seeds < 2:
        return by_items
    # Seeds retrain the model: their spread is part of the uncertainty, and resampling items
    # alone (each averaged over the seeds) leaves it out. A t-interval over the per-seed mean
    # differences carries it; the claim gets the wider of the two intervals.
    per_seed = scale * (a.mean(axis=1) - b.mean(axis=1))
    seeds_units = f"seeds (each averaged over {a.shape[1]} items)"
    by_seeds = t_effect(per_seed, binary=False, **claim.kwargs(units=seeds_units))
    if by_seeds.method == "t":
        by_seeds = dataclasses.replace(by_seeds, method="paired t over seeds")
    wider = (
        by_seeds if (by_seeds.high - by_seeds.low) > (by_items.high - by_items.low) else by_items
    )
    return wider


def points_effect(
    method: Sequence[float] | Any, baseline: Sequence[float] | Any, **kwargs: Any
) -> Effect:
    """:func:`paired_effect` of 0/1 (or [0, 1]) scores in percentage points:
    ``100 * (mean(method) - mean(baseline))``, its unit "pts"; ``kwargs`` are
    :func:`paired_effect`'s (``name``, ``threshold`` and ``paper`` in points, ``seed``,
    ``direction``, ``confidence``)."""
    return paired_effect(method, baseline, unit="pts", scale=100.0, **kwargs)


def _paired_over_items(
    a_items: Any, b_items: Any, claim: _Claim, *, seed: int, scale: float
) -> Effect:
    """The paired interval over items (see :func:`paired_effect`)."""

    n_items = int(a_items.size)
    diffs = scale * (a_items - b_items)
    confidence = claim.confidence
    estimate, spread = _mean_and_spread(diffs)
    low = high = estimate
    if spread > 0 and n_items >= MIN_BOOTSTRAP_UNITS:
        low, high, _ = _bootstrap(
            (a_items, b_items),
            _mean_difference(scale),
            paired=True,
            seed=seed,
            confidence=confidence,
        )
    if spread > 0 and not (
        n_items >= MIN_BOOTSTRAP_UNITS and math.isfinite(low) and math.isfinite(high)
    ):
        # under 10 items, or a bootstrap SciPy cannot compute: a paired t-interval
        effect = t_effect(diffs, binary=False, **claim.kwargs())
        return dataclasses.replace(effect, method="paired t") if effect.method == "t" else effect
    return _effect(
        claim, estimate, low, high, spread, "paired bootstrap", n_items, resample_seed=int(seed)
    )


def difference_effect(
    method: Sequence[float] | Any,
    baseline: Sequence[float] | Any,
    *,
    name: str,
    threshold: float,
    seed: int,
    direction: Direction = ">=",
    unit: str = "",
    scale: float = 1.0,
    units: str = "independent units per arm",
    paper: float | None = None,
    confidence: float = CONFIDENCE,
) -> Effect:
    """``scale * (mean(method) - mean(baseline))`` for **unpaired** samples (different items or
    seeds per arm): Welch's t-interval (``scipy.stats.ttest_ind(equal_var=False)``) when either
    arm has fewer than :data:`MIN_BOOTSTRAP_UNITS` units, else SciPy's bootstrap resampling each
    arm on its own. Use :func:`paired_effect` whenever both arms share items and seeds: pairing
    removes the item-to-item spread both arms share."""
    import numpy as np
    from scipy import stats

    a = _array(method, f"{name} (method)").ravel()
    b = _array(baseline, f"{name} (baseline)").ravel()
    if min(a.size, b.size) < 2:
        raise ValueError(f"{name}: each arm needs at least 2 units (got {a.size}, {b.size})")
    estimate = scale * float(np.mean(a) - np.mean(b))
    se = scale * math.sqrt(np.var(a, ddof=1) / a.size + np.var(b, ddof=1) / b.size)
    n = int(min(a.size, b.size))
    spread = se * math.sqrt(n)  # per-unit spread of one arm-pair, for the power estimate
    if se == 0.0:
        low = high = estimate
        method_name, seed_used, t_based = "welch t", None, True
    elif min(a.size, b.size) < MIN_BOOTSTRAP_UNITS:
        ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(confidence)
        low, high = scale * float(ci.low), scale * float(ci.high)
        method_name, seed_used, t_based = "welch t", None, True
    else:
        low, high, _ = _bootstrap(
            (a, b),
            _mean_difference(scale),
            paired=False,
            seed=seed,
            confidence=confidence,
        )
        method_name, seed_used, t_based = "bootstrap", int(seed), False
    claim = _Claim(name, threshold, direction, unit, units, paper, confidence)
    return _effect(
        claim, estimate, low, high, spread, method_name, n, resample_seed=seed_used, t_based=t_based
    )


def exact_effect(
    value: float,
    *,
    name: str,
    threshold: float,
    direction: Direction = ">=",
    unit: str = "",
    n: int = 1,
    units: str = "deterministic count",
    paper: float | None = None,
) -> Effect:
    """A deterministic quantity (FLOPs, parameter bytes, a count on fixed data): its value is
    its own zero-width interval (``method="exact"``)."""
    value = _finite("estimate", value)
    return Effect(
        name=name,
        unit=unit,
        estimate=value,
        low=value,
        high=value,
        threshold=threshold,
        direction=direction,
        method="exact",
        n=n,
        units=units,
        paper=paper,
        spread=0.0,
        n_needed=n,
    )


# ------------------------------------------------------------------ intervals without a claim


@dataclass(frozen=True)
class Interval:
    """A 95 % interval for a number computed on a user's own data (no threshold, no verdict):
    what the commands that compare methods print and write beside each number."""

    estimate: float
    low: float
    high: float
    method: str
    n: int
    units: str = "items"
    resample_seed: int | None = None
    confidence: float = CONFIDENCE

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "method": self.method,
            "n": self.n,
            "units": self.units,
            "resample_seed": self.resample_seed,
        }

    def __str__(self) -> str:
        if self.method == "exact":
            return f"{self.estimate:.4g} (exact, n={self.n})"
        return f"{self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}] ({self.method}, n={self.n})"


def _as_interval(effect: Effect) -> Interval:
    return Interval(
        effect.estimate,
        effect.low,
        effect.high,
        effect.method,
        effect.n,
        effect.units,
        effect.resample_seed,
        effect.confidence,
    )


def mean_interval(
    values: Sequence[float] | Any,
    *,
    seed: int = 0,
    units: str = "items",
    scale: float = 1.0,
    binary: bool | None = None,
) -> Interval:
    """The mean of ``values`` (one per independent unit) with its 95 % interval: a BCa
    bootstrap from :data:`MIN_BOOTSTRAP_UNITS` units, a t-interval below (see
    :func:`bootstrap_effect`); 0/1 outcomes a Wilson interval; a single value has no interval
    (``ValueError``). ``scale``: 100 for a rate in percent from 0/1 ``values``. ``binary``:
    whether the values are 0/1 outcomes (default: when all are 0 or 1; pass False for
    quantities that merely can be 0 or 1, such as AUCs or correlations)."""
    effect = bootstrap_effect(
        values, name="mean", threshold=0.0, seed=seed, units=units, binary=binary
    )
    interval = _as_interval(effect)
    if scale != 1.0:
        interval = dataclasses.replace(
            interval,
            estimate=scale * interval.estimate,
            low=scale * interval.low,
            high=scale * interval.high,
        )
    return interval


def paired_interval(
    method: Sequence[float] | Any,
    baseline: Sequence[float] | Any,
    *,
    seed: int = 0,
    scale: float = 1.0,
    units: str | None = None,
) -> Interval:
    """``scale * (mean(method) - mean(baseline))`` on shared items (and seeds) with its paired
    95 % interval (see :func:`paired_effect`); ``units`` names the items (e.g. "episodes")."""
    effect = paired_effect(
        method, baseline, name="difference", threshold=0.0, seed=seed, scale=scale
    )
    if units is not None:
        seeds = effect.units.partition(" (")[2]
        effect = dataclasses.replace(effect, units=f"{units} ({seeds}" if seeds else units)
    return _as_interval(effect)


def statistic_interval(
    data: Sequence[Any],
    statistic: Callable[..., float],
    *,
    seed: int = 0,
    paired: bool = True,
    units: str = "items",
    n_resamples: int = N_RESAMPLES,
) -> Interval:
    """Any statistic of one or more samples (e.g. a Spearman correlation of scores and
    measurements, paired item by item) with SciPy's bootstrap interval: BCa up to
    :data:`BCA_MAX_ITEMS` items, percentile above (and where BCa is undefined), resampling
    items with seed ``seed``. ``statistic(*samples)`` takes 1-D
    arrays. Needs :data:`MIN_BOOTSTRAP_UNITS` items: below that no interval is trustworthy
    (``ValueError``)."""

    arrays = tuple(_array(d, "statistic_interval").ravel() for d in data)
    n = int(arrays[0].size)
    if paired and any(a.size != n for a in arrays):
        raise ValueError("statistic_interval: paired samples must have the same length")
    if n < MIN_BOOTSTRAP_UNITS:
        raise ValueError(
            f"statistic_interval: a bootstrap needs at least {MIN_BOOTSTRAP_UNITS} items, got {n}"
        )
    estimate = float(statistic(*arrays))
    if not math.isfinite(estimate):
        raise ValueError("statistic_interval: the statistic is not finite on the data")
    # BCa's jackknife recomputes the statistic n times (quadratic in n for a correlation):
    # from BCA_MAX_ITEMS items on, the percentile interval (one pass of resamples)
    low, high, _ = _bootstrap(
        arrays,
        statistic,
        paired=paired,
        seed=seed,
        confidence=CONFIDENCE,
        vectorized=False,
        n_resamples=n_resamples,
        bca=n <= BCA_MAX_ITEMS,
    )
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(
            "statistic_interval: the statistic is undefined on resamples of the data (e.g. a "
            "correlation of constant values)"
        )
    if low == high:
        return Interval(estimate, estimate, estimate, "exact", n, units, None)
    return Interval(estimate, min(low, estimate), max(high, estimate), "bootstrap", n, units, seed)


# ------------------------------------------------------------------ printing and writing them


def interval_or_none(compute: Callable[[], Interval]) -> Interval | None:
    """``compute()``, or ``None`` where there is no interval to give (``ValueError``: a single
    unit, under 10 items for a statistic, a statistic undefined on the data)."""
    try:
        return compute()
    except ValueError:
        return None


def interval_text(
    interval: Interval | None,
    n: int,
    units: str,
    fmt: str = ".3f",
    missing: str = "too few for an interval",
) -> str:
    """``[0.812, 0.950] (bootstrap, n=200 episodes)``, ``(exact, n=200 episodes)`` or, without
    an interval, ``(n=1 episodes, too few for an interval)`` (``missing`` says why): never a
    zero-width ``± 0``. ``fmt``: the bounds' format (``"+.3f"`` for signed correlations)."""
    if interval is None:
        return f"(n={n} {units}, {missing})"
    if interval.method == "exact":
        return f"(exact, n={interval.n} {units})"
    return (
        f"[{interval.low:{fmt}}, {interval.high:{fmt}}] ({interval.method}, n={interval.n} {units})"
    )


def interval_columns(
    metric: str, interval: Interval | None, n: int, fmt: str | None = None
) -> dict[str, Any]:
    """CSV columns ``<metric>_low``, ``_high``, ``_ci_method``, ``_n``, ``_resample_seed``: low
    and high empty and method ``none`` without an interval (never a fake zero width).
    ``fmt``: format the bounds as text (``".3f"``); numbers otherwise."""

    def bound(value: float) -> Any:
        return value if fmt is None else format(value, fmt)

    if interval is None:
        return {
            f"{metric}_low": "",
            f"{metric}_high": "",
            f"{metric}_ci_method": "none",
            f"{metric}_n": n,
            f"{metric}_resample_seed": "",
        }
    return {
        f"{metric}_low": bound(interval.low),
        f"{metric}_high": bound(interval.high),
        f"{metric}_ci_method": interval.method,
        f"{metric}_n": interval.n,
        f"{metric}_resample_seed": "" if interval.resample_seed is None else interval.resample_seed,
    }


def interval_dict(
    interval: Interval | None, n: int, units: str, estimate: float | None = None
) -> dict[str, Any]:
    """:meth:`Interval.to_dict`, or without an interval the same keys with ``method: "none"``
    and ``low``/``high`` null (JSON outputs)."""
    if interval is not None:
        return interval.to_dict()
    return {
        "estimate": estimate,
        "low": None,
        "high": None,
        "confidence": CONFIDENCE,
        "method": "none",
        "n": n,
        "units": units,
        "resample_seed": None,
    }
