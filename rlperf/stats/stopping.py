"""Precision stops that stay honest when measuring stops as soon as an interval looks narrow.

A measurement that stops when its interval first reaches a precision target looks at the
data many times, and stopping on the first narrow interval inflates the error rate of that
interval (the naive rule: ``tests/stats/test_stopping.py`` plants it and shows its coverage
fall short). Every interval here is valid under that optional stopping:

- **Looks are planned.** The rule is evaluated only at the looks of a schedule fixed
  before the data (:func:`look_schedule`: runs ``min..max``, or iterations on a geometric
  grid up to their cap), and the error rate is spent evenly over them (Bonferroni over
  the looks: each look's interval has level ``1 - alpha / looks``). The chance that any
  look's interval misses the true value is then at most ``alpha``, whichever look stops.
- **Within a run** the interval is over batches of successive values
  (:func:`rlperf.stats.intervals.batch_means`), the rule the report's within-run
  intervals follow too.
- **Across runs** each run is one value; the interval is over the runs' logarithms (a
  geometric mean with a ratio interval: how the report pools runs).

The guarantee is **per configuration**: each configuration's stopped interval covers its
true value with probability at least ``confidence``. Over a comparison set of ``k``
configurations, some interval misses more often (docs/report.md#statistics).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rlperf.stats.intervals import (
    CONFIDENCE,
    Estimate,
    Interval,
    batch_count,
    batch_means,
    t_interval,
    t_quantile,
)

#: A run's time-like objectives are per this many env steps (seconds per 1 000 env steps).
PER_1K = 1000.0


def look_schedule(first: int, cap: int, growth: float = 1.0) -> tuple[int, ...]:
    """The sample sizes at which a stopping rule may look, fixed before any data.

    ``growth=1``: every size from ``first`` to ``cap`` (runs: ``min..max``). ``growth>1``: a
    geometric grid, each look at least ``growth`` times the last, ending at ``cap``
    (iterations: few looks, so little of the error rate is spent on each).
    """
    if first < 2 or cap < first:
        raise ValueError(f"looks need 2 <= first <= cap, got first={first}, cap={cap}")
    if growth < 1:
        raise ValueError(f"growth={growth} must be >= 1")
    looks = [first]
    while looks[-1] < cap:
        nxt = looks[-1] + 1 if growth == 1 else max(looks[-1] + 1, math.ceil(looks[-1] * growth))
        looks.append(min(nxt, cap))
    return tuple(looks)


def design_looks(low: int, high: int) -> tuple[int, ...]:
    """The run counts at which a sweep's repeats (``min`` .. ``max`` runs) are looked at."""
    return look_schedule(max(2, low), high) if high >= 2 else ()


def design_confidence(design: Mapping[str, object] | None) -> float:
    """The per-look level of a sweep's run-to-run intervals: ``1 - 0.05 / L`` over the
    ``L`` planned looks where the runs' number was decided by looking (``precision`` or
    ``race``), else :data:`CONFIDENCE`. ``design``: ``sweep.json`` ``rounds.design``."""
    if not design or (design.get("precision") is None and not design.get("race")):
        return CONFIDENCE
    looks = design_looks(int(str(design.get("min") or 1)), int(str(design.get("max") or 1)))
    return 1.0 - look_alpha(len(looks)) if looks else CONFIDENCE


def look_alpha(looks: int, confidence: float = CONFIDENCE) -> float:
    """The error rate one look may spend so that all ``looks`` together spend ``1 -
    confidence`` (Bonferroni)."""
    if looks < 1:
        raise ValueError(f"looks={looks} must be >= 1")
    return (1.0 - confidence) / looks


@dataclass(frozen=True)
class Look:
    """One look of a stopping rule: its interval, and whether it met the target."""

    n: int  # values seen (iterations, windows or runs)
    interval: Interval
    reached: bool


class PrecisionRule:
    """Stop once the interval of the mean is within ``±precision`` of its estimate.

    ``looks``: the planned sample sizes (:func:`look_schedule`); :meth:`look` is asked
    after every value and answers only at a planned size. ``batched``: the values are a
    run's successive iterations or windows (interval over :func:`batch_means`), else
    independent values. A sweep's precision stop across runs is
    :func:`rlperf.stats.intervals.across_runs` at :func:`design_confidence`
    (:func:`precise`), the interval the report then shows.
    """

    def __init__(
        self,
        precision: float,
        looks: Sequence[int],
        batched: bool,
        confidence: float = CONFIDENCE,
    ) -> None:
        if not 0 < precision < 1:
            raise ValueError(f"precision={precision} must be in (0, 1) (0.05: ±5 %)")
        self.precision = precision
        self.looks = tuple(sorted(set(int(n) for n in looks)))
        self.batched = batched
        self.alpha = look_alpha(len(self.looks), confidence)

    def interval(self, values: Sequence[float] | np.ndarray) -> Interval:
        """The interval at this rule's per-look level (whatever the sample size): over the
        batch means of a run's values (its estimate is their mean: the values that fill
        whole batches), or over independent values."""
        x = np.asarray(values, dtype=float)
        return t_interval(batch_means(x) if self.batched else x, self.alpha)

    def look(self, values: Sequence[float] | np.ndarray) -> Look | None:
        """At a planned look, the interval and whether the target is met; else None."""
        n = len(values)
        if n not in self.looks:
            return None
        iv = self.interval(values)
        return Look(n, iv, iv.within(self.precision))


