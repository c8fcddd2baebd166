"""Learning curves (issue 25, point 5): what a configuration's runs learned, against the
work they sampled and the time they took.

- ``learning_curves``: one row of two panels per comparison set (the runs table's
  ``workload``, else ``model``): the return against the env steps sampled so far and
  against wall-clock seconds since the job started, one colour per configuration.

A configuration's runs differ only in their seed, so its line is the mean over its runs,
with a 95 % band over the seeds where it has two or more: at each point ``x`` of a common
grid, the Student-t interval of the mean, mean ± t(0.975, n − 1) · sd / sqrt(n) over the
``n`` runs' returns at ``x`` (each run's curve interpolated linearly between the
iterations it measured). Runs are ragged (a run that reaches its target stops early, an
iteration bounded by time samples a varying number of env steps, the first iterations have
no finished episode), and a mean over the runs that happen to reach ``x`` would jump where
one run ends: the mean and its band cover only the x range every run has a return in, and
each run is drawn thin beside them over its whole length, so no run is hidden.

The grid is the union of the x values the runs measured inside that range (where runs of
a fixed batch sample the same env steps, the points measured, nothing interpolated), thinned
to :data:`GRID_POINTS` evenly spaced points where it holds more. The training return
(``episode_return_mean``, NaN until the first episode ends) is solid; the greedy
evaluation return (``eval_return_mean``, NaN between evaluations) is dashed with markers;
the target return (``FigureContext.targets``) is a dotted horizontal line. Every iteration
is drawn, warm-up ones included: warm-up is left out of timings, not of learning.

Matplotlib and seaborn are imported where they draw (:mod:`rlperf.report.figures.plot` says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.errors import FigureNotApplicable
from rlperf.report.figures.plot import FigureContext, config_palette, save, style, suptitle, wrap
from rlperf.results.columns import (
    ENV_STEPS,
    EPISODE_RETURN_MEAN,
    EVAL_RETURN_MEAN,
    ITERATION,
    TIME_S,
)
from rlperf.stats.intervals import CONFIDENCE
from rlperf.vocabulary import Family, RunStatus

#: Most points a mean curve is evaluated at (the union of the runs' x values, else evenly
#: spaced): enough for a smooth line, few enough for 100 configurations in one figure.
GRID_POINTS = 300

#: The two x axes: learning-table column -> axis label.
X_AXES = {"env_steps_total": "env steps sampled", TIME_S: "wall-clock time (s)"}

#: The returns drawn: iterations-table column -> (legend text, line style, marker).
RETURNS: dict[str, tuple[str, Any, str]] = {
    EPISODE_RETURN_MEAN: ("training return", "-", ""),
    EVAL_RETURN_MEAN: ("greedy evaluation return", "--", "o"),
}

Y_LABEL = "episode return (mean over the iteration's episodes)"

TARGET_COLOR = "#333333"


@dataclass(frozen=True)
class MeanCurve:
    """A configuration's mean return on a grid of x values, with its band over runs.

    ``low`` and ``high`` are NaN for a single run (no band); ``runs`` is how many runs
    the mean is over.
    """

    x: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    runs: int


def _finite(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points of a run where both x and the return are known, sorted by x."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    order = np.argsort(x[ok], kind="stable")
    return x[ok][order], y[ok][order]


def common_grid(curves: Sequence[tuple[np.ndarray, np.ndarray]], points: int = GRID_POINTS
                ) -> np.ndarray:  # fmt: skip
    """The x values where every run of ``curves`` ((x, return) pairs, finite, sorted) has
    data: the union of their x values between the latest first point and the earliest last
    point, or ``points`` evenly spaced values over that range where the union holds more.
    Empty where the runs do not overlap."""
    curves = [(x, y) for x, y in curves if len(x)]
    if not curves:
        return np.empty(0)
    lo = max(float(x[0]) for x, _ in curves)
    hi = min(float(x[-1]) for x, _ in curves)
    if lo > hi:
        return np.empty(0)
    union = np.unique(np.concatenate([x for x, _ in curves]))
    union = union[(union >= lo) & (union <= hi)]
    return union if len(union) <= points else np.linspace(lo, hi, points)


def mean_curve(curves: Sequence[tuple[np.ndarray, np.ndarray]], points: int = GRID_POINTS
               ) -> MeanCurve | None:  # fmt: skip
    """The mean over runs of their returns on :func:`common_grid`, with the Student-t
    interval of the mean at each grid point (level
    :data:`rlperf.stats.intervals.CONFIDENCE`).

    ``curves`` are (x, return) per run; points with a NaN x or return are left out and each
    run is interpolated linearly between the points it has. One run: its own points, no
    band. None where no run has a point, or where the runs share no x range.
    """
    runs = [_finite(x, y) for x, y in curves]
    runs = [(x, y) for x, y in runs if len(x)]
    if not runs:
        return None
    if len(runs) == 1:
        x, y = runs[0]
        nan = np.full(len(x), np.nan)
        return MeanCurve(x, y, nan, nan, 1)
    grid = common_grid(runs, points)
    if not len(grid):
        return None
    from scipy import stats

    values = np.vstack([np.interp(grid, x, y) for x, y in runs])
    n = len(runs)
    mean = values.mean(axis=0)
    half = stats.t.ppf(1 - (1 - CONFIDENCE) / 2, n - 1) * values.std(axis=0, ddof=1) / np.sqrt(n)
    return MeanCurve(grid, mean, mean - half, mean + half, n)


def learning_table(ctx: FigureContext) -> pd.DataFrame:
    """One row per completed training run and iteration: ``workload``, ``configuration``,
    ``label`` (the configuration's, for the legend), ``config`` (its colour key), ``cell``,
    ``iteration``, ``env_steps_total`` (the env steps sampled up to and including the
    iteration), ``time_s`` and the :data:`RETURNS` columns (NaN where absent).

    The identity comes from ``ctx.runs`` (``configuration``, ``workload``) joined on
    ``cell``; without them a run is its own configuration and its model its workload.
    """
    it = ctx.iterations
    if it.empty or "cell" not in it or ITERATION not in it:
        return pd.DataFrame()
    if "status" in it:
        it = it[it["status"].astype(str) == RunStatus.completed]
    meta = _run_identity(ctx, it)
    it = it.sort_values(["cell", ITERATION], kind="stable")
    steps = pd.to_numeric(it[ENV_STEPS], errors="coerce") if ENV_STEPS in it else None
    out = pd.DataFrame({
        "cell": it["cell"].astype(str).to_numpy(),
        ITERATION: it[ITERATION].to_numpy(),
        # A NaN env_steps leaves that iteration's x unknown; the sum carries on after it.
        "env_steps_total": (steps.groupby(it["cell"], sort=False).cumsum().to_numpy()
                            if steps is not None else np.nan),
        TIME_S: pd.to_numeric(it[TIME_S], errors="coerce").to_numpy()
        if TIME_S in it else np.nan,
        **{col: pd.to_numeric(it[col], errors="coerce").to_numpy() if col in it else np.nan
           for col in RETURNS},
    })  # fmt: skip
    return out.merge(meta, on="cell", how="left")


def _run_identity(ctx: FigureContext, it: pd.DataFrame) -> pd.DataFrame:
    """cell -> configuration, workload, config, label (see :func:`learning_table`)."""
    cols = [c for c in ("cell", "config", "model") if c in it]
    meta = it[cols].drop_duplicates("cell").astype({"cell": str}).set_index("cell")
    runs = ctx.runs
    if not runs.empty and "cell" in runs:
        extra = runs.drop_duplicates("cell").astype({"cell": str}).set_index("cell")
        for col in ("configuration", "workload", "config", "model"):
            if col in extra:
                values = extra[col].reindex(meta.index)
                meta[col] = values.where(_present(values), meta.get(col))
    cell = pd.Series(meta.index, index=meta.index)
    meta["configuration"] = _or(meta.get("configuration"), cell)
    meta["config"] = _or(meta.get("config"), meta["configuration"])
    meta["workload"] = _or(meta.get("workload"), _or(meta.get("model"), cell.map(lambda _: "")))
    labels = _configuration_labels(ctx.configurations)
    meta["label"] = [labels.get(conf) or cfg for conf, cfg in
                     zip(meta["configuration"], meta["config"], strict=True)]  # fmt: skip
    return meta[["configuration", "workload", "config", "label"]].astype(str).reset_index()


def _present(values: pd.Series) -> pd.Series:
    return values.notna() & (values.astype(str) != "")


def _or(values: pd.Series | None, fallback: pd.Series) -> pd.Series:
    """``values`` where present (not NaN, not empty), else ``fallback``."""
    if values is None:
        return fallback.astype(str)
    return values.where(_present(values), fallback).astype(str)


def _configuration_labels(configurations: pd.DataFrame) -> dict[str, str]:
    if configurations.empty or not {"configuration", "label"} <= set(configurations):
        return {}
    conf = configurations.dropna(subset=["configuration", "label"])
    return dict(zip(conf["configuration"].astype(str), conf["label"].astype(str), strict=True))


def learning_curves(ctx: FigureContext, out: Path) -> Path:
    """Return against env steps sampled and against wall-clock seconds, per comparison set
    and configuration (the module docstring says what the lines and bands are).

    Reads ``ctx.iterations`` (``iteration``, ``env_steps``, ``time_s``,
    ``episode_return_mean``, ``eval_return_mean``), ``ctx.runs`` (``configuration``,
    ``workload``), ``ctx.configurations`` (``label``) and ``ctx.targets``. Raises
    :class:`~rlperf.errors.FigureNotApplicable` when no completed training run has a
    return. Writes ``learning_curves.png`` and ``.svg`` under ``out``.
    """
    table = learning_table(ctx)
    if table.empty:
        raise FigureNotApplicable("no completed training cells")
    has_return = table[list(RETURNS)].notna().any(axis=1)
    if not has_return.any():
        raise FigureNotApplicable(
            "no training cell has a return (episode_return_mean and eval_return_mean are "
            "NaN in every iteration: no episode finished)"
        )
    # A comparison set none of whose runs finished an episode has nothing to draw.
    table = table[table["workload"].isin(set(table.loc[has_return, "workload"]))]
    workloads = sorted(table["workload"].unique())
    labels = sorted(table["label"].unique())
    fallback = config_palette(labels)
    colors = {lab: ctx.config_colors.get(cfg, fallback[lab])
              for lab, cfg in zip(table["label"], table["config"], strict=True)}  # fmt: skip
    from matplotlib.figure import Figure

    with style():
        fig = Figure(figsize=(13.0, 3.7 * len(workloads) + 1.0), layout="constrained")
        rows = fig.subfigures(len(workloads), 1, squeeze=False)[:, 0]
        for row, workload in zip(rows, workloads, strict=True):
            sub = table[table["workload"] == workload]
            axes = row.subplots(1, 2, sharey=True)
            handles = _draw_workload(axes, sub, colors, _targets(ctx, sub))
            row.suptitle(wrap(fig, workload, 9), x=0.01, ha="left", fontsize=9,
                         fontweight="bold")  # fmt: skip
            axes[1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1),
                           frameon=False, fontsize=7)  # fmt: skip
        pct = f"{100 * CONFIDENCE:g} %"
        suptitle(fig, "Learning curves per configuration: mean return over its runs (solid: "
                 f"training, dashed: greedy evaluation); bands: {pct} t intervals of the mean "
                 "over seeds where a configuration has 2 or more runs, on the x range every "
                 "run covers; thin lines: single runs")  # fmt: skip
        return save(fig, out, "learning_curves", ctx.mixed_note.get(Family.training, ""))


def _targets(ctx: FigureContext, sub: pd.DataFrame) -> list[float]:
    """The distinct target returns of the configurations in ``sub``."""
    found = {float(ctx.targets[c]) for c in sub["configuration"].unique() if c in ctx.targets}
    return sorted(t for t in found if np.isfinite(t))


def _draw_workload(axes: Sequence[Any], sub: pd.DataFrame, colors: dict[str, Any],
                   targets: list[float]) -> list[Any]:  # fmt: skip
    """Both panels of one comparison set; returns the legend's handles: one per
    configuration, then a key to the line styles drawn."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = []
    drawn: set[str] = set()  # the returns drawn, and "band" where a band was
    # By configuration, not by label: two configurations that read alike are never pooled.
    confs = sorted(sub.groupby("configuration", sort=False), key=lambda kv: kv[1]["label"].iloc[0])
    for _conf, conf in confs:
        label = str(conf["label"].iloc[0])
        runs = [g for _, g in conf.groupby("cell", sort=True)]
        for ax, xcol in zip(axes, X_AXES, strict=True):
            for ycol, (_name, ls, marker) in RETURNS.items():
                curves = [(g[xcol].to_numpy(), g[ycol].to_numpy()) for g in runs]
                some, banded = _draw_runs(ax, curves, colors[label], ls, marker)
                drawn |= {ycol} if some else set()
                drawn |= {"band"} if banded else set()
        n = len(runs)
        handles.append(Line2D([], [], color=colors[label], linewidth=1.8,
                              label=f"{label} ({n} runs)" if n > 1 else label))  # fmt: skip
    for ax, xlabel in zip(axes, X_AXES.values(), strict=True):
        for t in targets:
            ax.axhline(t, color=TARGET_COLOR, linestyle=":", linewidth=1.3, label=f"target {t:g}")
        ax.set_xlabel(xlabel)
        ax.set_xlim(left=0)
    axes[0].set_ylabel(Y_LABEL.replace(" (", "\n("))
    key: list[Any] = [
        Line2D([], [], color="black", linestyle=ls, marker=marker or None, markersize=3, label=name)
        for col, (name, ls, marker) in RETURNS.items()
        if col in drawn
    ]
    if "band" in drawn:
        key.append(Line2D([], [], color="black", linewidth=0.6, alpha=0.5, label="one run"))
        key.append(Patch(color="black", alpha=0.2, label=f"{100 * CONFIDENCE:g} % band over seeds"))
    key += [Line2D([], [], color=TARGET_COLOR, linestyle=":", linewidth=1.3, label=f"target {t:g}")
            for t in targets]  # fmt: skip
    return handles + key


def _draw_runs(ax: Any, curves: list[tuple[np.ndarray, np.ndarray]], color: Any, ls: str,
               marker: str) -> tuple[bool, bool]:  # fmt: skip
    """A configuration's runs on one panel: each run thin (where there are several), the
    mean over them and its band. Returns whether anything was drawn and whether a band."""
    runs = [_finite(x, y) for x, y in curves]
    runs = [(x, y) for x, y in runs if len(x)]
    if len(runs) > 1:
        for x, y in runs:
            ax.plot(x, y, color=color, linestyle=ls, linewidth=0.6, alpha=0.5)
    mc = mean_curve(runs)
    if mc is None:
        return bool(runs), False  # no point, or the runs share no x range: each run drawn
    ax.plot(mc.x, mc.mean, color=color, linestyle=ls, linewidth=1.8 if mc.runs > 1 else 1.4,
            marker=marker or None, markersize=3,
            markevery=max(1, len(mc.x) // 30))  # fmt: skip
    if mc.runs > 1:
        ax.fill_between(mc.x, mc.low, mc.high, color=color, alpha=0.2 if ls == "-" else 0.12,
                        linewidth=0)  # fmt: skip
    return True, mc.runs > 1
