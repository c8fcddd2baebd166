"""The report's tie rule at its boundaries (rlperf.report.stats.estimates; found by mutation
testing, docs/development.md#mutation-testing). The intervals themselves are the engine's:
tests/stats/test_intervals.py."""

from __future__ import annotations

from rlperf.report.stats import estimates
from rlperf.stats.intervals import Estimate, across_runs, speedup

NAN = float("nan")


def test_ranks_tie_where_the_speedup_interval_holds_one() -> None:
    """The tie rule is the speedup the page prints: overlapping intervals whose ratio's
    interval excludes 1 are *not* tied (the old overlap rule, planted, would tie them)."""
    a = across_runs([1.00, 1.01, 0.99, 1.00, 1.02, 0.98])
    b = across_runs([1.025, 1.035, 1.015, 1.025, 1.045, 1.005])  # 2.5 % slower: overlap, separated
    c = across_runs([1.00, 1.10, 0.90, 1.05, 0.95, 1.00])  # a's value, wide: tied with a, b
    d = Estimate(2.0, NAN, NAN, 1)  # no interval: its point, above the others
    e = Estimate(NAN, NAN, NAN, 0)  # not ranked
    assert a.high > b.low  # the intervals overlap...
    assert speedup(b, a).low > 1  # ...and the speedup separates them
    est = {"a": a, "b": b, "c": c, "d": d, "e": e}
    assert estimates.rank_with_ties(est) == {"a": 1, "b": 2, "c": 1, "d": 4}
    assert estimates.rank_with_ties(est, lower_is_better=False) == {"a": 3, "b": 2, "c": 2, "d": 1}
    assert not estimates.tied(a, b) and not estimates.tied(b, a)
    assert estimates.tied(a, c) and estimates.tied(c, b)
    assert estimates.tied(d, Estimate(2.0, NAN, NAN, 1)) and not estimates.tied(d, a)
