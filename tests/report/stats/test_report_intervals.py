"""The report's intervals at their edges (rlperf.report.stats.estimates): too few samples, constant
samples, rows that do not count, the resampling's seed and the tie rule's boundaries
(found by mutation testing, docs/development.md#mutation-testing; the levels and widths
are in test_report_stats.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlperf.report.stats import estimates
from rlperf.report.stats.estimates import Estimate

NAN = float("nan")


def _nan(e: Estimate) -> tuple[bool, bool, bool]:
    return math.isnan(e.value), math.isnan(e.low), math.isnan(e.high)


def test_a_bootstrap_of_too_few_or_equal_samples() -> None:
    empty = estimates.bootstrap_ci([NAN, math.inf, -math.inf])
    assert _nan(empty) == (True, True, True) and empty.n == 0 and not empty.has_ci
    one = estimates.bootstrap_ci([NAN, 2.5])
    assert one.value == 2.5 and _nan(one)[1:] == (True, True) and one.n == 1
    assert one.distribution is None
    same = estimates.bootstrap_ci([4.0, 4.0, NAN, 4.0], "median")
    assert (same.value, same.low, same.high, same.n) == (4.0, 4.0, 4.0, 3)
    assert same.distribution is not None and same.distribution.tolist() == [4.0] * 1000
    assert same.has_ci and not same.across_runs


def test_the_bootstrap_is_seeded_by_the_cell() -> None:
    x = np.random.default_rng(1).exponential(1.0, 200)
    a, b = (
        estimates.bootstrap_ci(x, "median", key="cell-a"),
        estimates.bootstrap_ci(x, "median", "cell-a"),
    )
    assert (a.low, a.high) == (b.low, b.high)
    other = estimates.bootstrap_ci(x, "median", key="cell-b")
    assert (a.low, a.high) != (other.low, other.high)
    assert a.value == float(np.median(x)) and a.low < a.value < a.high
    mean = estimates.bootstrap_ci(x, "mean", key="cell-a")
    assert mean.value == pytest.approx(float(x.mean())) and mean.n == 200


def test_a_ratio_leaves_out_rows_without_time_or_work() -> None:
    t = [2.0, NAN, 3.0, 1.0, 4.0, math.inf]
    w = [1000.0, 1000.0, 0.0, -5.0, 3000.0, 1000.0]
    e = estimates.bootstrap_ratio_ci(t, w, 1000, "r")
    assert e.value == pytest.approx(1000 * 6.0 / 4000) and e.n == 2
    assert e.low < e.value < e.high and len(e.distribution) == 1000
    # The interval is the resampled totals' 2.5 / 97.5 percentiles: both rows' own ratios
    # (2 and 1.33 s per 1 000) bound it.
    assert e.low >= 1000 * 4.0 / 3000 and e.high <= 2.0
    none = estimates.bootstrap_ratio_ci([NAN], [1.0], 1000)
    assert _nan(none) == (True, True, True) and none.n == 0
    one = estimates.bootstrap_ratio_ci([2.0, 1.0], [500.0, 0.0], 1000)
    assert one.value == 4.0 and _nan(one)[1:] == (True, True) and one.n == 1
    constant = estimates.bootstrap_ratio_ci([1.0, 2.0], [10.0, 20.0], 10.0)
    assert (constant.value, constant.low, constant.high) == (1.0, 1.0, 1.0)
    assert constant.distribution is not None and set(constant.distribution) == {1.0}


def test_a_ratio_over_many_rows_is_seeded_and_subsampled() -> None:
    rng = np.random.default_rng(2)
    t = rng.normal(2.0, 0.2, estimates.MAX_SAMPLES + 5000)
    w = np.full(t.size, 1000.0)
    a = estimates.bootstrap_ratio_ci(t, w, 1000, "big")
    assert a.n == t.size and a.value == pytest.approx(t.mean())
    b = estimates.bootstrap_ratio_ci(t, w, 1000, "big")
    assert (a.low, a.high) == (b.low, b.high)
    # A subset of 20 000 rows: the width of 20 000, not of 25 000 (1.96 x 2 x sd / sqrt(n)).
    width = (a.high - a.low) / (2 * 1.96 * 0.2)
    assert width * np.sqrt(estimates.MAX_SAMPLES) == pytest.approx(1.0, abs=0.1)
    other = estimates.bootstrap_ratio_ci(t[:3000], w[:3000], 1000, "a")
    again = estimates.bootstrap_ratio_ci(t[:3000], w[:3000], 1000, "b")
    assert (other.low, other.high) != (again.low, again.high)


def test_a_rate_maps_the_interval_and_its_draws() -> None:
    e = Estimate(2.0, 1.0, 4.0, 7, np.array([1.0, 2.0, 4.0]), runs=3)
    rate = estimates.reciprocal(e, 10.0)
    assert (rate.value, rate.low, rate.high, rate.n, rate.runs) == (5.0, 2.5, 10.0, 7, 3)
    assert rate.distribution.tolist() == [10.0, 5.0, 2.5]
    assert estimates.reciprocal(e).value == 0.5
    for bad in (Estimate(0.0, 0.0, 1.0, 3), Estimate(-1.0, -2.0, 1.0, 3), Estimate(NAN, 1, 2, 3)):
        out = estimates.reciprocal(bad)
        assert _nan(out) == (True, True, True) and out.n == 3
    no_ci = estimates.reciprocal(Estimate(2.0, NAN, NAN, 1))
    assert no_ci.value == 0.5 and _nan(no_ci)[1:] == (True, True) and no_ci.distribution is None
    touching = estimates.reciprocal(Estimate(2.0, 0.0, 4.0, 5))
    assert (touching.low, math.isnan(touching.high)) == (0.25, True)


def test_run_to_run_estimates_of_few_or_unusable_runs() -> None:
    nothing = estimates.across_runs([0.0, -1.0, NAN])
    assert _nan(nothing) == (True, True, True) and nothing.n == 0
    one = estimates.across_runs([0.0, 3.0])
    assert (one.value, one.n, one.runs) == (3.0, 1, 1) and not one.has_ci
    draws = estimates.across_runs([2.0, 8.0], key="k").distribution
    assert draws is not None and len(draws) == 1000
    assert estimates.across_runs([2.0, 8.0], key="k").distribution.tolist() == draws.tolist()
    assert estimates.across_runs([2.0, 8.0], key="j").distribution.tolist() != draws.tolist()
    assert sorted(draws) == sorted(estimates.across_runs([2.0, 8.0], key="j").distribution)
    assert np.median(draws) == pytest.approx(4.0, rel=0.01)  # the geometric mean


def test_a_speedup_without_draws_or_values() -> None:
    a, b = Estimate(6.0, 5.0, 7.0, 10), Estimate(2.0, 1.0, 3.0, 4)
    sp = estimates.speedup(a, b)
    assert (sp.value, sp.n) == (3.0, 4) and _nan(sp)[1:] == (True, True)
    assert _nan(estimates.speedup(Estimate(NAN, NAN, NAN, 0), b)) == (True, True, True)
    assert _nan(estimates.speedup(a, Estimate(NAN, NAN, NAN, 0))) == (True, True, True)
    with_draws = estimates.speedup(
        Estimate(6.0, 5, 7, 3, np.array([4.0, 6.0, 8.0] * 10)),
        Estimate(2.0, 1, 3, 5, np.array([2.0] * 30)),
    )
    assert with_draws.value == 3.0 and with_draws.n == 3
    assert with_draws.low == pytest.approx(2.0) and with_draws.high == pytest.approx(4.0)
    assert with_draws.distribution.tolist() == [2.0, 3.0, 4.0] * 10


def test_ranks_tie_where_intervals_overlap_even_at_a_bound() -> None:
    est = {
        "a": Estimate(1.0, 0.5, 1.5, 5),
        "b": Estimate(2.0, 1.5, 2.5, 5),  # touches a's bound: tied with a
        "c": Estimate(3.0, 2.6, 3.4, 5),  # strictly above a and b
        "d": Estimate(2.55, NAN, NAN, 1),  # no interval: its point, above a and b
        "e": Estimate(NAN, NAN, NAN, 0),  # not ranked
    }
    assert estimates.rank_with_ties(est) == {"a": 1, "b": 1, "c": 4, "d": 3}
    assert estimates.rank_with_ties(est, lower_is_better=False) == {"a": 3, "b": 3, "c": 1, "d": 2}
    assert estimates.tied(est["a"], est["b"]) and estimates.tied(est["b"], est["a"])
    assert not estimates.tied(est["a"], est["c"]) and not estimates.tied(est["c"], est["b"])
    assert estimates.tied(est["d"], Estimate(2.55, NAN, NAN, 1))
    assert not estimates.tied(est["d"], est["b"]) and not estimates.tied(est["d"], est["c"])
    assert estimates.tied(est["d"], Estimate(2.0, 1.5, 2.55, 5))


def test_every_interval_is_the_central_95_percent_of_its_draws() -> None:
    x = np.random.default_rng(4).gamma(2.0, 1.0, 5000)
    ratio = estimates.bootstrap_ratio_ci(x, np.full(x.size, 10.0), 1.0, "draws")
    assert len(ratio.distribution) == estimates.N_RESAMPLES  # in batches: 5 000 rows each
    assert (ratio.low, ratio.high) == pytest.approx(np.percentile(ratio.distribution, [2.5, 97.5]))
    base = Estimate(500.5, 1, 1000, 10, np.arange(1.0, 1001.0))
    sp = estimates.speedup(base, Estimate(1.0, 1, 1, 10, np.ones(1000)))
    assert (sp.low, sp.high) == pytest.approx((25.975, 975.025))


def test_values_below_one_are_values() -> None:
    runs = estimates.across_runs([0.5, 0.8])
    assert runs.n == 2 and runs.value == pytest.approx(np.sqrt(0.4))
    ratio = estimates.bootstrap_ratio_ci([1.0, 1.0, 2.0], [0.5, 1.0, 0.25], 1.0)
    assert ratio.n == 3 and ratio.value == pytest.approx(4.0 / 1.75)
    rate = estimates.reciprocal(Estimate(0.5, 0.25, 0.8, 4))
    assert (rate.value, rate.low, rate.high) == pytest.approx((2.0, 1.25, 4.0))


def test_missing_values_and_exact_shortcuts() -> None:
    missing = estimates.bootstrap_ratio_ci([1.0, None, 2.0], [1.0, 1.0, None], 1.0)
    assert (missing.value, missing.n) == (1.0, 1)
    # Per-row ratios 1 and 2 differ by exactly 1: a real interval, not the constant one.
    spread = estimates.bootstrap_ratio_ci([1.0, 2.0], [1.0, 1.0], 1.0, "s")
    assert spread.low < spread.high
    constant = estimates.bootstrap_ratio_ci([1.0, 2.0], [10.0, 20.0], 10.0)
    assert constant.n == 2
    same = estimates.across_runs([2.0] * 5)
    assert (same.value, same.low, same.high, same.n, same.runs) == (2.0, 2.0, 2.0, 5, 5)
    assert same.distribution is not None and same.distribution.tolist() == [2.0] * 1000
    one = estimates.across_runs([4.2])
    assert math.isnan(one.low) and math.isnan(one.high)


def test_rates_and_speedups_keep_their_counts() -> None:
    bad = Estimate(NAN, NAN, NAN, 6, runs=3)
    assert (estimates.reciprocal(bad).n, estimates.reciprocal(bad).runs) == (6, 3)
    assert estimates.speedup(bad, Estimate(1.0, 1, 1, 4)).n == 4
    half = estimates.speedup(Estimate(4.0, 3, 5, 8, np.array([4.0, 5.0])), Estimate(2.0, 1, 3, 8))
    assert half.value == 2.0 and not half.has_ci and half.distribution is None


def test_a_within_run_interval_is_the_percentile_interval_of_its_draws() -> None:
    x = np.random.default_rng(6).exponential(1.0, 300)
    est = estimates.bootstrap_ci(x, key="pct")
    assert (est.low, est.high) == pytest.approx(np.percentile(est.distribution, [2.5, 97.5]))
    two = estimates.bootstrap_ci([1.0, 2.0], key="two")  # two samples are enough for an interval
    assert two.has_ci and two.low < two.high
    spread = estimates.bootstrap_ci([1.0, 2.0, 1.5], key="s")  # a range of exactly 1
    assert spread.low < spread.high
    missing = estimates.bootstrap_ci([1.0, None, 2.0, 3.0], key="m")
    assert (missing.n, missing.value) == (3, 2.0)
