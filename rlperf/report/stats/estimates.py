"""Rankings with ties: how the report orders configurations whose difference is within the
noise.

Every interval and ratio the report shows comes from :mod:`rlperf.stats.intervals` (one rule
per quantity, docs/report.md#statistics); this module only ranks them, by the same ratio the
page prints beside them. The tie rule: two configurations tie when the interval of the ratio
of their values (:func:`rlperf.stats.intervals.speedup`: Welch on their logarithms, at the
higher of their levels) holds 1; a configuration's rank is 1 + the number of configurations
that ratio shows better. Without an interval (a value without a spread), a configuration is
its point. So a rank never says "tied" beside a speedup whose interval excludes 1, nor the
reverse. A rank is a display, not a verdict: what is *decided* is said by
:mod:`rlperf.report.compare.decided`, across runs only.
"""

from __future__ import annotations

import math

from rlperf.stats.intervals import Estimate, speedup

#: What an interval over one run's own samples says wherever it appears: it describes that
#: run, not how far a second run would land (docs/report.md#repeats).
ONE_RUN = "one run: run-to-run spread not measured"


def _better(a: Estimate, b: Estimate, lower_is_better: bool = True) -> bool:
    """Whether ``a`` is shown better than ``b``: the interval of ``b / a`` (for times; ``a / b``
    for rates) lies wholly above 1; between points, a strictly better point."""
    if not lower_is_better:
        a, b = b, a
    sp = speedup(b, a)  # how many times faster a is than b
    if sp.has_ci:
        return bool(sp.low > 1.0)
    return bool(a.value < b.value)


def rank_with_ties(estimates: dict[str, Estimate], lower_is_better: bool = True) -> dict[str, int]:
    """Competition ranking by the tie rule (module docstring): 1 + the number of others shown
    better. Estimates without a finite value are not ranked."""
    est = {k: e for k, e in estimates.items() if math.isfinite(e.value)}
    return {k: 1 + sum(1 for j, ej in est.items() if j != k and _better(ej, e, lower_is_better))
            for k, e in est.items()}  # fmt: skip


def tied(a: Estimate, b: Estimate) -> bool:
    """True when neither is shown better than the other (the difference is within the noise)."""
    return not (_better(a, b) or _better(b, a))
