"""Legacy (RLlib 1.x) runs computed both ways: the study's and rlperf's.

The 2021 study read RLlib 1.1's ``timers/*`` (means over a sliding window of
the last 10 iterations, as logged) and averaged them over the iterations after
its warm-up cut (before the first finished episode). rlperf inverts the window
to get each iteration's own phase times (:func:`rlperf.report.read.legacy.dewindow`)
and averages those over the same iterations. Both use the study's warm-up
rule, and the time per iteration is RLlib's per-iteration ``time_this_iter_s``
either way, so rankings and speedups are the same; only the phase times
differ (``other_s``, the remainder, is left out: the study had no such
quantity, and the lagging window means do not add up to an iteration).
:func:`study_way_means` gives the study's numbers for ``runs.csv``
(``<phase>_study_mean``), :func:`side_by_side` the report's table and
:func:`legacy_text` one finding per model, so a reader can check the report
against the study's published numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from rlperf.report.compare.axes import within_set
from rlperf.report.read.cells import PHASES, Cell, included
from rlperf.results.columns import LEARN_S, OTHER_S

#: The phases RLlib 1.x timed with a window (``other_s`` is the remainder of ``iter_s``).
WINDOWED = tuple(p for p in PHASES if p != OTHER_S)


def study_way_means(cell: Cell) -> dict[str, Any]:
    """``<phase>_study_mean``: the phase means the study's way (window means over the
    non-warm-up iterations), for a legacy run that has its logged window means."""
    df = cell.iterations
    if cell.source != "legacy" or df is None or f"{WINDOWED[0]}_win10" not in df:
        return {}
    kept = included(df)
    return {f"{p}_study_mean": float(kept[f"{p}_win10"].mean()) for p in WINDOWED}


def _cell(study: float, ours: float) -> str:
    if not (np.isfinite(study) and np.isfinite(ours)):
        return ""
    diff = f" ({_pct(study, ours):+.1f}%)" if study else ""
    return f"{study:.3g} / {ours:.3g}{diff}"


def side_by_side(rows: pd.DataFrame) -> pd.DataFrame:
    """The report's table for legacy training configurations (rows of ``configurations``):
    per phase, the study's mean / rlperf's mean (rlperf's difference from the study)."""
    if "learn_s_study_mean" not in rows:
        return pd.DataFrame()
    rows = rows[rows["learn_s_study_mean"].notna()]
    out = pd.DataFrame(
        {
            "configuration": within_set(list(rows["config"])),
            "time/iter s (both)": rows["iter_s_mean"].map(lambda v: f"{v:.4g}").to_numpy(),
        }
    )
    for p in WINDOWED:
        out[f"{p.removesuffix('_s')} s: study / rlperf (Δ)"] = [
            _cell(s, o) for s, o in zip(rows[f"{p}_study_mean"], rows[f"{p}_mean"], strict=True)
        ]
    return out


def both_ways(runs: Sequence[Cell]) -> dict[str, tuple[float, float]]:
    """phase -> (the study's mean, rlperf's mean) over legacy runs (averaged over the runs);
    empty when the runs have no logged window means."""
    study = [study_way_means(c) for c in runs]
    if not runs or not all(study):
        return {}
    ours = [included(c.iterations) for c in runs if c.iterations is not None]
    return {
        p: (float(np.mean([s[f"{p}_study_mean"] for s in study])),
            float(np.mean([o[p].mean() for o in ours])))
        for p in WINDOWED
    }  # fmt: skip


def legacy_text(
    family: str, model: str, ranked: Sequence[tuple[str, str, list[Cell]]]
) -> tuple[str, str]:
    """The finding on one model's legacy configurations both ways (``ranked``: configuration
    id, label and completed runs, best first): (the configuration it names, its text), or
    empty strings without legacy runs."""
    legacy = [(cid, label, both_ways(runs)) for cid, label, runs in ranked]
    legacy = [(cid, label, means) for cid, label, means in legacy if means]
    if not legacy:
        return "", ""
    best, label, means = legacy[0]
    phases = sorted(WINDOWED, key=lambda p: -means[p][0])[:2]
    both = ", ".join(
        f"{p.removesuffix('_s')} {means[p][0]:.2f} s the study's way vs {means[p][1]:.2f} s "
        f"per iteration ({_pct(*means[p]):+.1f}%)"
        for p in phases
    )
    learn = [_pct(*m[LEARN_S]) for _, _, m in legacy]
    return best, (
        f"{family.capitalize()}, {model}, legacy RLlib 1.x data both ways: for the fastest "
        f"configuration `{label}` (cell `{best}`), {both}. Across its {len(legacy)} legacy "
        f"configuration(s) rlperf's per-iteration learn time differs from the study's by "
        f"{min(learn):+.1f}% to {max(learn):+.1f}%."
    )


#: How the two ways differ, said once under the legacy findings.
LEGACY_METHOD = (
    "The study's way averages RLlib's 10-iteration window means after the first finished "
    "episode; rlperf inverts the window. Time per iteration (`time_this_iter_s`), rankings "
    "and speedups are the same both ways."
)


def legacy_learn_range(ranked: Sequence[tuple[str, str, list[Cell]]]) -> tuple[float, float] | None:
    """The smallest and largest difference (%) of rlperf's per-iteration learn time from the
    study's way over one model's legacy configurations; None without legacy runs."""
    learn = [_pct(*means[LEARN_S]) for _, _, runs in ranked if (means := both_ways(runs))]
    return (min(learn), max(learn)) if learn else None


def _pct(study: float, ours: float) -> float:
    return 100 * (ours - study) / study if study else float("nan")
