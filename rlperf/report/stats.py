"""Confidence intervals, speedups and rankings with ties.

Intervals are percentile bootstrap intervals from :func:`scipy.stats.bootstrap`
over the non-warm-up iterations of a training cell or the non-warm-up steps of
an inference cell (a seed derived from the cell id keeps reports reproducible).
Speedup intervals reuse each cell's bootstrap distribution (see :func:`speedup`). Iterations of one
run are autocorrelated (learn times drift as TensorFlow / torch caches warm
up), so these intervals are if anything narrow; they describe the run, not the
machine's run-to-run variance, which only repeated cells measure.

The one piece of statistics written here is the tie rule (documented, not
taken from a library): a cell's rank is 1 + the number of cells whose whole
interval lies strictly below (better than) its own, so cells whose intervals
overlap share a rank.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

N_RESAMPLES = 1000
CONFIDENCE = 0.95
SEED = 0
#: Above this many samples the bootstrap resamples a random subset (wider, conservative CI).
MAX_SAMPLES = 20_000
#: Random integers drawn per bootstrap batch (bounds memory, keeps batches few).
BATCH_DRAWS = 4_000_000


@dataclass(frozen=True, eq=False)
class Estimate:
    """A point estimate with its bootstrap interval, sample count and bootstrap distribution."""

    value: float
    low: float
    high: float
    n: int
    distribution: np.ndarray | None = field(default=None, repr=False)

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


def speedup(baseline: Estimate, candidate: Estimate) -> Estimate:
    """How many times faster ``candidate`` is than ``baseline`` (ratio of times), with CI.

    The interval is the percentile interval of the ratio of the two cells'
    independent bootstrap distributions, i.e. an unpaired two-sample bootstrap
    of the ratio that reuses the resamples already drawn for each cell.
    """
    n = min(baseline.n, candidate.n)
    if not (np.isfinite(baseline.value) and np.isfinite(candidate.value)):
        return Estimate(np.nan, np.nan, np.nan, n)
    value = baseline.value / candidate.value
    if baseline.distribution is None or candidate.distribution is None:
        return Estimate(value, np.nan, np.nan, n)
    ratio = baseline.distribution / candidate.distribution
    alpha = (1 - CONFIDENCE) / 2
    low, high = np.percentile(ratio, [100 * alpha, 100 * (1 - alpha)])
    return Estimate(value, float(low), float(high), n, ratio)


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
