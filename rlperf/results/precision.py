"""Intervals that stay honest when measuring stops as soon as they look narrow enough.

A measurement that stops when its interval first reaches a precision target looks at the
data many times, and stopping on the first narrow interval inflates the error rate of
that interval (the naive rule: ``tests/results/test_precision.py`` plants it and shows
its coverage fall short). Every interval here is valid under that optional stopping:

- **Looks are planned.** The rule is evaluated only at the looks of a schedule fixed
  before the data (:func:`look_schedule`: runs ``min..max``, or iterations on a geometric
  grid up to their cap), and the error rate is spent evenly over them (Bonferroni over
  the looks: each look's interval has level ``1 - alpha / looks``). The chance that any
  look's interval misses the true value is then at most ``alpha``, whichever look stops.
  This is the conservative alpha-spending rule: simple, exact for the planned looks, and
  wider than a fixed-size interval by the t quantile at ``alpha / looks`` instead of
  ``alpha`` (at 95 % and 5 looks: 2.81 against 1.96 for large samples).
- **Within a run, values are not independent.** Successive iterations (or latency
  windows) of one run are autocorrelated; the interval is over *batch means*
  (:func:`batch_means`): the series cut into batches of about ``sqrt(n)`` values, whose
  means are close to independent when a batch is longer than the correlation time.
  Raw latency steps are never used as independent samples: a percentile's interval is
  over the per-window percentiles.
- **Across runs, each run is one value** (its objective), and runs are independent by
  construction (fresh processes).

Racing (:func:`race`) closes a configuration when it is slower than the best of its
comparison set by more than the interval of their difference, with the error rate split
over the looks and the configurations compared (Bonferroni again), so that the true best
is closed in at most ``alpha`` of sweeps over the whole race.

numpy and scipy only; nothing here knows what is measured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def _t(q: float, df: float) -> float:
    """Student's t quantile ``q`` at ``df`` degrees of freedom. scipy is imported here, not
    at the top: the sweeper reads a grid's design (this module's looks) on every ``-m``,
    and ``scipy.stats`` takes most of a second to import."""
    from scipy import stats

    return float(stats.t.ppf(q, df))


#: The confidence of every interval unless a caller says otherwise.
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval; ``n``: the values it rests on (runs or batches)."""

    estimate: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    @property
    def relative_half_width(self) -> float:
        """Half-width over the estimate's magnitude (``inf`` for an estimate of 0)."""
        scale = abs(self.estimate)
        return self.half_width / scale if scale > 0 else math.inf

    def within(self, precision: float) -> bool:
        """The interval is within ``±precision`` of its estimate (``precision=0.05``: 5 %)."""
        return self.relative_half_width <= precision

    def covers(self, value: float) -> bool:
        return self.low <= value <= self.high


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


def batch_means(values: Sequence[float] | np.ndarray, batches: int | None = None) -> np.ndarray:
    """The means of consecutive batches of ``values`` (about ``sqrt(n)`` batches of about
    ``sqrt(n)`` values, at least 2 batches); the values left over are the *first* ones
    (dropped: they stand closest to the warm-up)."""
    x = np.asarray(values, dtype=float)
    n = x.size
    if n < 2:
        raise ValueError(f"batch means need at least 2 values, got {n}")
    b = batches if batches is not None else max(2, int(math.isqrt(n)))
    b = min(b, n)
    size = n // b
    kept = x[n - b * size :]
    return kept.reshape(b, size).mean(axis=1)


def t_interval(values: Sequence[float] | np.ndarray, alpha: float) -> Interval:
    """Student's t interval of the mean of independent ``values`` at level ``1 - alpha``."""
    x = np.asarray(values, dtype=float)
    n = x.size
    if n < 2:
        raise ValueError(f"an interval needs at least 2 values, got {n}")
    mean = float(x.mean())
    sem = float(x.std(ddof=1)) / math.sqrt(n)
    half = _t(1.0 - alpha / 2.0, n - 1) * sem
    return Interval(mean, mean - half, mean + half, n)


def log_interval(values: Sequence[float] | np.ndarray, alpha: float) -> Interval:
    """The geometric mean of positive independent ``values`` with the t interval of their
    logarithms, taken back: ``exp(m)``, ``exp(m ± t s / sqrt(n))``."""
    x = np.asarray(values, dtype=float)
    if np.any(x <= 0):
        raise ValueError("a log interval needs positive values")
    iv = t_interval(np.log(x), alpha)
    return Interval(math.exp(iv.estimate), math.exp(iv.low), math.exp(iv.high), iv.n)


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
class RunValue:
    """One completed run's objective value, as a sweep's rounds judge it: the run's folder,
    its configuration (runs of one configuration pooled, seeds apart), the comparison set
    it is ranked in, and the value (lower is better: a time)."""

    path: Path
    configuration: str
    comparison: str
    objective: str
    value: float
    label: str = ""  # the configuration's name in sentences (the axes that vary)


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
    independent values such as one per run. ``log``: the interval is over the values'
    logarithms and taken back (a geometric mean with a ratio interval: how the report pools
    runs, :func:`rlperf.report.stats.estimates.across_runs`).
    """

    def __init__(
        self,
        precision: float,
        looks: Sequence[int],
        batched: bool,
        confidence: float = CONFIDENCE,
        log: bool = False,
    ) -> None:
        if not 0 < precision < 1:
            raise ValueError(f"precision={precision} must be in (0, 1) (0.05: ±5 %)")
        self.precision = precision
        self.looks = tuple(sorted(set(int(n) for n in looks)))
        self.batched = batched
        self.log = log
        self.alpha = look_alpha(len(self.looks), confidence)

    def interval(self, values: Sequence[float] | np.ndarray) -> Interval:
        """The interval at this rule's per-look level (whatever the sample size): over the
        batch means of a run's values (its estimate is their mean: the values that fill
        whole batches), or over independent values."""
        x = np.asarray(values, dtype=float)
        if self.log:
            return log_interval(x, self.alpha)
        return t_interval(batch_means(x) if self.batched else x, self.alpha)

    def look(self, values: Sequence[float] | np.ndarray) -> Look | None:
        """At a planned look, the interval and whether the target is met; else None."""
        n = len(values)
        if n not in self.looks:
            return None
        iv = self.interval(values)
        return Look(n, iv, iv.within(self.precision))


#: A run's time-like objectives are per this many env steps (seconds per 1 000 env steps).
PER_1K = 1000.0

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
        the planned ``looks`` and the ``confidence``."""
        iv = self.last.interval if self.last is not None else None
        return {
            "objective": objective,
            "target": self.rule.precision,
            "reached": self.at is not None,
            at: self.at,
            "values": len(self.values),
            "estimate": iv.estimate if iv else None,
            "low": iv.low if iv else None,
            "high": iv.high if iv else None,
            "relative_half_width": iv.relative_half_width if iv else None,
            "looks": list(self.rule.looks),
            "confidence": CONFIDENCE,
        }


