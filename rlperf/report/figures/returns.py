"""Figures of returns compared across groups (variants, algorithms, trials, seeds).

- ``return_profiles``: left, each group's IQM of the return with its stratified-bootstrap
  95 % interval; right, each group's performance profile (fraction of runs scoring above
  tau) with its bootstrap band. Both name the unit the runs are counted in (seed or
  episode, :func:`rlperf.report.stats.robust.unit_of`).

The statistics are :mod:`rlperf.report.stats.robust`'s (Agarwal et al. 2021). Matplotlib and
seaborn are imported where they draw (:mod:`rlperf.report.figures.plot` says why).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlperf.errors import FigureNotApplicable
from rlperf.report.compare.returns import ReturnComparison
from rlperf.report.figures.plot import config_palette, save, style, suptitle
from rlperf.report.stats.robust import (
    LEVEL,
    REPS,
    group_seed,
    iqm,
    performance_profile,
    runs_by_tasks,
    stratified_bootstrap_ci,
)

#: Most thresholds tau a profile is drawn at (below it: every distinct score).
PROFILE_POINTS = 200


def profile_taus(arrays: Sequence[np.ndarray], points: int = PROFILE_POINTS) -> np.ndarray:
    """Thresholds at which profiles are drawn, as steps from each tau to the next.

    Every distinct score, and one just below the lowest, where there are at most
    ``points``: the fraction of runs scoring above tau only changes at a score, so the
    steps are the exact profile (returns are often whole numbers, with many ties).
    Otherwise ``points`` evenly spaced over the same range. Every profile starts at 1
    and ends at 0, so the curves can be read against each other end to end.
    """
    values = np.unique(np.concatenate([a.ravel() for a in arrays]))
    low, high = float(values[0]), float(values[-1])
    pad = 0.02 * (high - low) if high > low else max(1.0, abs(low)) * 0.05
    if len(values) < points:
        return np.concatenate([[low - pad], values])
    return np.linspace(low - pad, high, points)


def return_profiles(
    groups: Mapping[str, np.ndarray | Sequence[float]],
    unit: str,
    out: Path,
    name: str,
    title: str,
    *,
    colors: Mapping[str, Any] | None = None,
    reps: int = REPS,
    seed: int = 0,
    note: str = "",
) -> Path:
    """IQM per group (horizontal, with intervals) beside the groups' performance profiles.

    ``groups`` maps a label to its returns, 1-d (one per seed or episode) or runs x tasks,
    as :func:`rlperf.report.stats.robust.compare_returns` takes them; ``unit`` is ``"seed"`` or
    ``"episode"``. ``colors`` (label -> colour) keeps a report's colours; by default
    :func:`rlperf.report.figures.plot.config_palette`. Groups without a finite score are left
    out; none at all raises :class:`~rlperf.errors.FigureNotApplicable`. Writes
    ``<name>.png`` and ``.svg`` under ``out`` and returns the PNG's path.
    """
    from matplotlib.figure import Figure

    arrays = {str(k): runs_by_tasks(v) for k, v in groups.items()}
    arrays = {k: a for k, a in arrays.items() if a.size}
    if not arrays:
        raise FigureNotApplicable("no group has a finite return")
    labels = list(arrays)
    pal = dict(colors) if colors is not None else config_palette(labels)
    taus = profile_taus(list(arrays.values()))
    pct = f"{LEVEL:.0%}".replace("%", " %")
    with style():
        height = max(3.8, 1.6 + 0.38 * len(labels))
        fig = Figure(figsize=(11.0, height), layout="constrained")
        left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.0, 1.35]})
        for i, label in enumerate(labels):
            arr = arrays[label]
            est = stratified_bootstrap_ci(arr, iqm, reps, group_seed(seed, label), unit=unit)
            err = np.nan_to_num([[est.value - est.low], [est.high - est.value]], nan=0.0)
            left.errorbar([est.value], [i], xerr=err, fmt="o", color=pal[label], capsize=4,
                          linewidth=1.6)  # fmt: skip
            frac, lo, hi = performance_profile(arr, taus, reps, group_seed(seed, label))
            right.plot(taus, frac, color=pal[label], linewidth=1.6, label=label,
                       drawstyle="steps-post")  # fmt: skip
            if np.isfinite(lo).all():
                right.fill_between(taus, lo, hi, color=pal[label], alpha=0.18, linewidth=0,
                                   step="post")  # fmt: skip
        left.set_yticks(range(len(labels)), [f"{k} (n={len(arrays[k])})" for k in labels])
        left.set_ylim(len(labels) - 0.5, -0.5)  # first group on top, as in the tables
        left.set_xlabel(f"IQM of episode return ({pct} interval); unit: {unit}")
        left.set_title("interquartile mean", loc="left", fontweight="bold")
        right.set_xlabel(f"episode return τ; unit: {unit}")
        right.set_ylabel(f"fraction of {unit}s with return > τ")
        right.set_ylim(-0.02, 1.02)
        right.set_title(f"performance profiles ({pct} bands)", loc="left", fontweight="bold")
        right.legend(loc="best", fontsize=7, frameon=True, framealpha=0.85)
        suptitle(fig, title)
        return save(fig, out, name, note)


def draw(comparisons: Sequence[ReturnComparison], out: Path) -> dict[str, Path]:
    """Each comparison's IQM-and-profiles figure (``returns_<n>.png``); name -> path."""
    drawn = {}
    out.mkdir(parents=True, exist_ok=True)
    for i, rc in enumerate(comparisons, 1):
        name = f"returns_{i}"
        try:
            rc.figure = return_profiles(rc.groups, rc.unit, out, name, rc.title)
        except FigureNotApplicable:
            continue
        drawn[name] = rc.figure
    return drawn
