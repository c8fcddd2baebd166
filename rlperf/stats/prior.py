"""The machine's run-to-run noise, learnt from its own history: an empirical-Bayes prior on
the variance of a run's log objective (Smyth 2004, limma's moderated t).

With 2 or 3 runs, a configuration's own sample variance rests on 1 or 2 degrees of freedom,
and Welch's interval is too wide to separate much. A machine that has run many repeated
configurations knows more: their sample variances ``s_g²`` (on ``d_g`` degrees of freedom)
are modelled as scaled draws around a prior ``s0²`` with ``d0`` degrees of freedom,
``s_g² | σ_g² ~ σ_g² χ²(d_g) / d_g`` and ``1 / σ_g² ~ χ²(d0) / (d0 s0²)``, fitted by the
method of moments on ``log s_g²`` (:func:`fit`). A configuration's variance is then the
moderated ``(d0 s0² + d_g s_g²) / (d0 + d_g)`` on ``d0 + d_g`` degrees of freedom
(:meth:`VariancePrior.moderate`): the runs it has, plus the ``d0`` the history lends.

The prior is valid only where the history represents the sweep's configurations: the same
machine (hardware fingerprint) and objective, fitted on other sweeps than this one (a prior
fitted on the sweep itself counts its own runs twice: tests/stats/test_engine.py plants it
and shows it closing tied configurations too often). :func:`agreement` tests the sweep's
own spreads against it (each ``s_g² / s0²`` against ``F(d_g, d0)``, Bonferroni over the
configurations); where they disagree, the per-configuration rule (Welch) decides.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Fewer repeated configurations than this (each with at least 2 runs) fit no prior: the
#: spread of their variances, which gives ``d0``, is not estimable from a handful.
MIN_CONFIGURATIONS = 20

#: The level below which the sweep's spreads are said to disagree with the prior.
AGREEMENT_ALPHA = 0.05


@dataclass(frozen=True)
class VariancePrior:
    """``d0``: the prior's degrees of freedom (``inf``: every configuration's variance is
    ``s0²``); ``s0``: the prior standard deviation of a run's natural-log objective (0.04:
    runs about 4 % apart); fitted on ``configurations`` repeated configurations holding
    ``runs`` runs in all, of the objective ``objective`` on the machine ``machine``."""

    d0: float
    s0: float
    configurations: int
    runs: int
    objective: str = ""
    machine: str = ""

    def moderate(self, variance: float, df: float) -> tuple[float, float]:
        """A configuration's moderated variance and its degrees of freedom, from its own
        ``variance`` on ``df`` degrees of freedom (``df=0``: no runs to go by but the
        prior's). Never quieter than its own runs: where its own variance is the larger,
        it is kept, on its own ``df`` (Welch for that configuration). The prior lends
        degrees of freedom to configurations as quiet as the machine's, and cannot make a
        noisy one look quiet: a 20 % configuration among a history of 2-8 % ones is
        otherwise closed while tied in 12 % of races (tests/stats/test_simulation.py)."""
        if math.isinf(self.d0):
            moderated, total = self.s0**2, math.inf
        else:
            total = self.d0 + df
            moderated = (self.d0 * self.s0**2 + df * variance) / total
        if df > 0 and variance > moderated:
            return variance, df
        return moderated, total

    def describe(self) -> str:
        """``d0 = 4.8, s0 = 4.0 % (fitted on 400 configurations, 1,600 runs)``."""
        d0 = "∞" if math.isinf(self.d0) else f"{self.d0:.1f}"
        return (f"d0 = {d0}, s0 = {self.s0:.1%} (fitted on {self.configurations:,} "
                f"configurations, {self.runs:,} runs)")  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {"d0": None if math.isinf(self.d0) else self.d0, "s0": self.s0,
                "configurations": self.configurations, "runs": self.runs,
                "objective": self.objective, "machine": self.machine}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VariancePrior:
        d0 = data.get("d0")
        return cls(math.inf if d0 is None else float(d0), float(data["s0"]),
                   int(data.get("configurations") or 0), int(data.get("runs") or 0),
                   str(data.get("objective") or ""), str(data.get("machine") or ""))  # fmt: skip


def _trigamma_inverse(y: float) -> float:
    """The ``x`` with ``trigamma(x) = y`` (Newton's method, as limma's ``trigammaInverse``)."""
    from scipy import special

    if y > 1e7:
        return 1.0 / math.sqrt(y)
    if y < 1e-6:
        return 1.0 / y
    x = 0.5 + 1.0 / y
    for _ in range(50):
        tri = float(special.polygamma(1, x))
        step = tri * (1.0 - tri / y) / float(special.polygamma(2, x))
        x += step
        if -step / x < 1e-8:
            break
    return x


def variances(groups: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Each group's sample variance of the natural logarithms of its values and its degrees
    of freedom, over the groups with at least 2 usable values and a spread."""
    var, df = [], []
    for values in groups:
        x = np.asarray(values, dtype=float)
        x = x[np.isfinite(x) & (x > 0)]
        if x.size < 2:
            continue
        v = float(np.log(x).var(ddof=1))
        if v > 0:
            var.append(v)
            df.append(x.size - 1)
    return np.asarray(var), np.asarray(df, dtype=float)


def fit(groups: Sequence[Sequence[float]], objective: str = "", machine: str = "") -> VariancePrior:
    """The prior of the run-to-run variance of ``groups`` (each: one configuration's run
    values, on one machine and objective), by limma's method of moments (``fitFDist``).
    Raises ``ValueError`` with fewer than :data:`MIN_CONFIGURATIONS` groups of 2 or more
    runs."""
    from scipy import special

    var, df = variances(groups)
    g = var.size
    if g < MIN_CONFIGURATIONS:
        raise ValueError(
            f"a prior needs at least {MIN_CONFIGURATIONS} repeated configurations (2 or more "
            f"runs each, with a spread), got {g}"
        )
    e = np.log(var) - special.digamma(df / 2.0) + np.log(df / 2.0)
    mean = float(e.mean())
    spread = float(((e - mean) ** 2).sum() / (g - 1) - special.polygamma(1, df / 2.0).mean())
    runs = int((df + 1).sum())
    if spread > 0:
        d0 = 2.0 * _trigamma_inverse(spread)
        s0_sq = math.exp(mean + float(special.digamma(d0 / 2.0)) - math.log(d0 / 2.0))
    else:
        d0, s0_sq = math.inf, math.exp(mean)
    return VariancePrior(d0, math.sqrt(s0_sq), g, runs, objective, machine)


@dataclass(frozen=True)
class Agreement:
    """Whether a sweep's own spreads agree with a prior: the smallest Bonferroni-adjusted
    p-value of their F tests, and the group it belongs to."""

    agrees: bool
    p: float
    worst: int | None  # index of the group furthest from the prior (None: none tested)


def agreement(prior: VariancePrior, groups: Sequence[Sequence[float]]) -> Agreement:
    """Test each group's log variance against the prior: ``s_g² / s0² ~ F(d_g, d0)`` where
    the prior holds (two-sided, Bonferroni over the groups tested). Groups with fewer than
    2 usable values are not tested; runs that agree to the last digit count as a variance
    of 0 (as far from the prior as can be)."""
    from scipy import stats

    tested: list[tuple[int, float]] = []
    for i, values in enumerate(groups):
        x = np.asarray(values, dtype=float)
        x = x[np.isfinite(x) & (x > 0)]
        if x.size < 2:
            continue
        d = x.size - 1
        ratio = float(np.log(x).var(ddof=1)) / prior.s0**2
        if math.isinf(prior.d0):
            low = float(stats.chi2.cdf(ratio * d, d))
        else:
            low = float(stats.f.cdf(ratio, d, prior.d0))
        tested.append((i, 2.0 * min(low, 1.0 - low)))
    if not tested:
        return Agreement(True, 1.0, None)
    worst, p = min(tested, key=lambda t: t[1])
    adjusted = min(1.0, p * len(tested))
    return Agreement(adjusted >= AGREEMENT_ALPHA, adjusted, worst)
