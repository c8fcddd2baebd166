"""An estimate and its interval, within one run or run to run, and the ratio of two.

One rule per quantity (docs/report.md#statistics):

- **Within a run** (:func:`within_run`, :func:`within_run_ratio`): successive iterations
  (or latency steps, env windows) of one run are autocorrelated, so they are never
  resampled as if independent. The values are cut into about ``n^(1/3)`` consecutive
  batches (:func:`batch_count`; the values left over are the first ones, nearest the
  warm-up), the run's statistic is taken per batch (the mean, the median, or the ratio of
  sums), and the interval is Student's t over the batch statistics, centred on the run's
  statistic over all its values, on the log scale (``value * exp(± t se / value)``: a
  positive time keeps positive bounds with two batches too). Batches of ``n^(2/3)``
  values outlast the correlation: at lag-1 correlation 0.7 the interval covers the run's
  mean in 94 % of runs of 100 iterations, where an iid bootstrap covers 56 %
  (tests/stats/test_simulation.py). The run's own precision stop uses the same batches
  (:mod:`rlperf.stats.stopping`).
- **Run to run** (:func:`across_runs`): each run is one value, and runs are independent by
  construction (fresh processes). The estimate is the geometric mean and the interval
  Student's t on the logarithms, taken back.
- **A ratio of two estimates** (:func:`speedup`): the difference of their logarithms, with
  Welch's standard error and Welch-Satterthwaite degrees of freedom, taken back. Run to
  run this is exactly Welch's test on the runs' logarithms, so a speedup interval that
  excludes 1 and the verdict "separated" (:func:`separated`) are one statement.
- **The level** is the design's (:func:`rlperf.stats.stopping.design_confidence`): where a
  sweep decided the runs' number by looking at them, the per-look level it stopped on.

Degenerate input, by rule (each said where it changes an answer):

- a zero, negative or non-finite value has no place on a log scale, nor a time: it is
  not a value (:func:`usable` drops it; callers say how many runs they left out);
- values that agree to the last digit measure no spread: no interval (its bounds are
  NaN), so nothing reaches a precision, separates or closes on them;
- a lower bound (a time to target that was not reached) makes the estimate a lower bound
  (``Estimate.bound``): it never reaches a precision and never separates a configuration
  from a slower one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from rlperf.stats.prior import VariancePrior

#: The confidence of every interval unless the design says otherwise.
CONFIDENCE = 0.95

NAN = float("nan")


@cache
def t_quantile(q: float, df: float) -> float:
    """Student's t quantile ``q`` at ``df`` degrees of freedom (``df=inf``: the normal)."""
    from scipy import stats

    if math.isinf(df):
        return float(stats.norm.ppf(q))
    return float(stats.t.ppf(q, df))


def _exp(x: float) -> float:
    """``exp(x)``, ``inf`` past the float range (an interval at a level of 1 - 1e-6 over
    2 runs reaches that far)."""
    return math.exp(x) if x < 709.0 else math.inf


