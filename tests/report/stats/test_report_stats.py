"""The report's objectives are the documented statistics (docs/report.md, "Statistics"):
the levels and widths of the intervals are tests/stats/test_intervals.py's."""

from __future__ import annotations

import pytest

from rlperf.report.stats.objectives import OBJECTIVES
from rlperf.stats import intervals


def test_objectives_are_documented_statistics():
    """Training: time per 1 000 env steps, the ratio of total time to total work; inference:
    median latency per action. Every objective is time-like: lower is better."""
    env, inference = OBJECTIVES["env_steps"], OBJECTIVES["latency"]
    assert (env.metric, env.statistic, env.unit) == ("s_per_1k_env_steps", "ratio", "s")
    assert (inference.metric, inference.statistic) == ("action_ms", "median")
    assert all(o.lower_is_better for o in OBJECTIVES.values())
    skewed = [1.0, 1.0, 1.0, 10.0]
    assert intervals.within_run(skewed, OBJECTIVES["iter_s"].statistic).value == 3.25
    assert intervals.within_run(skewed, inference.statistic).value == 1.0


def test_time_per_work_weighs_iterations_by_their_work():
    """The study's 16-worker cell sampled 6 400 env steps per "4 000-step" iteration: its
    time per 1 000 env steps is total time over total env steps, not the mean of the
    per-iteration ratios, and a slower iteration that did more work can be faster per env
    step (SPEC §5)."""
    t, w = [17.0, 17.2, 16.8], [6400.0, 6400.0, 6400.0]
    e = intervals.within_run_ratio(t, w, 1000)
    assert e.value == pytest.approx(1000 * 51.0 / 19200)
    assert e.low <= e.value <= e.high and e.has_ci
    four = intervals.within_run_ratio([13.1, 13.2, 13.0], [4000.0] * 3, 1000)
    assert four.value > e.value  # 13.1 s per 4 000 steps is slower than 17 s per 6 400
    mixed = intervals.within_run_ratio([1.0, 3.0], [1000.0, 1000.0 * 9], 1000)
    assert mixed.value == pytest.approx(1000 * 4.0 / 10000)  # not mean(1, 0.333) = 0.667
    rate = intervals.reciprocal(e, 1000)
    assert rate.value == pytest.approx(1000 / e.value)
    assert rate.low == pytest.approx(1000 / e.high) and rate.high == pytest.approx(1000 / e.low)
    # Lower is better: a speedup > 1 means the candidate needs less time per unit of work.
    assert intervals.speedup(four, e).value > 1
