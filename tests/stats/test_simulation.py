"""The statistics that decide, checked by simulation through the production path
(tests/stats/simulate.py: ``rounds.decide`` round by round, then the report's reading of
the cells), with the naive rules planted beside them and shown failing.

The claims, as docs/report.md#statistics states them:

- a configuration's run-to-run interval covers its true time in at least 93 % of
  configurations (per configuration) at nominal 95 %, with and without a history prior;
- a race closes a configuration tied with the best in at most 5 % of races (per
  comparison set), the set of 30 equal configurations included;
- one run's within-run interval covers the run's mean in at least 93 % of runs at lag-1
  correlation 0.7.

The synthetic configurations: run-to-run log spreads drawn per race between 2 % and 8 %
(one at 20 % where said), within-run AR(1) noise up to 0.7, a machine drift of 1 % or 3 %
a round, sets of 8 and of 30. Every simulation is seeded: each number is reproducible, and
the margins to each bar are several standard errors wide.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlperf.stats import intervals
from rlperf.stats import race as race_module
from rlperf.stats.race import MODERATED, WELCH, History, Rule
from rlperf.sweep import rounds
from rlperf.sweep.design import Design
from tests.stats.simulate import fitted_on_itself, history, report_estimates, simulate

#: The bars of the issue: coverage at nominal 95 %, tied configurations closed.
COVERAGE = 0.93
CLOSED_TIED = 0.05
RACE = Design(2, 5, None, True)
PRECISE_RACE = Design(2, 5, 0.03, True)
MIXED = np.array([1.0, 1.0, 1.05, 1.1, 1.2, 1.3, 1.5, 2.0])


def _spreads(rng: np.random.Generator, k: int, noisy: bool = False) -> np.ndarray:
    s = np.exp(rng.uniform(np.log(0.02), np.log(0.08), k))
    if noisy:
        s[0] = 0.20  # tied with the best (MIXED[0] == MIXED[1])
    return s


@pytest.fixture(scope="module")
def machine() -> History:
    """The machine's history: 400 repeated configurations of 5 runs, spreads 2-8 %."""
    rng = np.random.default_rng(100)
    past, prior = history(rng, 400, 5, lambda: float(np.exp(rng.uniform(np.log(0.02),
                                                                       np.log(0.08)))))  # fmt: skip
    assert 3.0 < prior.d0 < 7.0 and 0.03 < prior.s0 < 0.045  # what such a history says
    return past


def _races(
    seed: int, sweeps: int, means: np.ndarray, design: Design, past: History | None,
    noisy: bool = False, drift: float = 0.0, phi: float = 0.0,
) -> tuple[float, float, float]:  # fmt: skip
    """Over ``sweeps`` synthetic sweeps: the share that closed a configuration tied with
    the best, the share of configurations whose report interval covers the true time (per
    configuration, as the docs claim), and the compute spent against ``max`` runs each."""
    rng = np.random.default_rng(seed)
    tied = covered = counted = runs = 0
    for _ in range(sweeps):
        s = simulate(rng, means, _spreads(rng, len(means), noisy), design, drift, phi, past)
        tied += s.tied_with_best_closed()
        runs += s.runs()
        for name, e in report_estimates(s, design).items():
            if e.has_ci:
                counted += 1
                covered += e.low <= means[int(name[1:])] <= e.high
    return tied / sweeps, covered / counted, runs / (sweeps * design.max * len(means))


SCENARIOS = {
    "8 mixed, 1 % drift, phi 0.5": dict(means=MIXED, drift=0.01, phi=0.5),
    "8 mixed, one at 20 %, 3 % drift, phi 0.7": dict(means=MIXED, noisy=True, drift=0.03,
                                                     phi=0.7),
    "30 equal": dict(means=np.ones(30)),
}  # fmt: skip