def t_two_sided(confidence: float, df: float) -> float:
    """The two-sided ``confidence`` quantile of Student's t at ``df`` degrees of freedom."""
    return t_quantile(1.0 - (1.0 - confidence) / 2.0, df)


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval; ``n``: the values it rests on (runs or batches).
    NaN bounds: no interval (fewer than 2 values, or no spread among them)."""

    estimate: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    @property
    def relative_half_width(self) -> float:
        """Half-width over the estimate's magnitude (``inf`` for an estimate of 0, NaN
        without an interval)."""
        scale = abs(self.estimate)
        return self.half_width / scale if scale > 0 else math.inf

    def within(self, precision: float) -> bool:
        """The interval is within ``±precision`` of its estimate (``precision=0.05``: 5 %);
        never without an interval."""
        return bool(self.relative_half_width <= precision)

    def covers(self, value: float) -> bool:
        return bool(self.low <= value <= self.high)


def batch_count(n: int) -> int:
    """How many batches ``n`` successive values are cut into: about ``n^(1/3)`` (at least 2,
    at most ``n``), so that each batch of about ``n^(2/3)`` values outlasts the series'
    correlation (``sqrt(n)`` batches of ``sqrt(n)`` cover 91 % at lag-1 correlation 0.7
    over 100 values; these 94 %)."""
    return min(n, max(2, round(n ** (1.0 / 3.0))))


def batches(values: Sequence[float] | np.ndarray, count: int | None = None) -> np.ndarray:
    """``values`` as ``count`` rows of consecutive values (default :func:`batch_count`); the
    values left over are the *first* ones (dropped: they stand closest to the warm-up)."""
    x = np.asarray(values, dtype=float)
    n = x.size
    if n < 2:
        raise ValueError(f"batches need at least 2 values, got {n}")
    b = min(count if count is not None else batch_count(n), n)
    size = n // b
    return x[n - b * size :].reshape(b, size)


def batch_means(values: Sequence[float] | np.ndarray, count: int | None = None) -> np.ndarray:
    """The means of :func:`batches` of ``values``."""
    return batches(values, count).mean(axis=1)


def t_interval(values: Sequence[float] | np.ndarray, alpha: float) -> Interval:
    """Student's t interval of the mean of independent ``values`` at level ``1 - alpha``;
    values that agree to the last digit give no interval (NaN bounds)."""
    x = np.asarray(values, dtype=float)
    n = x.size
    if n < 2:
        raise ValueError(f"an interval needs at least 2 values, got {n}")
    mean = float(x.mean())
    sem = float(x.std(ddof=1)) / math.sqrt(n)
    if sem == 0:
        return Interval(mean, NAN, NAN, n)
    half = t_quantile(1.0 - alpha / 2.0, n - 1) * sem
    return Interval(mean, mean - half, mean + half, n)


def log_interval(values: Sequence[float] | np.ndarray, alpha: float) -> Interval:
    """The geometric mean of positive independent ``values`` with the t interval of their
    logarithms, taken back: ``exp(m)``, ``exp(m ± t s / sqrt(n))``."""
    x = np.asarray(values, dtype=float)
    if np.any(~(x > 0)):
        raise ValueError("a log interval needs positive values")
    iv = t_interval(np.log(x), alpha)
    return Interval(math.exp(iv.estimate), math.exp(iv.low), _exp(iv.high), iv.n)


def welch_df(se2_a: float, df_a: float, se2_b: float, df_b: float) -> float:
    """Welch-Satterthwaite degrees of freedom of a difference whose sides have squared
    standard errors ``se2_*`` on ``df_*`` degrees of freedom."""
    parts = sum((s * s) / d for s, d in ((se2_a, df_a), (se2_b, df_b)) if s > 0 and d > 0)
    return (se2_a + se2_b) ** 2 / parts if parts > 0 else math.inf


def welch_difference(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, alpha: float
) -> tuple[float, float]:
    """Welch's ``1 - alpha`` interval of ``mean(a) - mean(b)`` (unequal variances); NaN
    bounds where neither side has a spread (no interval, nothing separated)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    diff = float(x.mean() - y.mean())
    if va + vb == 0:
        return NAN, NAN
    half = t_quantile(1.0 - alpha / 2.0, welch_df(va, x.size - 1, vb, y.size - 1))
    half *= math.sqrt(va + vb)
    return diff - half, diff + half


