"""The engine's intervals against analytic references, and its rules for degenerate input
(rlperf.stats.intervals; docs/report.md#statistics).

Each reference is computed here from scipy-independent literals, so a change of the level,
the batch rule, the degrees of freedom or the log scale shows as a failure.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlperf.stats import intervals
from rlperf.stats.intervals import Estimate

NAN = float("nan")
#: Two-sided 97.5 % quantiles of Student's t (literals).
T_975 = {1: 12.706204736174704, 2: 4.302652729749464, 3: 3.182446305284263,
         4: 2.7764451051977987}  # fmt: skip


def _nan(e: Estimate) -> tuple[bool, bool, bool]:
    return math.isnan(e.value), math.isnan(e.low), math.isnan(e.high)


def test_batches_are_about_the_cube_root_of_n_and_drop_the_first_values() -> None:
    assert [intervals.batch_count(n) for n in (2, 8, 27, 100, 1000)] == [2, 2, 3, 5, 10]
    x = np.arange(11.0)  # 2 batches of 5: the first value (0) is left over
    assert intervals.batch_means(x).tolist() == [3.0, 8.0]
    assert intervals.batch_means(np.arange(4.0), count=2).tolist() == [0.5, 2.5]
    with pytest.raises(ValueError, match="at least 2"):
        intervals.batches([1.0])


def test_a_within_run_interval_is_students_t_over_its_batch_statistics() -> None:
    x = np.random.default_rng(7).normal(10.0, 2.0, 27)  # 3 batches of 9
    e = intervals.within_run(x)
    means = x.reshape(3, 9).mean(axis=1)
    half = T_975[2] * means.std(ddof=1) / math.sqrt(3)
    assert e.value == pytest.approx(x.mean()) and (e.n, e.runs, e.df) == (27, 1, 2)
    # On the log scale: value * exp(± t se / value), positive however wide.
    rel = half / x.mean()
    assert (e.low, e.high) == pytest.approx((x.mean() * math.exp(-rel), x.mean() * math.exp(rel)))
    assert e.log_se == pytest.approx(means.std(ddof=1) / math.sqrt(3) / x.mean())
    assert e.one_run and not e.across_runs
    medians = intervals.within_run(x, "median")
    assert medians.value == pytest.approx(np.median(x))
    spread = np.median(x.reshape(3, 9), axis=1).std(ddof=1) / math.sqrt(3)
    assert math.log(medians.high / medians.value) == pytest.approx(T_975[2] * spread / np.median(x))


def test_a_time_per_work_is_a_ratio_of_sums_with_batch_ratios() -> None:
    """The study's 16-worker cell sampled 6 400 env steps per "4 000-step" iteration: the
    time per 1 000 env steps is total time over total env steps (SPEC §5)."""
    t = [1.0, 3.0, 2.0, 2.0, NAN, 5.0]
    w = [1000.0, 9000.0, 1000.0, 3000.0, 1000.0, 0.0]  # the last two rows do not count
    e = intervals.within_run_ratio(t, w, 1000.0)
    assert e.value == pytest.approx(1000 * 8.0 / 14000) and e.n == 4
    per_batch = np.array([1000 * 4.0 / 10000, 1000 * 4.0 / 4000])
    half = T_975[1] * per_batch.std(ddof=1) / math.sqrt(2)
    assert math.log(e.high / e.value) == pytest.approx(half / e.value)
    assert e.low > 0  # two batches, t(1) = 12.7: the additive interval would reach below 0
    none = intervals.within_run_ratio([NAN], [1.0], 1000)
    assert _nan(none) == (True, True, True) and none.n == 0
    one = intervals.within_run_ratio([2.0, 1.0], [500.0, 0.0], 1000)
    assert one.value == 4.0 and _nan(one)[1:] == (True, True) and one.n == 1


@pytest.mark.parametrize("n", [2, 3, 5])
def test_run_to_run_is_students_t_on_the_logarithms(n: int) -> None:
    values = np.array([6.0, 7.8, 6.5, 7.1, 6.9][:n])
    e = intervals.across_runs(values)
    logs = np.log(values)
    se = logs.std(ddof=1) / math.sqrt(n)
    half = T_975[n - 1] * se
    assert (e.runs, e.n, e.df) == (n, n, n - 1) and e.across_runs and not e.one_run
    assert e.value == pytest.approx(math.exp(logs.mean())) and e.log_se == pytest.approx(se)
    assert (e.low, e.high) == pytest.approx((math.exp(logs.mean() - half),
                                             math.exp(logs.mean() + half)))  # fmt: skip
    wider = intervals.across_runs(values, confidence=0.9875)
    assert wider.low < e.low and wider.high > e.high and wider.confidence == 0.9875


def test_a_speedup_across_runs_is_welch_on_the_logarithms() -> None:
    a, b = [6.0, 7.8, 6.5], [3.0, 3.3, 2.9, 3.1]
    sp = intervals.speedup(intervals.across_runs(a), intervals.across_runs(b))
    la, lb = np.log(a), np.log(b)
    va, vb = la.var(ddof=1) / 3, lb.var(ddof=1) / 4
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 3)
    from scipy import stats

    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    diff = la.mean() - lb.mean()
    assert sp.value == pytest.approx(math.exp(diff)) and sp.df == pytest.approx(df)
    assert (sp.low, sp.high) == pytest.approx((math.exp(diff - half), math.exp(diff + half)))
    assert sp.runs == 3 and sp.across_runs


def test_the_five_and_five_example_agrees_with_itself() -> None:
    """The issue's pair at the design's level 0.9875: the speedup interval includes 1
    exactly where the verdict is "not separated"; at 95 % both say separated."""
    x = [1.0063, 0.9934, 1.0325, 1.0053, 0.9736]
    y = [1.0921, 1.1448, 1.1245, 1.0354, 1.0068]
    for level in (0.9875, 0.95):
        fast, slow = intervals.across_runs(x, level), intervals.across_runs(y, level)
        sp = intervals.speedup(slow, fast)
        assert sp.confidence == level
        assert intervals.separated(fast, slow) == (sp.low > 1.0)
    at_design = intervals.speedup(
        intervals.across_runs(y, 0.9875), intervals.across_runs(x, 0.9875)
    )
    assert at_design.low < 1.0 < at_design.high


def test_within_run_intervals_never_separate() -> None:
    fast = intervals.within_run(np.linspace(1.0, 1.01, 50))
    slow = intervals.within_run(np.linspace(2.0, 2.01, 50))
    assert fast.has_ci and slow.has_ci and fast.high < slow.low
    assert not intervals.separated(fast, slow)
    assert intervals.runs_to_separate(fast, slow) is None


def test_degenerate_values_by_rule() -> None:
    # Zero, negative and non-finite values are not values.
    nothing = intervals.across_runs([0.0, -1.0, NAN, math.inf])
    assert _nan(nothing) == (True, True, True) and nothing.n == 0
    one = intervals.across_runs([0.0, 3.0])
    assert (one.value, one.n, one.runs, one.has_ci) == (3.0, 1, 1, False)
    assert intervals.across_runs([NAN, 2.0, 2.2]).runs == 2
    # Runs that agree to the last digit measure no spread: no interval, nothing separated.
    same = intervals.across_runs([2.0, 2.0])
    assert same.runs == 2 and not same.has_ci and same.value == pytest.approx(2.0)
    other = intervals.across_runs([1.0, 1.0])
    assert not intervals.separated(same, other)
    assert intervals.runs_to_separate(same, other) is None
    lo, hi = intervals.welch_difference([1.0, 1.0], [2.0, 2.0], 0.05)
    assert math.isnan(lo) and math.isnan(hi)
    assert not intervals.t_interval([3.0, 3.0, 3.0], 0.05).within(0.5)
    # A lower bound never separates a configuration slower than it.
    bound = intervals.across_runs([1.0, 1.01, 0.99], bound=True)
    slow = intervals.across_runs([2.0, 2.02, 1.98])
    assert bound.bound and not intervals.separated(bound, slow)
    # ... but a configuration whose lower bounds are already slower is slower.
    assert intervals.separated(intervals.across_runs([1.0, 1.01, 0.99]),
                               intervals.across_runs([2.0, 2.02, 1.98], bound=True))  # fmt: skip


def test_a_rate_maps_the_interval_and_keeps_its_log_error() -> None:
    e = Estimate(2.0, 1.0, 4.0, 7, 3, log_se=0.1, df=2)
    rate = intervals.reciprocal(e, 10.0)
    assert (rate.value, rate.low, rate.high, rate.n, rate.runs) == (5.0, 2.5, 10.0, 7, 3)
    assert (rate.log_se, rate.df) == (0.1, 2)
    for bad in (Estimate(0.0, 0.0, 1.0, 3), Estimate(-1.0, -2.0, 1.0, 3), Estimate(NAN, 1, 2, 3)):
        out = intervals.reciprocal(bad)
        assert _nan(out) == (True, True, True) and out.n == 3
    touching = intervals.reciprocal(Estimate(2.0, 0.0, 4.0, 5))
    assert (touching.low, math.isnan(touching.high)) == (0.25, True)
    frames = Estimate(2.0, 1.0, 4.0, 7, 3, 0.1, 2).scaled(4.0)
    assert (frames.value, frames.low, frames.high, frames.log_se) == (8.0, 4.0, 16.0, 0.1)


def test_a_speedup_without_an_interval_on_either_side() -> None:
    a, b = Estimate(6.0, NAN, NAN, 1), intervals.across_runs([2.0, 2.2])
    sp = intervals.speedup(a, b)
    assert sp.value == pytest.approx(6.0 / math.sqrt(4.4)) and sp.n == 1
    assert _nan(sp)[1:] == (True, True)
    assert _nan(intervals.speedup(Estimate(NAN, NAN, NAN, 0), b)) == (True, True, True)


def test_runs_to_separate_for_80_percent_power_at_the_tests_level() -> None:
    """5 % apart with a 5 % spread: n = 2 (t(0.975) + t(0.8))² ≈ 2 (1.96 + 0.84)² ≈ 16 per
    configuration at 80 % power (8 at 50 %, what plugging in t alone gives); 2 % apart, some
    6 times as many; a higher level needs more."""
    rng = np.random.default_rng(7)
    logs = rng.normal(0.0, 1.0, 4)
    a = np.exp((logs - logs.mean()) / logs.std(ddof=1) * 0.05)
    base = intervals.across_runs(a)
    near = intervals.runs_to_separate(base, intervals.across_runs(a * 1.05))
    assert near is not None and 15 <= near <= 20
    far = intervals.runs_to_separate(base, intervals.across_runs(a * 1.02))
    assert far is not None and far > 4 * near
    stricter = intervals.runs_to_separate(intervals.across_runs(a, 0.9875),
                                          intervals.across_runs(a * 1.05, 0.9875))  # fmt: skip
    assert stricter is not None and stricter > near
    worth = intervals.runs_to_separate(base, intervals.across_runs(a * 1.05), difference=0.10)
    assert worth is not None and worth < near
    assert intervals.runs_to_separate(base, base) is None


def test_the_interval_a_run_stopped_on_keeps_its_level() -> None:
    e = intervals.recorded(2.0, 1.9, 2.1, 40, 0.99, 4)
    assert (e.value, e.low, e.high, e.confidence, e.df) == (2.0, 1.9, 2.1, 0.99, 4)
    from scipy import stats

    assert e.log_se == pytest.approx(0.1 / stats.t.ppf(0.995, 4) / 2.0)
    assert not intervals.recorded(2.0, 2.0, 2.0, 40, 0.99, 4).has_ci
