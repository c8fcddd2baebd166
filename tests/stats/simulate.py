"""Synthetic sweeps through rlperf's production path: ``rounds.decide`` round by round, then
the report's reading of the resulting cells (``Objective.estimate``, the verdict's
``separated``). Nothing here decides: it makes runs and asks.

A configuration has a true time ``mean``; run ``r`` of it lands at ``mean · exp(N(0,
spread)) · exp(drift_r)``, where ``drift_r`` is the machine's random walk (step ``drift`` a
round, shared by every run of the round, which runs in a shuffled order); each run's value
is its own statistic over ``ITERATIONS`` AR(1) iteration times (lag-1 correlation ``phi``,
2 % spread), as the report takes it (``within_run``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.signal import lfilter

from rlperf.report.read.cells import Cell
from rlperf.report.stats.objectives import OBJECTIVES
from rlperf.report.stats.repeats import Configuration
from rlperf.stats import intervals
from rlperf.stats.intervals import Estimate
from rlperf.stats.prior import VariancePrior, fit
from rlperf.stats.race import History, RunValue
from rlperf.sweep import rounds
from rlperf.sweep.design import Design
from rlperf.vocabulary import Family, RunStatus

ITERATIONS = 20
#: The comparison set every synthetic configuration is in, as the judge names it.
SET = f"{Family.training}: tiny"
OBJECTIVE = OBJECTIVES["env_steps"]


def ar1(rng: np.random.Generator, shape: tuple[int, ...], phi: float, sigma: float) -> np.ndarray:
    """Stationary AR(1) series along the last axis, mean 0 and standard deviation ``sigma``."""
    e = rng.normal(0.0, sigma * np.sqrt(1 - phi**2), shape)
    e[..., 0] = rng.normal(0.0, sigma, shape[:-1])
    return np.asarray(lfilter([1.0], [1.0, -phi], e, axis=-1))


@dataclass
class Sweep:
    """One synthetic sweep's outcome: every run's value, what closed, the rules used."""

    means: np.ndarray
    values: list[RunValue] = field(default_factory=list)
    closed: dict[str, rounds.Closed] = field(default_factory=dict)
    rules: dict[str, rounds.Rule] = field(default_factory=dict)

    def names(self) -> list[str]:
        return [f"c{i}" for i in range(len(self.means))]

    def tied_with_best_closed(self) -> bool:
        """Whether a configuration whose true time is the best's was eliminated."""
        best = self.means.min()
        return any(self.closed.get(n) is not None and self.closed[n].why == "eliminated"
                   for n, m in zip(self.names(), self.means, strict=True) if m == best)  # fmt: skip

    def runs(self) -> int:
        return len(self.values)


def simulate(
    rng: np.random.Generator,
    means: Sequence[float],
    spreads: Sequence[float],
    design: Design,
    drift: float = 0.0,
    phi: float = 0.0,
    history: History | None = None,
) -> Sweep:
    """Run ``design`` over configurations of true times ``means`` and run-to-run log spreads
    ``spreads``, deciding after every round with :func:`rlperf.sweep.rounds.decide`."""
    out = Sweep(np.asarray(means, dtype=float))
    names = out.names()
    open_ = set(names)
    level = 0.0
    for r in range(design.max):
        if r:
            level += rng.normal(0.0, drift)
        order = [names[i] for i in rng.permutation(len(names)) if names[i] in open_]
        within = ar1(rng, (len(order), ITERATIONS), phi, 0.02)
        for row, name in zip(within, order, strict=True):
            i = int(name[1:])
            run_mean = out.means[i] * np.exp(rng.normal(0.0, spreads[i]) + level)
            value = intervals.within_run(run_mean * (1.0 + row)).value
            out.values.append(RunValue(Path(f"/sim/{name}/{r}"), name, SET, OBJECTIVE.key,
                                       float(value), machine="m"))  # fmt: skip
        decision = rounds.decide(design, r, out.values, {n: n for n in names}, open_, {},
                                 history, out.rules)  # fmt: skip
        out.rules.update(decision.rules)
        for name, closed in decision.closing.items():
            out.closed[name] = closed
            open_.discard(name)
        if not open_:
            break
    return out


def report_estimates(sweep: Sweep, design: Design) -> dict[str, Estimate]:
    """What the report reads of the sweep's cells: each configuration's estimate through
    :meth:`Objective.estimate`, with the sweep's design and rules as ``sweep.json`` holds
    them."""
    rules = {k: r.to_json() for k, r in sweep.rules.items()}
    out: dict[str, Estimate] = {}
    for name in sweep.names():
        mine = [v for v in sweep.values if v.configuration == name]
        cells = [
            Cell(
                f"{name}-{i}",
                v.path,
                "rlperf",
                "sim",
                RunStatus.completed,
                {},
                design=design.to_json(),
                rules=rules,
            )  # fmt: skip
            for i, v in enumerate(mine)
        ]
        conf = Configuration(cells[0].id, name, Family.training, "tiny", "fp1", cells,
                             workload="tiny")  # fmt: skip
        runs = {c.id: Estimate(v.value, np.nan, np.nan, ITERATIONS, bound=v.bound)
                for c, v in zip(cells, mine, strict=True)}  # fmt: skip
        out[name] = OBJECTIVE.estimate(conf, runs)
    return out


def history(
    rng: np.random.Generator, configurations: int, runs: int, spread: Callable[[], float]
) -> tuple[History, VariancePrior]:
    """Earlier sweeps on the same machine: ``configurations`` repeated configurations of
    ``runs`` runs each, with log spreads drawn by ``spread``; the history and its prior."""
    values: list[RunValue] = []
    for c in range(configurations):
        s = spread()
        for r, x in enumerate(np.exp(rng.normal(0.0, s, runs))):
            values.append(RunValue(Path(f"/history/{c}/{r}"), f"h{c}", SET, OBJECTIVE.key,
                                   float(x), machine="m"))  # fmt: skip
    past = History.of(values)
    prior = past.priors["m", OBJECTIVE.key]
    assert isinstance(prior, VariancePrior)
    return past, prior


def fitted_on_itself(values: Sequence[RunValue]) -> VariancePrior:
    """The planted rule's prior: fitted on the sweep's own configurations."""
    from rlperf.stats import prior

    groups: dict[str, list[float]] = {}
    for v in values:
        groups.setdefault(v.configuration, []).append(v.value)
    saved = prior.MIN_CONFIGURATIONS
    prior.MIN_CONFIGURATIONS = 2
    try:
        return fit(list(groups.values()), OBJECTIVE.key, "m")
    finally:
        prior.MIN_CONFIGURATIONS = saved
