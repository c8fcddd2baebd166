"""Confidence intervals, speedups and rankings with ties.

Every interval of the report has the level :data:`CONFIDENCE` (95 %).

A configuration run once gets a percentile bootstrap interval from
:func:`scipy.stats.bootstrap` over the non-warm-up iterations of its training
cell or the non-warm-up steps of its inference cell (:func:`bootstrap_ci`; a
seed derived from the cell id keeps reports reproducible). Iterations of one
run are autocorrelated (learn times drift as TensorFlow / torch caches warm
up), so these intervals are if anything narrow; they describe the run, not the
machine's run-to-run variance, which only repeated runs measure.

A configuration run several times (cells that differ only in ``seed``) gets an
interval over its runs (:func:`across_runs`): the runs' own statistics (each
run's mean iteration time, median latency, ...) are the samples, never the
pooled iterations, which are not independent samples of the configuration. The
estimate is their geometric mean and the interval Student's t on their logs:
with the 2-5 repeats a sweep affords, a percentile bootstrap over run values
covers far less than its nominal level (over 2 runs it is the range of the
two, a 50 % interval). Speedup intervals reuse each estimate's sampling
distribution (see :func:`speedup`).

The one piece of statistics written here is the tie rule (documented, not
taken from a library): a cell's rank is 1 + the number of cells whose whole
interval lies strictly below (better than) its own, so cells whose intervals
overlap share a rank.

``scipy.stats`` is imported inside the functions that use it: it takes about half a
second to import, paid only once an interval is computed (not to read or list cells).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from functools import cache

import numpy as np

#: Bootstrap resamples per cell (and draws per estimate for speedup ratios).
N_RESAMPLES = 1000
#: The level of every interval in the report (docs/report.md, "Statistics").
CONFIDENCE = 0.95
SEED = 0
#: Above this many samples the bootstrap resamples a random subset (wider, conservative CI).
MAX_SAMPLES = 20_000
#: Random integers drawn per bootstrap batch (bounds memory, keeps batches few).
BATCH_DRAWS = 4_000_000


#: What an interval over one run's own samples says wherever it appears: it describes that
#: run, not how far a second run would land (docs/report.md#repeats).
ONE_RUN = "one run: run-to-run spread not measured"


@dataclass(frozen=True, eq=False)
class Estimate:
    """A point estimate with its interval, sample count and sampling distribution.

    ``runs`` is how many runs the estimate pools: 1 for a within-run interval
    over ``n`` samples (iterations or steps), ``n`` for an interval over ``n``
    runs' values (:func:`across_runs`).
    """

    value: float
    low: float
    high: float
    n: int
    distribution: np.ndarray | None = field(default=None, repr=False)
    runs: int = 1

    @property
    def across_runs(self) -> bool:
        """True when the interval is run to run (several runs pooled)."""
        return self.runs > 1

    @property
    def one_run(self) -> bool:
        """True when it has an interval, and that interval is within one run (for a ratio:
        one side's is): the run-to-run spread is not in it."""
        return self.runs <= 1 and bool(np.isfinite(self.low) and np.isfinite(self.high))

    @property
    def has_ci(self) -> bool:
        """False when there were fewer than 2 samples."""
        return bool(np.isfinite(self.low) and np.isfinite(self.high))


def _clean(values: np.ndarray | list[float]) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    return arr[np.isfinite(arr)]


def _seed(key: str) -> int:
    # Each cell gets its own stream: cells resampled with the same indices would make
    # the ratio of two bootstrap distributions a paired, not an unpaired, bootstrap.
    return zlib.crc32(key.encode()) ^ SEED


def bootstrap_ci(
    values: np.ndarray | list[float], statistic: str = "mean", key: str = ""
) -> Estimate:
    """Point estimate (mean or median) and 95% percentile-bootstrap interval.

    ``key`` (the cell id) seeds the resampling, so reports are reproducible.
    """
    from scipy import stats

    arr = _clean(values)
    func = np.median if statistic == "median" else np.mean
    if arr.size == 0:
        return Estimate(np.nan, np.nan, np.nan, 0)
    value = float(func(arr))
    if arr.size < 2:
        return Estimate(value, np.nan, np.nan, int(arr.size))
    if np.ptp(arr) == 0:
        return Estimate(value, value, value, int(arr.size), np.full(N_RESAMPLES, value))
    rng = np.random.default_rng(_seed(key))
    sample = rng.choice(arr, MAX_SAMPLES, replace=False) if arr.size > MAX_SAMPLES else arr
    res = stats.bootstrap(
        (sample,),
        func,
        n_resamples=N_RESAMPLES,
        confidence_level=CONFIDENCE,
        method="percentile",
        vectorized=True,
        batch=max(1, BATCH_DRAWS // sample.size),
        rng=rng,
    )
    ci = res.confidence_interval
    return Estimate(value, float(ci.low), float(ci.high), int(arr.size),
                    np.asarray(res.bootstrap_distribution))  # fmt: skip


def bootstrap_ratio_ci(
    time: np.ndarray | list[float], work: np.ndarray | list[float], scale: float, key: str = ""
) -> Estimate:
    """``scale`` x total time / total work (e.g. seconds per 1 000 env steps) with a 95 %
    percentile-bootstrap interval that resamples (time, work) pairs together.

    The ratio of sums, not the mean of per-row ratios: rows that hold more work (an
    iteration that sampled 6 400 env steps against one of 4 000) weigh more, as they do
    in the run's total. Rows whose time or work is not finite, or whose work is not
    positive, are left out.
    """
    t, w = np.asarray(time, dtype=float), np.asarray(work, dtype=float)
    ok = np.isfinite(t) & np.isfinite(w) & (w > 0)
    t, w = t[ok], w[ok]
    if t.size == 0:
        return Estimate(np.nan, np.nan, np.nan, 0)
    value = float(scale * t.sum() / w.sum())
    if t.size < 2:
        return Estimate(value, np.nan, np.nan, int(t.size))
    per_row = t / w
    if np.ptp(per_row) == 0:
        return Estimate(value, value, value, int(t.size), np.full(N_RESAMPLES, value))
    rng = np.random.default_rng(_seed(key))
    if t.size > MAX_SAMPLES:
        pick = rng.choice(t.size, MAX_SAMPLES, replace=False)
        t, w = t[pick], w[pick]
    # Resampled row indices, in batches that bound memory; numpy's gather is 3x faster
    # here than scipy.stats.bootstrap(paired=True), which computes the same percentile
    # interval.
    rows = max(1, BATCH_DRAWS // t.size)
    parts = []
    for start in range(0, N_RESAMPLES, rows):
        idx = rng.integers(0, t.size, (min(rows, N_RESAMPLES - start), t.size))
        parts.append(scale * t[idx].sum(axis=1) / w[idx].sum(axis=1))
    dist = np.concatenate(parts)
    alpha = (1 - CONFIDENCE) / 2
    low, high = np.percentile(dist, [100 * alpha, 100 * (1 - alpha)])
    return Estimate(value, float(low), float(high), int(ok.sum()), dist)


def reciprocal(e: Estimate, scale: float = 1.0) -> Estimate:
    """``scale / e``: a time per unit of work as a rate (1 000 / s per 1 000 env steps = env
    steps per second), its interval and sampling distribution mapped through the same
    decreasing function (so the bounds swap)."""
    if not np.isfinite(e.value) or e.value <= 0:
        return Estimate(np.nan, np.nan, np.nan, e.n, runs=e.runs)
    dist = None if e.distribution is None else scale / e.distribution
    low = scale / e.high if e.has_ci and e.high > 0 else np.nan
    high = scale / e.low if e.has_ci and e.low > 0 else np.nan
    return Estimate(scale / e.value, low, high, e.n, dist, e.runs)


@cache
def _t_quantiles(df: int) -> np.ndarray:
    """Student-t quantiles at N_RESAMPLES evenly spaced probabilities (stratified draws)."""
    from scipy import stats

    probs = (np.arange(N_RESAMPLES) + 0.5) / N_RESAMPLES
    return np.asarray(stats.t.ppf(probs, df), dtype=float)


@cache
def _t_critical(df: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided ``confidence`` quantile of Student's t with ``df`` degrees of freedom."""
    from scipy import stats

    return float(stats.t.ppf(1 - (1 - confidence) / 2, df))


def across_runs(
    run_values: np.ndarray | list[float], key: str = "", confidence: float = CONFIDENCE
) -> Estimate:
    """Geometric mean of several runs' values (one statistic per run) with a Student-t
    interval on their logarithms.

    With ``m`` and ``s`` the mean and standard deviation of the logs of the
    ``n`` finite, positive run values: ``exp(m)`` and
    ``exp(m ± t(1 - (1 - CONFIDENCE) / 2, n - 1) · s / sqrt(n))``. Times vary
    by factors between runs, and an interval on the log scale stays positive
    (an arithmetic one over 2 runs that differ by 25 % reaches below zero).
    The sampling distribution (for speedup ratios) is ``exp(m + s / sqrt(n) ·
    T(n - 1))`` at evenly spaced quantiles, shuffled with a seed from ``key``.
    One run: the value, no interval. ``confidence``: the interval's level per look where
    the runs' number was decided by looking at them (a sweep's repeats stopped when precise,
    :func:`rlperf.results.precision.design_confidence`): the interval the sweep stopped on,
    whose coverage holds at ``CONFIDENCE`` under that stopping.
    """
    arr = _clean(run_values)
    arr = arr[arr > 0]
    n = int(arr.size)
    if n == 0:
        return Estimate(np.nan, np.nan, np.nan, 0)
    if n < 2:
        return Estimate(float(arr[0]), np.nan, np.nan, 1)
    logs = np.log(arr)
    m = float(logs.mean())
    se = float(logs.std(ddof=1) / np.sqrt(n))
    if se == 0:
        value = float(arr[0])
        return Estimate(value, value, value, n, np.full(N_RESAMPLES, value), runs=n)
    value = float(np.exp(m))
    half = _t_critical(n - 1, confidence) * se
    draws = np.exp(m + se * _t_quantiles(n - 1))
    draws = np.random.default_rng(_seed(key)).permutation(draws)
    return Estimate(value, float(np.exp(m - half)), float(np.exp(m + half)), n, draws, runs=n)


def speedup(baseline: Estimate, candidate: Estimate) -> Estimate:
    """How many times faster ``candidate`` is than ``baseline`` (ratio of times), with CI.

    The interval is the percentile interval of the ratio of the two estimates'
    independent sampling distributions: an unpaired two-sample bootstrap of the
    ratio that reuses the resamples already drawn for each cell, or, for a
    configuration run several times, its Student-t draws (:func:`across_runs`).
    """
    n = min(baseline.n, candidate.n)
    runs = min(baseline.runs, candidate.runs)  # a ratio is as run-to-run as its weaker side
    if not (np.isfinite(baseline.value) and np.isfinite(candidate.value)):
        return Estimate(np.nan, np.nan, np.nan, n, runs=runs)
    value = baseline.value / candidate.value
    if baseline.distribution is None or candidate.distribution is None:
        return Estimate(value, np.nan, np.nan, n, runs=runs)
    ratio = baseline.distribution / candidate.distribution
    alpha = (1 - CONFIDENCE) / 2
    low, high = np.percentile(ratio, [100 * alpha, 100 * (1 - alpha)])
    return Estimate(value, float(low), float(high), n, ratio, runs=runs)


def rank_with_ties(estimates: dict[str, Estimate], lower_is_better: bool = True) -> dict[str, int]:
    """Competition ranking where overlapping intervals tie (see module docstring).

    Cells without an interval (fewer than 2 samples) are ranked by their point
    estimate alone, as if their interval were that point.
    """

    def bounds(e: Estimate) -> tuple[float, float]:
        lo, hi = (e.low, e.high) if e.has_ci else (e.value, e.value)
        return (lo, hi) if lower_is_better else (-hi, -lo)

    b = {k: bounds(e) for k, e in estimates.items() if np.isfinite(e.value)}
    return {
        k: 1 + sum(1 for j, (_, hj) in b.items() if j != k and hj < lo) for k, (lo, _) in b.items()
    }


def tied(a: Estimate, b: Estimate) -> bool:
    """True when the two intervals overlap (the difference is inside the noise)."""
    alo, ahi = (a.low, a.high) if a.has_ci else (a.value, a.value)
    blo, bhi = (b.low, b.high) if b.has_ci else (b.value, b.value)
    return bool(alo <= bhi and blo <= ahi)