@pytest.mark.parametrize("with_prior", [False, True], ids=["welch", "history prior"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_race_rarely_closes_a_tied_configuration_and_intervals_cover(
    scenario: str, with_prior: bool, machine: History
) -> None:
    """Measured (closed tied, coverage) in the three scenarios: Welch 0 %, 97.5 %; 0 %,
    96.3 %; 0 %, 97.2 %; with the prior 0.7 %, 98.8 %; 4.0 %, 97.0 %; 2.7 %, 98.8 % (the
    20 % configuration is not in the history: the prior never makes it look quieter than
    its own runs, and without that rule it is closed while tied in 12 % of races)."""
    kw = SCENARIOS[scenario]
    sweeps = 150 if len(kw["means"]) == 30 else 300
    tied, coverage, _ = _races(1, sweeps, design=PRECISE_RACE, past=machine if with_prior
                               else None, **kw)  # type: ignore[arg-type]  # fmt: skip
    assert tied <= CLOSED_TIED
    assert coverage >= COVERAGE


@pytest.mark.parametrize("rule", ["planned looks", "planted naive looks"])
def test_configurations_stopped_when_precise_keep_their_coverage(
    rule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four configurations (1, 1.1, 1.3, 2) with an 8 % run-to-run spread and a 1 % drift,
    stopped at ±5 % over 2-5 runs: the report's intervals (at the level the sweep stopped
    on, 1 - 0.05 / 4 per look) cover in 97.6 % of configurations. Planted: the same stop on
    plain 95 % intervals, looked at after every round, covers 89.3 %."""
    if rule != "planned looks":
        from rlperf.report.stats import objectives

        monkeypatch.setattr(rounds, "design_confidence", lambda _: 0.95)
        monkeypatch.setattr(objectives, "design_confidence", lambda _: 0.95)
    rng = np.random.default_rng(1)
    design = Design(2, 5, 0.05, False)
    means = np.array([1.0, 1.1, 1.3, 2.0])
    covered = counted = 0
    for _ in range(500):
        s = simulate(rng, means, np.full(4, 0.08), design, drift=0.01)
        for name, e in report_estimates(s, design).items():
            counted += e.has_ci
            covered += e.has_ci and e.low <= means[int(name[1:])] <= e.high
    assert (covered / counted >= COVERAGE) == (rule == "planned looks")


def test_the_history_prior_saves_compute_where_welch_cannot(machine: History) -> None:
    """Two runs give Welch one degree of freedom; the prior lends the machine's d0 ≈ 4:
    measured 85 % of fixed compute without it, 77 % with it (the race alone, 8 mixed)."""
    _, _, welch = _races(2, 200, MIXED, RACE, None)
    _, _, moderated = _races(2, 200, MIXED, RACE, machine)
    assert moderated < welch - 0.04


def test_planted_a_union_over_the_k_minus_1_pairs_with_the_best_fails() -> None:
    """The best is chosen from the data: spending the error over its k - 1 pairs closes
    one of 30 equal configurations in 20.7 % of races (all pairs: 2.0 %)."""
    saved = race_module.pair_level
    race_module.pair_level = lambda k, looks, confidence=0.95: (
        1.0 - (1.0 - confidence) / (max(1, looks) * max(1, k - 1)))  # fmt: skip
    try:
        tied, _, _ = _races(3, 150, np.ones(30), RACE, None)
    finally:
        race_module.pair_level = saved
    assert tied > 2 * CLOSED_TIED


def test_planted_a_prior_fitted_on_the_sweep_itself_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep's own 8 configurations fit no prior worth the name: they count their runs
    twice, and close one of 8 equal configurations in 10.1 % of races (the history's
    prior: 3.0 %)."""

    def on_itself(_: History | None, values: list[race_module.RunValue]) -> Rule:
        try:
            return Rule(MODERATED, "planted", fitted_on_itself(values), 1.0)
        except ValueError:  # round 0: one run each, nothing to fit
            return Rule(WELCH, "planted")

    monkeypatch.setattr(rounds, "rule_for", on_itself)
    tied, _, _ = _races(4, 800, np.ones(8), RACE, History(0, {}))
    assert tied > CLOSED_TIED


def test_a_sweep_that_disagrees_with_the_history_falls_back_to_welch(machine: History) -> None:
    """Configurations 20-40 % apart run to run on a machine whose history says 2-8 %: the
    set's rule is Welch, with the test's p-value, and the report reads no prior."""
    rng = np.random.default_rng(5)
    s = simulate(rng, MIXED, np.full(8, 0.3), RACE, history=machine)
    (rule,) = s.rules.values()
    assert rule.name == WELCH and rule.agreement_p is not None and rule.agreement_p < 0.05
    assert "disagree" in rule.why
    assert not any(e.prior for e in report_estimates(s, RACE).values())
    calm = simulate(rng, MIXED, _spreads(rng, 8), RACE, history=machine)
    assert [r.name for r in calm.rules.values()] == [MODERATED]
    assert any(e.prior for e in report_estimates(calm, RACE).values())


def _iid_bootstrap(x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """The planted rule: a 95 % percentile bootstrap of the mean, iterations as if iid."""
    means = x[rng.integers(0, x.size, (400, x.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


@pytest.mark.parametrize("rule", ["batch means", "planted iid bootstrap"])
def test_one_runs_interval_covers_its_mean_at_lag_1_correlation_07(rule: str) -> None:
    """100 iterations of AR(1) at 0.7: batch means of about n^(1/3) batches cover the
    run's true mean in 93.8 % of runs; the iid bootstrap in 57.2 %."""
    from tests.stats.simulate import ar1

    rng = np.random.default_rng(6)
    runs = 1.0 + ar1(rng, (1500, 100), 0.7, 0.05)
    covered = 0
    for x in runs:
        if rule == "batch means":
            e = intervals.within_run(x)
            low, high = e.low, e.high
        else:
            low, high = _iid_bootstrap(x, rng)
        covered += low <= 1.0 <= high
    coverage = covered / len(runs)
    if rule == "batch means":
        assert coverage >= COVERAGE
    else:
        assert coverage < 0.8


def test_race_closes_on_exactly_the_pairs_ratio_interval() -> None:
    """The race asks every pair at once; each closure is the same interval asked alone
    (rlperf.stats.intervals.slower), which is what the report shows for it."""
    rng = np.random.default_rng(8)
    for _ in range(50):
        values = {f"c{i}": list(np.exp(rng.normal(np.log(1 + 0.1 * i), 0.05, 3)))
                  for i in range(6)}  # fmt: skip
        result = race_module.race(values, looks=3)
        est = {n: intervals.across_runs(v, result.level) for n, v in values.items()}
        for name in values:
            if name == result.best:
                continue
            shown = [o for o in values if o != name
                     and intervals.slower(est[name], est[o], result.level) is not None]  # fmt: skip
            assert (name in result.closed) == bool(shown)
