"""A sweep's race within a comparison set: stop measuring what is already known to lose.

After each round, a configuration is closed when its runs show it slower than another
configuration of its comparison set: the interval of the ratio of their geometric means
(:func:`rlperf.stats.intervals.slower`, Welch on the runs' logarithms, or the moderated
variances of a history prior) lies wholly above 1.

**The guarantee, per comparison set:** the chance that a race closes *any* configuration
tied with the true best, over all its looks, is at most ``1 - confidence``. The best is
chosen from the data, so a union over its ``k - 1`` pairs with the observed best bounds
nothing (30 equal configurations: 6 % of races close one; tests/stats/test_engine.py plants
that rule). Instead each look spends ``(1 - confidence) / (looks · k (k - 1) / 2)`` on every
pair of the set's ``k`` configurations, and a configuration closes when *some* pair shows
it slower. If every pair's interval covers its true ratio (probability at least
``confidence``), no configuration whose true time is the best's is ever shown slower than
another. A sweep of ``m`` comparison sets makes ``m`` such races; the chance that one of
them closes a tied configuration is at most ``m`` times that.

Degenerate values, by rule: a run without a usable value (zero, negative, not finite) is
not a run of the race; a configuration with fewer than 2 runs stays open and closes
nothing; runs that agree to the last digit measure no spread (without a prior they close
nothing and are never closed); a configuration whose times are lower bounds (a target not
reached) may be closed by them (its true times are larger still), but closes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlperf.stats.intervals import CONFIDENCE, Estimate, across_runs, slower
from rlperf.stats.prior import VariancePrior, agreement, fit


@dataclass(frozen=True)
class RunValue:
    """One completed run's objective value, as a sweep's rounds judge it: the run's folder,
    its configuration (runs of one configuration pooled, seeds apart), the comparison set
    it is ranked in, and the value (lower is better: a time). ``bound``: the value is a
    lower bound (a time to target that was not reached). ``machine``: a digest of the
    hardware fingerprint it ran on (what a history prior is matched on), ``machine_name``
    the same in words."""

    path: Path
    configuration: str
    comparison: str
    objective: str
    value: float
    label: str = ""  # the configuration's name in sentences (the axes that vary)
    bound: bool = False
    machine: str = ""
    machine_name: str = ""


@dataclass(frozen=True)
class Loss:
    """What a closed configuration lost by: its time over ``to``'s, as an interval."""

    ratio: Estimate
    to: str


@dataclass(frozen=True)
class RaceResult:
    """After a round: who is still racing, and what each closed one lost by."""

    best: str
    open: tuple[str, ...]
    closed: Mapping[str, Loss]
    level: float  # the per-pair level the round's intervals had