@dataclass(frozen=True)
class RaceResult:
    """After a round: who is still racing, and what each closed one lost by."""

    best: str
    open: tuple[str, ...]
    closed: Mapping[str, Interval]  # name -> its mean / the best's, as an interval


def race(
    values: Mapping[str, Sequence[float]],
    looks: int,
    confidence: float = CONFIDENCE,
    already_closed: Sequence[str] = (),
    log: bool = False,
) -> RaceResult:
    """One round of a race among configurations whose objective is lower-is-better (a time).

    ``values``: per configuration, one value per run so far. The best is the lowest mean
    among the open ones. A configuration is closed when Welch's interval of its mean minus
    the best's lies wholly above 0, at level ``1 - alpha / (looks * (k - 1))`` for ``k``
    configurations (Bonferroni over every look of the race and every pair with the best),
    so that over the whole race the true best is closed with probability at most
    ``1 - confidence``. Configurations with fewer than 2 runs stay open. ``log``: the
    values' logarithms are compared (geometric means, as the report pools runs); a closed
    one's loss is then the interval of the ratio of the geometric means.
    """
    names = [n for n in values if n not in already_closed]
    if not names:
        raise ValueError("race needs at least one open configuration")
    data = {n: np.log(np.asarray(values[n], dtype=float)) if log else values[n] for n in values}
    means = {n: float(np.mean(data[n])) for n in names}
    best = min(names, key=lambda n: means[n])
    k = len(values)
    alpha = (1.0 - confidence) / (max(1, looks) * max(1, k - 1))
    closed: dict[str, Interval] = {}
    for name in names:
        if name == best or len(values[name]) < 2 or len(values[best]) < 2:
            continue
        low, high = welch_difference(data[name], data[best], alpha)
        if low <= 0:
            continue
        n = len(values[name])
        if log:
            diff = means[name] - means[best]
            closed[name] = Interval(math.exp(diff), math.exp(low), math.exp(high), n)
        else:
            ratio = means[name] / means[best] if means[best] else math.inf
            base = means[best] if means[best] else 1.0
            closed[name] = Interval(ratio, 1.0 + low / base, 1.0 + high / base, n)
    open_names = tuple(n for n in names if n not in closed)
    return RaceResult(best, open_names, closed)


def welch_difference(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, alpha: float
) -> tuple[float, float]:
    """Welch's ``1 - alpha`` interval of ``mean(a) - mean(b)`` (unequal variances)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    diff = float(x.mean() - y.mean())
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, diff
    df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    half = _t(1.0 - alpha / 2.0, df) * se
    return diff - half, diff + half


def runs_needed(values: Sequence[float], precision: float, alpha: float) -> int | None:
    """About how many runs in all would bring the interval within ``±precision``, from the
    spread measured so far (``None``: fewer than 2 runs, or no spread to go by)."""
    x = np.asarray(values, dtype=float)
    if x.size < 2 or x.mean() == 0 or x.std(ddof=1) == 0:
        return None
    cv = float(x.std(ddof=1)) / abs(float(x.mean()))
    n = x.size
    for _ in range(60):  # t quantile depends on n: iterate to the fixed point
        need = math.ceil((_t(1 - alpha / 2, max(n - 1, 1)) * cv / precision) ** 2)
        if need <= n:
            return max(need, 2)
        n = need
    return n


def runs_to_separate(
    a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE
) -> int | None:
    """About how many runs of each of two configurations would separate them: the smallest
    ``n`` at which Welch's interval of the difference of their mean logarithms, with the
    spread measured so far, excludes 0. ``None``: fewer than 2 runs of either (no spread to
    go by), or equal means."""
    x, y = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    if x.size < 2 or y.size < 2:
        return None
    d = abs(float(x.mean() - y.mean()))
    var = (float(x.var(ddof=1)) + float(y.var(ddof=1))) / 2.0
    if d == 0:
        return None
    if var == 0:
        return max(x.size, y.size)
    n = max(x.size, y.size)
    for _ in range(60):  # the t quantile depends on n: iterate to the fixed point
        t = _t(1 - (1 - confidence) / 2, max(2 * n - 2, 1))
        need = max(2, math.ceil(2 * var * (t / d) ** 2))
        if need == n:
            break
        n = need
    return n
