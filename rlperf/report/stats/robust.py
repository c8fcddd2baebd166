"""Return comparisons that hold up: IQM, stratified bootstrap intervals, probability of
improvement and performance profiles (Agarwal et al. 2021, "Deep reinforcement learning
at the edge of the statistical precipice", NeurIPS).

Returns vary far more from seed to seed than times do, and a handful of runs is what a
sweep affords; a mean ± std over 3 seeds, or "the best seed", ranks noise. The paper's
three tools answer the questions a reader has, each with an interval:

- **IQM** (interquartile mean, :func:`iqm`): the mean of the middle 50 % of all scores
  (runs x tasks pooled). Unlike the mean it ignores the few runs that collapsed or took
  off; unlike the median it uses half the data, so its interval is narrow.
- **Stratified bootstrap** (:func:`stratified_bootstrap_ci`): resample the runs with
  replacement *within each task* and take the percentile interval of the statistic;
  tasks are fixed (the question is "what if the seeds had been different").
- **Probability of improvement** (:func:`probability_of_improvement`): P(X > Y), the
  chance that a run of X beats a run of Y on a task (ties count one half), averaged over
  tasks: the Mann-Whitney U statistic over ``n * m``. It says how often, not by how much.
- **Performance profiles** (:func:`performance_profile`): the fraction of runs whose
  score exceeds tau, for every tau; one curve above another is better everywhere.

Scores are arrays of ``runs x tasks`` (rliable's layout); a 1-d array is one task. The
unit of a "run" is a seed where there are at least 3, else an episode (:func:`unit_of`).

The methods are written here with numpy and scipy rather than depending on rliable 1.2
(an archived sdist that needs ``arch``, which needs pandas < 3). They draw their
bootstrap indices the way rliable does (``randint`` of a legacy
:class:`numpy.random.RandomState`, one ``runs x tasks`` array per resample and score
array), so for a seed rliable's intervals are reproduced exactly, and the stream is
frozen across NumPy versions (NEP 19). ``tests/report/stats/test_report_robust.py`` holds
every function against values rliable 1.2 computed on fixed arrays
(``scripts/rliable_reference.py`` writes them to ``tests/data/rliable_reference.json``).

``scipy.stats`` is imported inside the functions that use it (see
:mod:`rlperf.report.stats.estimates`).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: Bootstrap resamples per estimate (rliable's default for profiles).
REPS = 2000
#: The level of every interval (the report's, :data:`rlperf.stats.intervals.CONFIDENCE`).
LEVEL = 0.95
#: The units a return is counted in (:func:`unit_of`).
UNITS = ("seed", "episode", "iteration")  # iteration: a training run's per-iteration mean
#: returns, where fewer than 3 seeds exist and no single episode was recorded
#: Fewest seeds whose runs are the unit of a comparison (:func:`unit_of`).
MIN_SEEDS = 3
#: Resampled scores held at once (bounds memory for thousands of episodes).
CHUNK_SCORES = 4_000_000

Statistic = Callable[[np.ndarray], "float | np.ndarray"]


@dataclass(frozen=True)
class ReturnEstimate:
    """A point estimate of returns with its percentile-bootstrap interval.

    ``n`` is the number of runs (seeds or episodes, as ``unit`` says) per task and
    ``tasks`` the number of tasks; ``low`` and ``high`` are NaN with fewer than 2 runs.
    """

    value: float
    low: float
    high: float
    n: int
    unit: str
    tasks: int = 1

    @property
    def has_ci(self) -> bool:
        """False when there were fewer than 2 runs to resample."""
        return bool(np.isfinite(self.low) and np.isfinite(self.high))


def unit_of(n_seeds: int) -> str:
    """The unit of a return comparison: ``"seed"`` with at least 3 seeds, else ``"episode"``.

    Seeds are the independent replicates of a training run: an interval over seeds says
    what another seed would give, which is the question a comparison asks. With 1 or 2
    seeds there is nothing to resample (2 seeds give 3 distinct bootstrap resamples,
    and the percentile interval is their range), so the episodes of those runs are the
    unit instead: their interval describes episode-to-episode variation of the seeds at
    hand, not seed-to-seed variation, and is narrower than a seed interval would be.
    Tables and figures name the unit so a reader knows which of the two they read.
    """
    return "seed" if n_seeds >= MIN_SEEDS else "episode"


def runs_by_tasks(scores: np.ndarray | Sequence[float]) -> np.ndarray:
    """``scores`` as a float ``runs x tasks`` array: a 1-d array is one task.

    Runs (rows) with a non-finite score on any task are dropped: the stratified
    bootstrap needs the same runs on every task, and a NaN is a run that did not finish.
    """
    arr = np.asarray(scores, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"scores must be 1-d (runs) or 2-d (runs x tasks), not {arr.shape}")
    return arr[np.isfinite(arr).all(axis=1)]


def iqm(scores: np.ndarray | Sequence[float]) -> float:
    """Interquartile mean over all entries: the mean of the middle half (25 % trimmed).

    The same as rliable's ``metrics.aggregate_iqm``
    (``scipy.stats.trim_mean(scores, 0.25, axis=None)``).
    """
    from scipy import stats

    arr = np.asarray(scores, dtype=float)
    if arr.size == 0:
        return float("nan")
    return float(stats.trim_mean(arr, 0.25, axis=None))


def _iqm_batch(resamples: np.ndarray) -> np.ndarray:
    from scipy import stats

    return np.asarray(stats.trim_mean(resamples.reshape(len(resamples), -1), 0.25, axis=1))


def _mean_batch(resamples: np.ndarray) -> np.ndarray:
    return resamples.reshape(len(resamples), -1).mean(axis=1)


def _median_batch(resamples: np.ndarray) -> np.ndarray:
    return np.median(resamples.reshape(len(resamples), -1), axis=1)


# The statistics the report uses, computed over a whole chunk of resamples at once
# (a Python call per resample would cost more than the resampling).
_BATCHED: dict[object, Callable[[np.ndarray], np.ndarray]] = {
    iqm: _iqm_batch,
    np.mean: _mean_batch,
    np.median: _median_batch,
}


def _rng(seed: int) -> np.random.RandomState:
    # RandomState rather than default_rng: its stream is frozen (NEP 19), and it is the
    # stream rliable draws from, so a seed gives rliable's interval exactly.
    return np.random.RandomState(seed % 2**32)


def _index_chunks(
    rng: np.random.RandomState, shapes: Sequence[tuple[int, int]], reps: int
) -> Iterator[list[np.ndarray]]:
    """Bootstrap row indices, per score array a ``(chunk, runs, tasks)`` array.

    Each resample draws one ``runs x tasks`` array of row indices per score array, in
    order (rliable's ``np.random.choice(runs, (runs, tasks))`` in ``update_indices``):
    every task gets its own resample of the runs, the stratification.
    """
    per_rep = sum(r * t for r, t in shapes)
    chunk = max(1, CHUNK_SCORES // max(1, per_rep))
    done = 0
    while done < reps:
        size = min(chunk, reps - done)
        out = [np.empty((size, r, t), dtype=np.int64) for r, t in shapes]
        for i in range(size):
            for arr, (r, t) in zip(out, shapes, strict=True):
                arr[i] = rng.randint(0, r, size=(r, t))
        done += size
        yield out


def _take(scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Resampled scores ``(chunk, runs, tasks)``: row ``rows[k, i, j]`` of task ``j``."""
    return scores[rows, np.arange(scores.shape[1])]


def _percentiles(distribution: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    # arch's conf_int(method="percentile"), which rliable calls: np.percentile, linear.
    alpha = (1 - level) / 2
    low, high = np.percentile(distribution, [100 * alpha, 100 * (1 - alpha)], axis=0)
    return np.asarray(low, dtype=float), np.asarray(high, dtype=float)


def bootstrap_distribution(
    scores: np.ndarray, statistic: Statistic = iqm, reps: int = REPS, seed: int = 0
) -> np.ndarray:
    """``reps`` values of ``statistic`` on stratified resamples of ``scores`` (runs x tasks).

    ``statistic`` takes one ``runs x tasks`` array and returns a number (or a 1-d
    array); the result has one row per resample.
    """
    arr = runs_by_tasks(scores)
    batched = _BATCHED.get(statistic)
    parts = []
    for (rows,) in _index_chunks(_rng(seed), [arr.shape], reps):
        resamples = _take(arr, rows)
        if batched is not None:
            parts.append(batched(resamples))
        else:
            parts.append(np.array([np.asarray(statistic(r), dtype=float) for r in resamples]))
    return np.concatenate(parts, axis=0)


def stratified_bootstrap_ci(
    scores: np.ndarray | Sequence[float],
    statistic: Statistic = iqm,
    reps: int = REPS,
    seed: int = 0,
    level: float = LEVEL,
    unit: str = "seed",
) -> ReturnEstimate:
    """``statistic`` of ``scores`` (runs x tasks, or 1-d: one task) with its stratified
    percentile-bootstrap interval.

    Runs are resampled with replacement within each task, ``reps`` times, and the
    interval is the ``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles of the
    statistic over the resamples: rliable's ``get_interval_estimates`` with its default
    ``method="percentile"``. The same ``seed`` gives the same interval, and the interval
    rliable gives after ``np.random.seed(seed)``. Fewer than 2 runs: no interval (NaN).
    """
    arr = runs_by_tasks(scores)
    n, tasks = arr.shape
    if n == 0:
        return ReturnEstimate(np.nan, np.nan, np.nan, 0, unit, tasks)
    value = float(np.asarray(statistic(arr), dtype=float))
    if n < 2:
        return ReturnEstimate(value, np.nan, np.nan, n, unit, tasks)
    low, high = _percentiles(bootstrap_distribution(arr, statistic, reps, seed), level)
    return ReturnEstimate(value, float(low), float(high), n, unit, tasks)


def _counts(rows: np.ndarray, n: int) -> np.ndarray:
    """How often each of ``n`` runs appears in each resample: ``(chunk, n)`` from
    ``(chunk, n)`` row indices."""
    offsets = rows + n * np.arange(len(rows))[:, None]
    return np.bincount(offsets.ravel(), minlength=len(rows) * n).reshape(len(rows), n)


def _improvement_weighted(
    x: np.ndarray, y: np.ndarray, wx: np.ndarray, wy: np.ndarray
) -> np.ndarray:
    """P(X > Y) of one task for resamples given as run multiplicities ``wx``, ``wy``.

    A resample of ``x`` holds run ``i`` ``wx[k, i]`` times, so its Mann-Whitney U
    against a resample of ``y`` is ``sum_j wy[k, j] * (sum of wx[k, i] over x_i > y_j,
    plus half of it over x_i = y_j)``: with ``x`` sorted once, the inner sums are
    differences of cumulative weights at ``y_j``'s sorted positions. That is the
    statistic ``scipy.stats.mannwhitneyu(x, y).statistic`` computes from ranks, in
    O(n + m) per resample instead of a sort.
    """
    n, m = len(x), len(y)
    order = np.argsort(x, kind="stable")
    left = np.searchsorted(x[order], y, side="left")
    right = np.searchsorted(x[order], y, side="right")
    cum = np.zeros((len(wx), n + 1))
    np.cumsum(wx[:, order], axis=1, out=cum[:, 1:])
    greater = cum[:, -1:] - cum[:, right]
    equal = cum[:, right] - cum[:, left]
    return np.asarray(((greater + 0.5 * equal) * wy).sum(axis=1) / (n * m))


def _improvement_batch(
    x: np.ndarray, y: np.ndarray, rx: np.ndarray | None = None, ry: np.ndarray | None = None
) -> np.ndarray:
    """P(X > Y) averaged over tasks: of ``x`` and ``y`` themselves (``rx``, ``ry`` None, a
    1-element result) or of the resamples ``rx``, ``ry`` (row indices, ``(chunk, runs,
    tasks)``)."""
    (n, tasks), m = x.shape, len(y)
    per_task = []
    for t in range(tasks):
        wx = np.ones((1, n)) if rx is None else _counts(rx[:, :, t], n)
        wy = np.ones((1, m)) if ry is None else _counts(ry[:, :, t], m)
        per_task.append(_improvement_weighted(x[:, t], y[:, t], wx, wy))
    return np.mean(per_task, axis=0)


def improvement(x: np.ndarray | Sequence[float], y: np.ndarray | Sequence[float]) -> float:
    """P(X > Y) averaged over tasks (rliable's ``metrics.probability_of_improvement``)."""
    xs, ys = runs_by_tasks(x), runs_by_tasks(y)
    _same_tasks(xs, ys)
    return float(_improvement_batch(xs, ys)[0])


def _same_tasks(x: np.ndarray, y: np.ndarray) -> None:
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"scores of {x.shape[1]} and {y.shape[1]} tasks cannot be compared")


def probability_of_improvement(
    x: np.ndarray | Sequence[float],
    y: np.ndarray | Sequence[float],
    reps: int = REPS,
    seed: int = 0,
    level: float = LEVEL,
) -> tuple[float, float, float]:
    """P(X > Y) averaged over tasks, with its stratified bootstrap interval: ``(p, low, high)``.

    ``x`` and ``y`` are ``runs x tasks`` (or 1-d, one task), their run counts may
    differ. Per task, P(X > Y) is the Mann-Whitney U statistic of ``x`` over ``n * m``:
    the fraction of (run of X, run of Y) pairs where X scores higher, a tie counting
    one half, so identical groups give 0.5 and fully separated ones 1.0 or 0.0. The
    interval resamples the runs of ``x`` and ``y`` independently within each task
    (rliable's ``StratifiedIndependentBootstrap``, as ``get_interval_estimates`` does
    for a pair of arrays). Fewer than 2 runs in either: no interval (NaN).
    """
    xs, ys = runs_by_tasks(x), runs_by_tasks(y)
    _same_tasks(xs, ys)
    if len(xs) == 0 or len(ys) == 0:
        return float("nan"), float("nan"), float("nan")
    p = float(_improvement_batch(xs, ys)[0])
    if min(len(xs), len(ys)) < 2:
        return p, float("nan"), float("nan")
    parts = [
        _improvement_batch(xs, ys, rx, ry)
        for rx, ry in _index_chunks(_rng(seed), [xs.shape, ys.shape], reps)
    ]
    low, high = _percentiles(np.concatenate(parts), level)
    return p, float(low), float(high)


def _profile_batch(resamples: np.ndarray, taus: np.ndarray) -> np.ndarray:
    flat = resamples.reshape(len(resamples), -1)
    return np.stack([(flat > tau).mean(axis=1) for tau in taus], axis=1)


def performance_profile(
    scores: np.ndarray | Sequence[float],
    taus: np.ndarray | Sequence[float],
    reps: int = REPS,
    seed: int = 0,
    level: float = LEVEL,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fraction of runs (over all tasks) scoring above each tau, with a bootstrap band.

    Returns ``(fraction, low, high)``, one entry per tau: rliable's
    ``create_performance_profile`` with ``use_score_distribution=True`` (the run-score
    distribution, not the "average" one), its band the percentile interval of the
    stratified bootstrap at each tau. Fewer than 2 runs: the band is NaN.
    """
    arr = runs_by_tasks(scores)
    tau = np.atleast_1d(np.asarray(taus, dtype=float))
    if len(arr) == 0:
        nan = np.full(tau.shape, np.nan)
        return nan, nan.copy(), nan.copy()
    fraction = _profile_batch(arr[None], tau)[0]
    if len(arr) < 2:
        return fraction, np.full(tau.shape, np.nan), np.full(tau.shape, np.nan)
    parts = [
        _profile_batch(_take(arr, rows), tau)
        for (rows,) in _index_chunks(_rng(seed), [arr.shape], reps)
    ]
    low, high = _percentiles(np.concatenate(parts), level)
    return fraction, low, high


def group_seed(seed: int, *labels: str) -> int:
    """A seed per group (or pair of groups) derived from their labels.

    Each group gets its own stream, so adding or removing a group leaves the others'
    intervals as they were, and two groups are never resampled with the same indices.
    """
    return zlib.crc32("\x1f".join(labels).encode()) ^ (seed % 2**32)


COMPARE_COLUMNS = [
    "label",
    "n",
    "unit",
    "tasks",
    "mean",
    "iqm",
    "iqm_low",
    "iqm_high",
    "median",
    "reference",
    "p_improvement",
    "p_improvement_low",
    "p_improvement_high",
]


def compare_returns(
    groups: Mapping[str, np.ndarray | Sequence[float]],
    unit: str,
    reference: str | None = None,
    reps: int = REPS,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per group: its returns' IQM with 95 % interval and P(improvement).

    ``groups`` maps a label (a configuration, variant, algorithm, trial) to its scores:
    1-d (one score per seed or per episode, as ``unit`` says: :func:`unit_of`) or 2-d
    (runs x tasks; every group the same tasks). Columns: ``label``, ``n`` (runs),
    ``unit``, ``tasks``, ``mean``, ``iqm`` with ``iqm_low`` / ``iqm_high``, ``median``,
    ``reference`` and ``p_improvement`` (P(group > reference), see
    :func:`probability_of_improvement`) with its interval. ``reference`` defaults to the
    first group, whose own P(improvement) columns are NaN. Every group and pair has its
    own seed (:func:`group_seed`), so the table is reproducible for ``seed``.
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, not {unit!r}")
    if not groups:
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    arrays = {str(label): runs_by_tasks(s) for label, s in groups.items()}
    ref = next(iter(arrays)) if reference is None else reference
    if ref not in arrays:
        raise ValueError(f"reference {ref!r} is not one of the groups {sorted(arrays)}")
    rows = []
    for label, arr in arrays.items():
        est = stratified_bootstrap_ci(arr, iqm, reps, group_seed(seed, label), unit=unit)
        if label == ref:
            p = low = high = float("nan")
        else:
            p, low, high = probability_of_improvement(
                arr, arrays[ref], reps, group_seed(seed, label, ref)
            )
        empty = arr.size == 0
        rows.append(
            {
                "label": label,
                "n": est.n,
                "unit": unit,
                "tasks": arr.shape[1],
                "mean": float("nan") if empty else float(arr.mean()),
                "iqm": est.value,
                "iqm_low": est.low,
                "iqm_high": est.high,
                "median": float("nan") if empty else float(np.median(arr)),
                "reference": ref,
                "p_improvement": p,
                "p_improvement_low": low,
                "p_improvement_high": high,
            }
        )
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS)
