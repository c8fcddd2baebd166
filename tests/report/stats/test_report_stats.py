"""The report's intervals have the documented level (95 %), and its other constants that
change results are pinned (docs/report.md, "Statistics and findings").

Each test compares against an analytic reference computed here, so a change of
``CONFIDENCE`` (to 90 %: the bootstrap's width shrinks to 0.84 of the 95 %
width; the run-to-run interval covers 90 %), of the statistics or of the
resampling shows as a failure.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlperf.report.stats import estimates
from rlperf.report.stats.objectives import OBJECTIVES

#: Two-sided 97.5 % quantiles (scipy-independent literals).
Z_975 = 1.959963984540054
T_975 = {1: 12.706204736174704, 2: 4.302652729749464, 4: 2.7764451051977987}


def test_within_run_interval_has_the_95_percent_width():
    """On a large normal sample the percentile bootstrap of the mean matches the analytic
    95 % interval mean ± z·s/sqrt(n) (a 90 % level would give 0.84 of its width)."""
    x = np.random.default_rng(7).normal(10.0, 2.0, 4000)
    est = estimates.bootstrap_ci(x, "mean", key="level")
    analytic = 2 * Z_975 * x.std(ddof=1) / np.sqrt(x.size)
    assert est.value == pytest.approx(x.mean())
    assert (est.high - est.low) / analytic == pytest.approx(1.0, abs=0.06)
    assert est.low < x.mean() < est.high
    assert est.distribution is not None and len(est.distribution) == estimates.N_RESAMPLES == 1000


def test_above_max_samples_a_subset_is_resampled():
    """docs/report.md: above 20,000 samples the bootstrap resamples a random subset of
    20,000 (a wider, conservative interval): 50,000 samples get the width of 20,000."""
    x = np.random.default_rng(5).normal(1.0, 0.2, 50_000)
    est = estimates.bootstrap_ci(x, "mean", key="many")
    assert est.n == 50_000 and estimates.MAX_SAMPLES == 20_000
    width = (est.high - est.low) / (2 * Z_975 * x.std(ddof=1))
    assert width * np.sqrt(20_000) == pytest.approx(1.0, abs=0.08)


def test_speedup_interval_has_the_95_percent_width():
    """The ratio of two independent bootstrap distributions against the delta method's
    95 % interval of a ratio of means."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(20.0, 2.0, 3000), rng.normal(10.0, 1.0, 3000)
    sp = estimates.speedup(estimates.bootstrap_ci(a, key="a"), estimates.bootstrap_ci(b, key="b"))
    ratio = a.mean() / b.mean()
    rel_se = np.hypot(a.std(ddof=1) / a.mean(), b.std(ddof=1) / b.mean()) / np.sqrt(3000)
    analytic = 2 * Z_975 * ratio * rel_se
    assert sp.value == pytest.approx(ratio)
    assert (sp.high - sp.low) / analytic == pytest.approx(1.0, abs=0.08)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_run_to_run_interval_is_students_t_on_the_log_scale(n):
    values = np.array([6.0, 7.8, 6.5, 7.1, 6.9][:n])
    est = estimates.across_runs(values, key="runs")
    logs = np.log(values)
    half = T_975[n - 1] * logs.std(ddof=1) / np.sqrt(n)
    assert est.runs == est.n == n and est.across_runs
    assert est.value == pytest.approx(np.exp(logs.mean()))
    assert (est.low, est.high) == pytest.approx((np.exp(logs.mean() - half),
                                                 np.exp(logs.mean() + half)))  # fmt: skip
    # Its draws (for speedups) have the same 2.5 / 97.5 percentiles.
    assert np.percentile(est.distribution, [2.5, 97.5]) == pytest.approx(
        [est.low, est.high], rel=0.05
    )


def test_run_to_run_interval_covers_95_percent_of_repeats():
    """4,000 simulated configurations of 3 runs each (log-normal run times): the interval
    holds the true (geometric mean) time in 95 % of them; at 90 % it would be 90 %."""
    rng = np.random.default_rng(11)
    true_log = np.log(5.0)
    hits = 0
    trials = 4000
    for i in range(trials):
        runs = np.exp(rng.normal(true_log, 0.15, 3))
        est = estimates.across_runs(runs, key=str(i))
        hits += est.low <= 5.0 <= est.high
    assert hits / trials == pytest.approx(0.95, abs=0.012)


def test_single_run_and_degenerate_repeats():
    one = estimates.across_runs([4.2])
    assert (one.value, one.n, one.runs, one.has_ci) == (4.2, 1, 1, False)
    same = estimates.across_runs([3.0, 3.0, 3.0])
    assert (same.low, same.value, same.high, same.runs) == (3.0, 3.0, 3.0, 3)
    # A run with no measured value (all its iterations excluded) does not count.
    assert estimates.across_runs([np.nan, 2.0, 2.2]).runs == 2


def test_objectives_are_documented_statistics():
    """Training: time per 1 000 env steps, the ratio of total time to total work; inference:
    median latency per action. Every objective is time-like: lower is better."""
    env, inference = OBJECTIVES["env_steps"], OBJECTIVES["latency"]
    assert (env.metric, env.statistic, env.unit) == ("s_per_1k_env_steps", "ratio", "s")
    assert (inference.metric, inference.statistic) == ("action_ms", "median")
    assert all(o.lower_is_better for o in OBJECTIVES.values())
    skewed = [1.0, 1.0, 1.0, 10.0]
    assert estimates.bootstrap_ci(skewed, OBJECTIVES["iter_s"].statistic).value == 3.25
    assert estimates.bootstrap_ci(skewed, inference.statistic).value == 1.0


def test_time_per_work_weighs_iterations_by_their_work():
    """The study's 16-worker cell sampled 6 400 env steps per "4 000-step" iteration: its
    time per 1 000 env steps is total time over total env steps, not the mean of the
    per-iteration ratios, and a slower iteration that did more work can be faster per env
    step (SPEC §5)."""
    t, w = [17.0, 17.2, 16.8], [6400.0, 6400.0, 6400.0]
    e = estimates.bootstrap_ratio_ci(t, w, 1000, "a")
    assert e.value == pytest.approx(1000 * 51.0 / 19200)
    assert e.low <= e.value <= e.high and e.has_ci
    four = estimates.bootstrap_ratio_ci([13.1, 13.2, 13.0], [4000.0] * 3, 1000, "b")
    assert four.value > e.value  # 13.1 s per 4 000 steps is slower than 17 s per 6 400
    mixed = estimates.bootstrap_ratio_ci([1.0, 3.0], [1000.0, 1000.0 * 9], 1000, "c")
    assert mixed.value == pytest.approx(1000 * 4.0 / 10000)  # not mean(1, 0.333) = 0.667
    rate = estimates.reciprocal(e, 1000)
    assert rate.value == pytest.approx(1000 / e.value)
    assert rate.low == pytest.approx(1000 / e.high) and rate.high == pytest.approx(1000 / e.low)
    # Lower is better: a speedup > 1 means the candidate needs less time per unit of work.
    assert estimates.speedup(four, e).value > 1
