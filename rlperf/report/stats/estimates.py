"""Rankings with ties: how the report orders configurations whose intervals overlap.

Every interval and ratio the report shows comes from :mod:`rlperf.stats.intervals` (one rule
per quantity, docs/report.md#statistics); this module only ranks them. The tie rule
(documented, not taken from a library): a cell's rank is 1 + the number of cells whose
whole interval lies strictly below (better than) its own, so cells whose intervals overlap
share a rank. A rank is a display, not a verdict: what is *decided* is said by
:mod:`rlperf.report.compare.decided`, across runs only.
"""

from __future__ import annotations

import numpy as np

from rlperf.stats.intervals import Estimate

#: What an interval over one run's own samples says wherever it appears: it describes that
#: run, not how far a second run would land (docs/report.md#repeats).
ONE_RUN = "one run: run-to-run spread not measured"


def rank_with_ties(estimates: dict[str, Estimate], lower_is_better: bool = True) -> dict[str, int]:
    """Competition ranking where overlapping intervals tie (see module docstring).

    Cells without an interval (fewer than 2 samples) are ranked by their point
    estimate alone, as if their interval were that point.
    """

    def bounds(e: Estimate) -> tuple[float, float]:
        lo, hi = (e.low, e.high) if e.has_ci else (e.value, e.value)
        return (lo, hi) if lower_is_better else (-hi, -lo)

    b = {k: bounds(e) for k, e in estimates.items() if np.isfinite(e.value)}
    return {
        k: 1 + sum(1 for j, (_, hj) in b.items() if j != k and hj < lo) for k, (lo, _) in b.items()
    }


def tied(a: Estimate, b: Estimate) -> bool:
    """True when the two intervals overlap (the difference is inside the noise)."""
    alo, ahi = (a.low, a.high) if a.has_ci else (a.value, a.value)
    blo, bhi = (b.low, b.high) if b.has_ci else (b.value, b.value)
    return bool(alo <= bhi and blo <= ahi)