#: The first look of a within-run rule: fewer values make batch means of 1-2 values whose
#: t quantile (at the per-look level) is too wide to stop on.
FIRST_LOOK = 8
#: Each within-run look at least this many times the last (8, 12, 18, 27, ...).
LOOK_GROWTH = 1.5


class WithinRun:
    """A run's stopping rule over its successive values (iterations, windows): stop once the
    interval of their mean, over batch means, is within ``±precision``; looks at
    :data:`FIRST_LOOK`, then each :data:`LOOK_GROWTH` times the last, up to ``cap`` values.

    ``add(value, at)`` after each value (``at``: the iteration or window it belongs to);
    True when the run may stop there. :meth:`summary` is what ``summary.json`` records
    under ``precision``.
    """

    def __init__(self, precision: float, cap: int) -> None:
        first = min(FIRST_LOOK, cap)
        self.rule = PrecisionRule(precision, look_schedule(first, cap, LOOK_GROWTH), batched=True)
        self.values: list[float] = []
        self.last: Look | None = None
        self.at: int | None = None

    def add(self, value: float, at: int) -> bool:
        self.values.append(float(value))
        look = self.rule.look(self.values)
        if look is None:
            return False
        self.last = look
        if look.reached:
            self.at = at
        return look.reached

    def summary(self, objective: str, at: str) -> dict[str, object]:
        """What ``summary.json`` records under ``precision``: the ``objective``, the
        ``target``, whether it was ``reached`` and where (under the key ``at``:
        ``at_iteration``, ``at_window``, ``at_step``), the last look's interval
        (``estimate``, ``low``, ``high``, ``relative_half_width``, over ``values`` values),
        the planned ``looks``, the ``confidence`` the looks share, and the last interval's
        own ``level`` (``1 - alpha / looks``) over its ``batches`` batch means. A bound is
        ``None`` where the values had no spread."""
        iv = self.last.interval if self.last is not None else None

        def finite(x: float | None) -> float | None:
            return x if x is not None and math.isfinite(x) else None

        return {
            "objective": objective,
            "target": self.rule.precision,
            "reached": self.at is not None,
            at: self.at,
            "values": len(self.values),
            "estimate": iv.estimate if iv else None,
            "low": finite(iv.low) if iv else None,
            "high": finite(iv.high) if iv else None,
            "relative_half_width": finite(iv.relative_half_width) if iv else None,
            "looks": list(self.rule.looks),
            "confidence": CONFIDENCE,
            "level": 1.0 - self.rule.alpha,
            "batches": batch_count(self.last.n) if self.last is not None else None,
        }


def runs_needed(values: Sequence[float], precision: float, alpha: float) -> int | None:
    """About how many runs in all would bring the interval within ``±precision``, from the
    spread measured so far (``None``: fewer than 2 runs, or no spread to go by)."""
    x = np.asarray(values, dtype=float)
    if x.size < 2 or x.mean() == 0 or x.std(ddof=1) == 0:
        return None
    cv = float(x.std(ddof=1)) / abs(float(x.mean()))
    n = x.size
    for _ in range(60):  # t quantile depends on n: iterate to the fixed point
        need = math.ceil((t_quantile(1 - alpha / 2, max(n - 1, 1)) * cv / precision) ** 2)
        if need <= n:
            return max(need, 2)
        n = need
    return n


def relative_half_width(e: Estimate) -> float:
    """An estimate's interval's half-width over its value (NaN without an interval)."""
    if not (e.has_ci and e.value > 0):
        return math.nan
    return (e.high - e.low) / 2.0 / e.value


def precise(e: Estimate, precision: float) -> bool:
    """Whether ``e``'s interval is within ``±precision`` of its value: never without an
    interval, nor on a lower bound (a lower bound's precision says nothing of the value)."""
    return bool(not e.bound and relative_half_width(e) <= precision)
