"""The report's tie rule at its boundaries (rlperf.report.stats.estimates; found by mutation
testing, docs/development.md#mutation-testing). The intervals themselves are the engine's:
tests/stats/test_intervals.py."""

from __future__ import annotations

from rlperf.report.stats import estimates
from rlperf.stats.intervals import Estimate

NAN = float("nan")


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
