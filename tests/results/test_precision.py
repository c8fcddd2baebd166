"""Stopping rules and races (rlperf.results.precision), checked by simulation: intervals
that stop as soon as they look narrow still cover the true value, a race rarely closes the
true best, and the naive rule planted beside them fails the same coverage test (the proof
that the test can fail).

The synthetic data: within a run, AR(1) iteration times (lag-1 correlation 0.5 and 0.7; the
2021 study's runs have a median of 0.06 and a 90th percentile of 0.44, measured on
reference/thesis/ray_results/volta1_def); across runs, a run-to-run spread of 8 % and a
slow drift of the machine from round to round (1 % a round, a random walk shared by the
configurations that run in that round, in a shuffled order).
"""

from __future__ import annotations

import numpy as np
import pytest

from rlperf.results.precision import (
    Interval,
    PrecisionRule,
    batch_means,
    log_interval,
    look_alpha,
    look_schedule,
    race,
    runs_needed,
    runs_to_separate,
    t_interval,
)

SWEEPS = 2000
#: The issue's bar: stopped intervals cover the true value in at least 93 % of sweeps.
COVERAGE = 0.93


def ar1(rng: np.random.Generator, n: int, phi: float, sigma: float, mu: float) -> np.ndarray:
    """``n`` values of a stationary AR(1) series with mean ``mu`` and std ``sigma``."""
    e = rng.normal(0.0, sigma * np.sqrt(1 - phi**2), n)
    x = np.empty(n)
    x[0] = rng.normal(0.0, sigma)
    for t in range(1, n):
        x[t] = phi * x[t - 1] + e[t]
    return mu + x


def test_looks_are_planned_before_the_data() -> None:
    assert look_schedule(2, 5) == (2, 3, 4, 5)
    assert look_schedule(8, 60, 1.5) == (8, 12, 18, 27, 41, 60)
    assert look_schedule(3, 3) == (3,)
    with pytest.raises(ValueError, match="first=1"):
        look_schedule(1, 5)
    assert look_alpha(5) == pytest.approx(0.01)


def test_batch_means_drop_the_first_values_left_over() -> None:
    x = np.arange(11.0)  # 3 batches of 3: the first 2 values (0, 1) are left over
    assert batch_means(x).tolist() == [3.0, 6.0, 9.0]
    assert batch_means(np.arange(4.0), batches=2).tolist() == [0.5, 2.5]
    with pytest.raises(ValueError, match="at least 2"):
        batch_means([1.0])


def test_an_interval_says_whether_it_is_within_the_target() -> None:
    iv = t_interval([1.0, 1.02, 0.98, 1.01, 0.99], alpha=0.05)
    assert iv.estimate == pytest.approx(1.0)
    assert iv.covers(1.0) and not iv.covers(1.1)
    assert iv.within(0.05) and not iv.within(0.01)
    assert Interval(0.0, -1.0, 1.0, 3).relative_half_width == float("inf")


def _within_run(phi: float, rng: np.random.Generator, naive: bool) -> float:
    """Coverage of the interval a run stops on: precision ±2 % on iteration times of 5 %
    spread, at most 60 iterations. Planned: looks at 8, 12, ... 60 over batch means;
    naive: a 95 % t interval over the raw iterations, looked at after every iteration."""
    rule = PrecisionRule(0.02, look_schedule(8, 60, 1.5), batched=True)
    covered = 0
    for _ in range(SWEEPS):
        x = ar1(rng, 60, phi, 0.05, 1.0)
        if naive:
            for n in range(3, 61):
                iv = t_interval(x[:n], 0.05)
                if iv.within(0.02):
                    break
        else:
            for n in rule.looks:
                look = rule.look(x[:n])
                assert look is not None
                iv = look.interval
                if look.reached:
                    break
        covered += iv.covers(1.0)
    return covered / SWEEPS


@pytest.mark.parametrize("phi", [0.5, 0.7])
def test_a_run_stopped_when_precise_enough_keeps_its_coverage(phi: float) -> None:
    rng = np.random.default_rng(int(phi * 10))
    assert _within_run(phi, rng, naive=False) >= COVERAGE


def test_the_naive_rule_fails_the_same_coverage_test() -> None:
    """Stopping on the first narrow interval over raw, correlated iterations: the planted
    naive rule covers far less than it says (measured: 0.67 at lag-1 correlation 0.5)."""
    assert _within_run(0.5, np.random.default_rng(5), naive=True) < 0.85