def usable(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """The values that are values: finite and positive (a time, or anything on a log
    scale); a zero, a negative or a NaN is left out (docs/report.md#statistics)."""
    x = np.asarray(values, dtype=float)
    return x[np.isfinite(x) & (x > 0)]


@dataclass(frozen=True, eq=False)
class Estimate:
    """A point estimate with its interval, at its level.

    ``runs``: how many runs it pools (1: within one run, over ``n`` iterations, windows or
    steps; ``n``: run to run, over ``n`` runs' values). ``log_se`` and ``df``: the standard
    error of its logarithm and its degrees of freedom (what a ratio of two estimates is
    computed from, :func:`speedup`). ``bound``: a lower bound (rests on a time to target
    that was not reached). NaN bounds: no interval.
    """

    value: float
    low: float
    high: float
    n: int
    runs: int = 1
    log_se: float = NAN
    df: float = NAN
    confidence: float = CONFIDENCE
    bound: bool = False
    prior: bool = False

    @property
    def across_runs(self) -> bool:
        """True when it pools several runs (its interval, if any, is run to run)."""
        return self.runs > 1

    @property
    def one_run(self) -> bool:
        """True when it has an interval, and that interval is within one run (for a ratio:
        one side's is): the run-to-run spread is not in it."""
        return self.runs <= 1 and self.has_ci

    @property
    def has_ci(self) -> bool:
        """False with fewer than 2 values, or values without a spread."""
        return bool(np.isfinite(self.low) and np.isfinite(self.high))

    def scaled(self, factor: float) -> Estimate:
        """The same estimate in a unit ``factor`` times as large (env steps -> frames)."""
        return replace(self, value=self.value * factor, low=self.low * factor,
                       high=self.high * factor)  # fmt: skip


def _none(n: int, runs: int = 1, value: float = NAN, confidence: float = CONFIDENCE) -> Estimate:
    return Estimate(value, NAN, NAN, n, runs, confidence=confidence)


def _from_batches(value: float, per_batch: np.ndarray, n: int, confidence: float) -> Estimate:
    """``value`` with Student's t interval over its batch statistics ``per_batch``, on the
    log scale: ``value * exp(± t se / value)`` (the relative standard error is the log's,
    to first order), so the bounds of a positive quantity stay positive however few the
    batches, and a rate taken back from a time keeps both its bounds."""
    b = per_batch.size
    se = float(per_batch.std(ddof=1)) / math.sqrt(b)
    if not se > 0 or not value > 0:
        return _none(n, value=value, confidence=confidence)
    log_se = se / value
    half = t_two_sided(confidence, b - 1) * log_se
    return Estimate(value, value * math.exp(-half), value * _exp(half), n, 1, log_se, b - 1,
                    confidence)  # fmt: skip


def within_run(
    samples: Sequence[float] | np.ndarray, statistic: str = "mean",
    confidence: float = CONFIDENCE,
) -> Estimate:  # fmt: skip
    """One run's mean or median of its successive ``samples`` (non-finite ones left out),
    with the batch interval of the module docstring."""
    x = np.asarray(samples, dtype=float)
    x = x[np.isfinite(x)]
    func = np.median if statistic == "median" else np.mean
    if x.size == 0:
        return _none(0, confidence=confidence)
    value = float(func(x))
    if x.size < 2:
        return _none(1, value=value, confidence=confidence)
    return _from_batches(value, func(batches(x), axis=1), int(x.size), confidence)


def within_run_ratio(
    time: Sequence[float] | np.ndarray, work: Sequence[float] | np.ndarray, scale: float,
    confidence: float = CONFIDENCE,
) -> Estimate:  # fmt: skip
    """``scale`` x total time / total work (seconds per 1 000 env steps) over one run's
    successive (time, work) rows, with the batch interval (each batch's own ratio of sums).

    The ratio of sums, not the mean of per-row ratios: rows that hold more work weigh more,
    as they do in the run's total. Rows whose time or work is not finite, or whose work is
    not positive, are left out.
    """
    t, w = np.asarray(time, dtype=float), np.asarray(work, dtype=float)
    ok = np.isfinite(t) & np.isfinite(w) & (w > 0)
    t, w = t[ok], w[ok]
    if t.size == 0:
        return _none(0, confidence=confidence)
    value = float(scale * t.sum() / w.sum())
    if t.size < 2:
        return _none(1, value=value, confidence=confidence)
    per_batch = scale * batches(t).sum(axis=1) / batches(w).sum(axis=1)
    return _from_batches(value, per_batch, int(t.size), confidence)


def across_runs(
    run_values: Sequence[float] | np.ndarray,
    confidence: float = CONFIDENCE,
    bound: bool = False,
    prior: VariancePrior | None = None,
) -> Estimate:
    """Geometric mean of several runs' values (one statistic per run) with Student's t
    interval on their logarithms at ``confidence``: ``exp(m)``, ``exp(m ± t s / sqrt(n))``
    on ``n - 1`` degrees of freedom; with a ``prior``, ``s²`` is the moderated variance on
    ``d0 + n - 1`` (:meth:`rlperf.stats.prior.VariancePrior.moderate`).

    Only :func:`usable` values count. One run: its value, no interval. Runs that agree to
    the last digit: no interval (a prior still gives one). ``bound``: some value is a lower
    bound.
    """
    x = usable(run_values)
    n = int(x.size)
    if n == 0:
        return _none(0, confidence=confidence)
    if n < 2:
        return replace(_none(1, value=float(x[0]), confidence=confidence), bound=bound)
    logs = np.log(x)
    m = float(logs.mean())
    var, df = float(logs.var(ddof=1)), float(n - 1)
    if prior is not None:
        var, df = prior.moderate(var, df)
    value = math.exp(m)
    if var == 0:
        return replace(_none(n, runs=n, value=value, confidence=confidence), bound=bound)
    se = math.sqrt(var / n)
    half = t_two_sided(confidence, df) * se
    return Estimate(value, math.exp(m - half), _exp(m + half), n, n, se, df, confidence,
                    bound, prior is not None)  # fmt: skip


def recorded(
    value: float, low: float, high: float, n: int, confidence: float, df: float
) -> Estimate:
    """The interval a run stopped on, as its ``summary.json`` ``precision`` records it
    (a t interval over ``df + 1`` batch means at ``confidence``)."""
    if not (value > 0 and high > low):
        return _none(n, value=value, confidence=confidence)
    se = (high - low) / 2.0 / t_two_sided(confidence, df)
    return Estimate(value, low, high, n, 1, se / value, df, confidence)


def reciprocal(e: Estimate, scale: float = 1.0) -> Estimate:
    """``scale / e``: a time per unit of work as a rate (1 000 / s per 1 000 env steps = env
    steps per second), its bounds mapped through the same decreasing function (so they
    swap); the logarithm's standard error is the same."""
    if not np.isfinite(e.value) or e.value <= 0:
        return _none(e.n, e.runs, confidence=e.confidence)
    low = scale / e.high if e.has_ci and e.high > 0 else NAN
    high = scale / e.low if e.has_ci and e.low > 0 else NAN
    return replace(e, value=scale / e.value, low=low, high=high)


def ratio(a: Estimate, b: Estimate, confidence: float) -> Estimate:
    """``a / b`` with the ``confidence`` interval of the difference of their logarithms
    (Welch's standard error and degrees of freedom), taken back. No interval where either
    side has none."""
    n, runs = min(a.n, b.n), min(a.runs, b.runs)  # as run-to-run as its weaker side
    bound, prior = a.bound or b.bound, a.prior or b.prior
    if not (a.value > 0 and b.value > 0):
        return _none(n, runs, confidence=confidence)
    value = a.value / b.value
    if not (a.has_ci and b.has_ci):
        return replace(_none(n, runs, value=value, confidence=confidence), bound=bound)
    va, vb = a.log_se**2, b.log_se**2
    df = welch_df(va, a.df, vb, b.df)
    se = math.sqrt(va + vb)
    half = t_two_sided(confidence, df) * se
    log_value = math.log(value)
    return Estimate(value, math.exp(log_value - half), _exp(log_value + half), n, runs, se,
                    df, confidence, bound, prior)  # fmt: skip


def speedup(baseline: Estimate, candidate: Estimate) -> Estimate:
    """How many times faster ``candidate`` is than ``baseline`` (the ratio of their times),
    at the higher of their two levels (:func:`ratio`)."""
    return ratio(baseline, candidate, max(baseline.confidence, candidate.confidence))


def separated(a: Estimate, b: Estimate) -> bool:
    """Whether two configurations are told apart: both measured run to run, and the
    interval of their ratio (:func:`speedup`) excludes 1. Within-run intervals never
    separate configurations; nor does a lower bound that lies below the other."""
    return bool(slower(a, b, max(a.confidence, b.confidence)) or
                slower(b, a, max(a.confidence, b.confidence)))  # fmt: skip


def slower(a: Estimate, b: Estimate, confidence: float) -> Estimate | None:
    """The ratio ``a / b`` (:func:`ratio`) where it shows ``a`` slower than ``b`` (its interval
    wholly above 1), both measured run to run and ``b`` not a lower bound (its true time may
    be larger still); else None."""
    if not (a.across_runs and b.across_runs) or b.bound:
        return None
    r = ratio(a, b, confidence)
    return r if r.has_ci and r.low > 1.0 else None


def runs_to_separate(
    a: Estimate, b: Estimate, power: float = 0.8, difference: float | None = None
) -> int | None:
    """About how many runs of each of two configurations measured run to run would separate
    them with probability ``power``: the smallest ``n`` with ``n >= 2 s² (t(1 - α/2, 2n - 2) +
    t(power, 2n - 2))² / d²``, at the level of the test that separates (the higher of their
    two), from their measured log spread ``s`` (the mean of their two variances) and a
    difference ``d`` on the log scale: ``difference`` (a ratio minus 1: 0.05 for 5 %), by
    default the one measured. ``None``: either side measured once or without a spread, or a
    difference of 0."""
    if not (a.across_runs and b.across_runs and a.has_ci and b.has_ci):
        return None
    d = abs(math.log(a.value / b.value)) if difference is None else math.log1p(abs(difference))
    if d == 0:
        return None
    var = (a.log_se**2 * a.runs + b.log_se**2 * b.runs) / 2.0
    level = max(a.confidence, b.confidence)
    n = max(a.runs, b.runs, 2)
    for _ in range(60):  # the t quantiles depend on n: iterate to the fixed point
        df = 2 * n - 2
        need = max(2, math.ceil(2 * var * ((t_two_sided(level, df) + t_quantile(power, df)) / d)
                                ** 2))  # fmt: skip
        if need == n:
            break
        n = need
    return n