def pair_level(k: int, looks: int, confidence: float = CONFIDENCE) -> float:
    """The level of each pair's interval in a race of ``k`` configurations over ``looks``
    looks: ``1 - (1 - confidence) / (looks · k (k - 1) / 2)``."""
    pairs = max(1, k * (k - 1) // 2)
    return 1.0 - (1.0 - confidence) / (max(1, looks) * pairs)


def race(
    values: Mapping[str, Sequence[float]],
    looks: int,
    confidence: float = CONFIDENCE,
    already_closed: Collection[str] = (),
    bounds: Collection[str] = (),
    prior: VariancePrior | None = None,
) -> RaceResult:
    """One round of a race among configurations whose objective is lower-is-better (a time).

    ``values``: per configuration of the comparison set, one value per run so far (closed
    ones included: their runs count, one may be the best). ``bounds``: the configurations
    whose values are lower bounds. ``prior``: the history's variance prior, or None for
    each configuration's own spread (Welch). The best is the lowest geometric mean among
    the open ones; a closed one's loss is the ratio to the configuration that showed it
    slower (the best where the best does).
    """
    names = [n for n in values if n not in already_closed]
    if not names:
        raise ValueError("race needs at least one open configuration")
    level = pair_level(len(values), looks, confidence)
    est = {n: across_runs(values[n], level, n in bounds, prior) for n in values}
    measured = [n for n in names if est[n].n > 0]
    best = min(measured or names, key=lambda n: est[n].value if est[n].n else float("inf"))
    shown = _shown_slower([n for n in values if est[n].across_runs and est[n].has_ci], est,
                          level)  # fmt: skip
    closed: dict[str, Loss] = {}
    for name in names:
        others = shown.get(name, [])
        if name == best or not others:
            continue
        to = best if best in others else min(others, key=lambda n: est[n].value)
        lost = slower(est[name], est[to], level)  # the same interval, one pair at a time
        if lost is not None:  # (None only where rounding put its bound at exactly 1)
            closed[name] = Loss(lost, to)
    return RaceResult(best, tuple(n for n in names if n not in closed), closed, level)


def _shown_slower(
    names: Sequence[str], est: Mapping[str, Estimate], level: float
) -> dict[str, list[str]]:
    """For each of ``names``, the others its runs show it slower than: every pair's
    :func:`rlperf.stats.intervals.slower` at ``level`` at once (a set of 30 has 435 pairs,
    and a sweep asks after every round). A lower bound is no reference."""
    if len(names) < 2:
        return {}
    from scipy import stats

    logs = np.log([est[n].value for n in names])
    se2 = np.array([est[n].log_se ** 2 for n in names])
    df = np.array([est[n].df for n in names])
    bound = np.array([est[n].bound for n in names])
    s2 = se2[:, None] + se2[None, :]
    parts = se2[:, None] ** 2 / df[:, None] + se2[None, :] ** 2 / df[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        welch = np.where(parts > 0, s2**2 / parts, np.inf)
    t = stats.t.ppf(1.0 - (1.0 - level) / 2.0, welch)
    low = logs[:, None] - logs[None, :] - t * np.sqrt(s2)
    slower_than = (low > 0) & ~bound[None, :] & ~np.eye(len(names), dtype=bool)
    return {n: [names[int(j)] for j in np.flatnonzero(row)]
            for n, row in zip(names, slower_than, strict=True) if row.any()}  # fmt: skip


#: The rules a comparison set's run-to-run intervals may be decided by.
WELCH = "welch"
MODERATED = "moderated"


@dataclass(frozen=True)
class Rule:
    """The rule that decides one comparison set: ``moderated`` by a history ``prior``, or
    ``welch`` (each configuration's own spread), and why (a sentence for the report)."""

    name: str
    why: str
    prior: VariancePrior | None = None
    agreement_p: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.name, "why": self.why,
                "prior": None if self.prior is None else self.prior.to_json(),
                "agreement_p": self.agreement_p}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Rule:
        prior = data.get("prior")
        return cls(str(data.get("rule") or WELCH), str(data.get("why") or ""),
                   None if not prior else VariancePrior.from_json(prior),
                   data.get("agreement_p"))  # fmt: skip


def by_configuration(values: Sequence[RunValue]) -> dict[str, list[float]]:
    """Each configuration's run values, in the order given."""
    out: dict[str, list[float]] = {}
    for v in values:
        out.setdefault(v.configuration, []).append(v.value)
    return out


@dataclass(frozen=True)
class History:
    """The runs of earlier sweeps (``hydra.sweeper.repeats.prior``) and the prior each of
    their (machine, objective) pairs fits, or why none (fitted once, asked every round)."""

    runs: int
    priors: Mapping[tuple[str, str], VariancePrior | str]
    names: Mapping[str, str] = field(default_factory=dict)  # machine digest -> in words

    @classmethod
    def of(cls, values: Sequence[RunValue]) -> History:
        groups: dict[tuple[str, str], list[RunValue]] = {}
        for v in values:
            if not v.bound:  # a lower bound's spread is not the machine's
                groups.setdefault((v.machine, v.objective), []).append(v)
        priors: dict[tuple[str, str], VariancePrior | str] = {}
        for (machine, objective), runs in groups.items():
            try:
                priors[machine, objective] = fit(list(by_configuration(runs).values()),
                                                 objective, machine)  # fmt: skip
            except ValueError as exc:
                priors[machine, objective] = str(exc)
        return cls(len(values), priors, {v.machine: v.machine_name for v in values})

    def lines(self) -> list[str]:
        """What the history says, a line per machine and objective."""
        out = []
        for (machine, objective), prior in sorted(self.priors.items()):
            name = self.names.get(machine) or f"machine {machine}"
            said = prior if isinstance(prior, str) else prior.describe()
            out.append(f"{name} · {objective}: {said}")
        return out


def rule_for(history: History | None, values: Sequence[RunValue]) -> Rule:
    """The rule for a comparison set whose runs so far are ``values``: the ``history``'s
    prior of the same machine and objective, where it has one and the set's own spreads
    agree with it (:func:`rlperf.stats.prior.agreement`); else Welch, saying why."""
    if history is None:
        return Rule(WELCH, "each configuration's own run-to-run spread (Welch)")
    machines = {v.machine for v in values}
    objectives = {v.objective for v in values}
    if len(machines) != 1 or len(objectives) != 1:
        spans = f"{len(machines)} machine(s) and {len(objectives)} objective(s)"
        return Rule(WELCH, f"Welch: the set spans {spans}, no one history prior fits")
    prior = history.priors.get((next(iter(machines)), next(iter(objectives))))
    if prior is None:
        return Rule(WELCH, "Welch: the history holds no run of this machine and objective")
    if isinstance(prior, str):
        return Rule(WELCH, f"Welch: no history prior for this machine and objective ({prior})")
    agrees = agreement(prior, list(by_configuration(values).values()))
    if not agrees.agrees:
        return Rule(WELCH, f"Welch: this sweep's run-to-run spreads disagree with the history "
                           f"prior ({prior.describe()}; p = {agrees.p:.3f})", prior,
                    agrees.p)  # fmt: skip
    return Rule(MODERATED, f"moderated by the machine's history: {prior.describe()}", prior,
                agrees.p)  # fmt: skip