def _across_runs(rng: np.random.Generator, naive: bool, log: bool = False) -> tuple[float, float]:
    """Four configurations (true means 1, 1.1, 1.3, 2), 2 to 5 runs each in interleaved,
    shuffled rounds, each stopped once its runs' interval is within ±5 %: the coverage of
    the stopped intervals, and how often the target was met. ``log``: the sweep's rule
    (geometric means, the report's pooling)."""
    rule = PrecisionRule(0.05, look_schedule(2, 5), batched=False, log=log)
    means = (1.0, 1.1, 1.3, 2.0)
    covered = reached = total = 0
    for _ in range(SWEEPS // 4):
        drift = np.cumsum(rng.normal(0.0, 0.01, 5))
        runs: dict[int, list[float]] = {c: [] for c in range(4)}
        stopped: dict[int, Interval] = {}
        for r in range(5):
            for c in rng.permutation(4):
                if c in stopped:
                    continue
                runs[c].append(means[c] * (1 + rng.normal(0.0, 0.08) + drift[r]))
                n = len(runs[c])
                if naive and n >= 2:
                    iv = t_interval(runs[c], 0.05)
                    if iv.within(0.05) or n == 5:
                        stopped[c] = iv
                        reached += iv.within(0.05)
                elif not naive:
                    look = rule.look(runs[c])
                    if look is not None and (look.reached or n == 5):
                        stopped[c] = look.interval
                        reached += look.reached
        covered += sum(stopped[c].covers(means[c]) for c in range(4))
        total += 4
    return covered / total, reached / total


@pytest.mark.parametrize("log", [False, True], ids=["arithmetic", "geometric"])
def test_configurations_stopped_across_runs_keep_their_coverage(log: bool) -> None:
    coverage, reached = _across_runs(np.random.default_rng(1), naive=False, log=log)
    assert coverage >= COVERAGE
    # With an 8 % spread, ±5 % is seldom met within 5 runs: "not decided" is an answer.
    assert reached < 0.2


def test_the_naive_rule_fails_across_runs_too() -> None:
    coverage, _ = _across_runs(np.random.default_rng(2), naive=True)
    assert coverage < COVERAGE


def _race(rng: np.random.Generator, means: tuple[float, ...], log: bool = False) -> np.ndarray:
    """How often each configuration is closed over a race of up to 5 rounds (5 % spread)."""
    k = len(means)
    closed_count = np.zeros(k)
    for _ in range(SWEEPS):
        runs: dict[str, list[float]] = {f"c{i}": [] for i in range(k)}
        closed: set[str] = set()
        for r in range(5):
            for i in range(k):
                if f"c{i}" not in closed:
                    runs[f"c{i}"].append(means[i] * (1 + rng.normal(0.0, 0.05)))
            if r >= 1:  # looks after rounds 2..5
                closed |= set(race(runs, 4, already_closed=tuple(closed), log=log).closed)
        closed_count += [f"c{i}" in closed for i in range(k)]
    return closed_count / SWEEPS


@pytest.mark.parametrize("log", [False, True], ids=["arithmetic", "geometric"])
def test_a_race_rarely_closes_the_true_best(log: bool) -> None:
    """The best (c0) is closed in at most 5 % of races, over every look; a configuration 30 %
    slower is closed in nearly every race (measured: 0.05 % and 99 %)."""
    rate = _race(np.random.default_rng(3), (1.0, 1.03, 1.15, 1.3), log=log)
    assert rate[0] <= 0.05
    assert rate[3] >= 0.9


def test_a_race_among_equals_closes_almost_none() -> None:
    assert _race(np.random.default_rng(4), (1.0, 1.0, 1.0)).max() <= 0.05


def test_a_closed_configuration_says_by_how_much_it_lost() -> None:
    runs = {"fast": [1.0, 1.01, 0.99, 1.0], "slow": [2.0, 2.02, 1.98, 2.01]}
    result = race(runs, looks=1)
    assert result.best == "fast" and result.open == ("fast",)
    lost = result.closed["slow"]
    assert lost.estimate == pytest.approx(2.0, rel=0.01)
    assert lost.low < 2.0 < lost.high and lost.low > 1.9
    geometric = race(runs, looks=1, log=True).closed["slow"]
    assert geometric.estimate == pytest.approx(2.0, rel=0.01)
    assert 1.9 < geometric.low < 2.0 < geometric.high


def test_a_log_interval_is_a_ratio_interval_around_the_geometric_mean() -> None:
    iv = log_interval([1.0, 4.0], 0.05)
    assert iv.estimate == pytest.approx(2.0)
    assert iv.low * iv.high == pytest.approx(4.0)  # symmetric on the log scale
    with pytest.raises(ValueError, match="positive"):
        log_interval([1.0, 0.0], 0.05)


def test_runs_needed_from_the_measured_spread() -> None:
    """At a 10 % spread, ±5 % at 95 % needs about (t x 0.1 / 0.05)^2 runs, some 18."""
    rng = np.random.default_rng(6)
    values = 1.0 + rng.normal(0.0, 0.1, 40)
    cv = values.std(ddof=1) / values.mean()
    need = runs_needed(values[:10], 0.05, 0.05)
    assert need is not None and 8 <= need <= 40
    assert runs_needed(values, 0.05, 0.05) == pytest.approx((1.96 * cv / 0.05) ** 2, rel=0.15)
    assert runs_needed([1.0], 0.05, 0.05) is None


def test_runs_to_separate_two_configurations_from_their_spread() -> None:
    """5 % apart with a 5 % spread: some 2 (1.96 x 0.05 / 0.05)^2 = 8 runs each separate them;
    2 % apart, some 6 times as many; equal means or one run each: no estimate."""
    rng = np.random.default_rng(7)
    a = np.exp(rng.normal(0.0, 0.05, 4))
    a = np.exp((np.log(a) - np.log(a).mean()) / np.log(a).std(ddof=1) * 0.05)  # spread 5 %
    near = runs_to_separate(a, a * 1.05)
    assert near is not None and 7 <= near <= 10
    far = runs_to_separate(a, a * 1.02)
    assert far is not None and far > 4 * near
    assert runs_to_separate(a, a) is None and runs_to_separate([1.0], [2.0, 2.1]) is None
