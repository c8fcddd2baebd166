"""Figures of training cells: where an iteration's time goes, utilisation, and how the
time per iteration scales with the number of env runners.

- ``phase_times``: time per iteration split into sample / load / learn / sync / other,
  stacked, with the share of each phase;
- ``phase_breakdown``: each phase per configuration (mean ± sd over iterations, runs pooled);
- ``utilisation``: CPU, RAM, GPU and GPU-memory utilisation per configuration;
- ``iter_time_vs_workers``: the configurations' objective (its name and unit on the axis)
  against the number of workers, with each configuration's interval (run to run where it
  ran several times).

Matplotlib and seaborn are imported where they draw (:mod:`rlperf.report.figures.plot` says why).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.errors import FigureNotApplicable
from rlperf.report.compare.axes import within_set
from rlperf.report.compare.findings import level
from rlperf.report.figures.plot import (
    PHASE_COLORS,
    PHASE_NAMES,
    RESOURCE_COLORS,
    FigureContext,
    completed_configurations,
    config_palette,
    grid,
    interval_errors,
    kept,
    models_of,
    objective_label,
    save,
    style,
    suptitle,
    wrap,
)
from rlperf.results.columns import CPU_UTIL_PCT, PHASES, RAM_UTIL_PCT
from rlperf.vocabulary import Family


def phase_times(ctx: FigureContext, out: Path) -> Path:
    """Stacked bars of the mean phase times per configuration, with each phase's share.

    A bar more than three times the median total is cut at the axis end and labelled
    with its full length, so one very slow configuration does not flatten the rest.
    """
    df = kept(ctx.iterations) if not ctx.iterations.empty else ctx.iterations
    if df.empty:
        raise FigureNotApplicable("no completed training cells")
    models = models_of(df)
    means = df.groupby(["model", "config"], observed=True)[list(PHASE_NAMES)].mean()
    with style():
        fig, axes = grid([len(ctx.order[(Family.training, m)]) for m in models], 1, col_width=7.5)
        for ax, model in zip(axes[:, 0], models, strict=True):
            order = ctx.order[(Family.training, model)]
            _stack_phases(ax, means.loc[model].reindex(order).fillna(0.0).clip(lower=0.0))
            ax.set_yticks(np.arange(len(order)), within_set(order))
            ax.set_ylim(len(order) - 0.5, -0.5)
            ax.set_xlabel("mean time per iteration (s)")
            ax.set_title(model, loc="left", fontweight="bold")
            ax.grid(axis="y", visible=False)
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(
            handles,
            labels,
            loc="outside upper center",
            ncols=5,
            frameon=False,
            title=wrap(
                fig,
                "Where an iteration's time goes (mean of non-warm-up iterations; "
                "% = share of the iteration; ▸ = bar cut)",
                9,
            ),
            title_fontsize=9,
        )
        return save(fig, out, "phase_times", ctx.mixed_note.get(Family.training, ""))


def _stack_phases(ax: Any, means: pd.DataFrame) -> None:
    """One stacked bar per row of ``means`` (configurations x phases): each phase's share
    inside its segment, the total at the end; bars over 3x the median total are cut."""
    totals = means.sum(axis=1).to_numpy()
    limit = 3 * float(np.median(totals))
    inside = totals[totals <= limit]
    xmax = 1.18 * float(inside.max() if inside.size else totals.max()) or 1.0
    left = np.zeros(len(means))
    y = np.arange(len(means))
    for phase, name in PHASE_NAMES.items():
        widths = means[phase].to_numpy()
        ax.barh(y, widths, left=left, color=PHASE_COLORS[phase], label=name,
                edgecolor="white", linewidth=0.5, height=0.72)  # fmt: skip
        for yi, (l0, w, tot) in enumerate(zip(left, widths, totals, strict=True)):
            shown = min(l0 + w, xmax) - min(l0, xmax)
            if tot > 0 and shown / xmax > 0.06:
                ax.text(min(l0, xmax) + shown / 2, yi, f"{100 * w / tot:.0f}%",
                        ha="center", va="center", fontsize=7, color="white")  # fmt: skip
        left = left + widths
    for yi, tot in enumerate(totals):
        if tot > xmax:
            ax.text(xmax, yi, f"{tot:.1f} s ▸ ", va="center", ha="right", fontsize=7,
                    color="white", fontweight="bold")  # fmt: skip
        else:
            ax.text(tot, yi, f" {tot:.2f} s", va="center", fontsize=7)
    ax.set_xlim(0, xmax)


def _bar_grid(
    ctx: FigureContext,
    out: Path,
    df: pd.DataFrame,
    columns: list[tuple[str, str, Any]],
    family: str,
    title: str,
    name: str,
    xlim: tuple[float, float] | None = None,
) -> Path:
    """Horizontal bars (mean, error bar = sd over iterations), one column per metric."""
    import seaborn as sns

    models = models_of(df)
    with style():
        fig, axes = grid([len(ctx.order[(family, m)]) for m in models], len(columns), col_width=2.4)
        for r, model in enumerate(models):
            sub = df[df["model"] == model]
            order = ctx.order[(family, model)]
            for c, (col, xlabel, color) in enumerate(columns):
                ax = axes[r, c]
                data = sub[["config", col]].dropna()
                if data.empty:
                    ax.set_yticks(range(len(order)), [])
                    ax.text(
                        0.5,
                        0.5,
                        "not recorded",
                        transform=ax.transAxes,
                        ha="center",
                        color="#888888",
                    )
                else:
                    sns.barplot(
                        data=data,
                        x=col,
                        y="config",
                        order=order,
                        color=color,
                        errorbar="sd",
                        ax=ax,
                        err_kws={"linewidth": 0.8},
                    )
                ax.set_xlabel(xlabel)
                ax.set_ylabel("")
                if xlim:
                    ax.set_xlim(*xlim)
                elif not data.empty:
                    _cut_long_bars(ax, data.groupby("config", observed=True)[col].mean(), order)
                if c:
                    ax.tick_params(labelleft=False)
                if c == 0:
                    ax.set_yticks(range(len(order)), within_set(order))
                    ax.set_title(model, loc="left", fontweight="bold")
        suptitle(fig, title)
        return save(fig, out, name, ctx.mixed_note.get(family, ""))


def _cut_long_bars(ax: Any, means: pd.Series, order: list[str]) -> None:
    """Cut bars longer than 3x the median at the axis end and print their value."""
    vals = means.reindex(order).to_numpy(dtype=float)
    finite = vals[np.isfinite(vals)]
    if finite.size < 3:
        return
    limit = 3 * float(np.median(finite))
    inside = finite[finite <= limit]
    if limit <= 0 or not inside.size or finite.max() <= limit:
        return
    xmax = 1.25 * float(inside.max())
    ax.set_xlim(0, xmax)
    for yi, v in enumerate(vals):
        if np.isfinite(v) and v > xmax:
            ax.text(
                xmax,
                yi,
                f"{v:.3g} ▸ ",
                va="center",
                ha="right",
                fontsize=7,
                color="white",
                fontweight="bold",
            )


def phase_breakdown(ctx: FigureContext, out: Path) -> Path:
    """Sample / load / learn / sync time per configuration (mean ± sd over the iterations of
    all its runs)."""
    df = kept(ctx.iterations) if not ctx.iterations.empty else ctx.iterations
    if df.empty:
        raise FigureNotApplicable("no completed training cells")
    cols = [(p, f"{PHASE_NAMES[p]} time (s)", PHASE_COLORS[p]) for p in PHASES]
    return _bar_grid(
        ctx,
        out,
        df,
        cols,
        Family.training,
        "Time per phase and iteration (bar: mean, line: ± sd over the non-warm-up iterations "
        "of all runs of a configuration)",
        "phase_breakdown",
    )


def utilisation(ctx: FigureContext, out: Path) -> Path:
    """CPU, RAM, GPU and GPU-memory utilisation per configuration (mean ± sd over the
    iterations of all its runs)."""
    df = kept(ctx.iterations) if not ctx.iterations.empty else ctx.iterations
    if df.empty:
        raise FigureNotApplicable("no completed training cells")
    cols: list[tuple[str, str, Any]] = [
        (CPU_UTIL_PCT, "CPU utilisation (%)", RESOURCE_COLORS["CPU"]),
        (RAM_UTIL_PCT, "RAM in use (%)", RESOURCE_COLORS["RAM"]),
    ]
    gpus = sorted(
        {c.split("_")[0] for c in df.columns if re.fullmatch(r"gpu\d+_.*_pct", c)},
        key=lambda g: int(g.removeprefix("gpu")),
    )
    for g in gpus:
        i = g.removeprefix("gpu")
        cols += [
            (f"{g}_util_pct", f"GPU {i} utilisation (%)", RESOURCE_COLORS["GPU"]),
            (f"{g}_mem_util_pct", f"GPU {i} memory busy (%)", RESOURCE_COLORS["GPU memory"]),
            (f"{g}_mem_used_pct", f"GPU {i} memory in use (%)", RESOURCE_COLORS["GPU memory"]),
        ]
    cols = [(c, t, k) for c, t, k in cols if c in df and df[c].notna().any()]
    if not cols:
        raise FigureNotApplicable("no utilisation columns recorded")
    return _bar_grid(
        ctx,
        out,
        df,
        cols,
        Family.training,
        "Utilisation during training (bar: mean, line: ± sd over the non-warm-up iterations "
        "of all runs of a configuration)",
        "utilisation",
        xlim=(0, 100),
    )


def iter_time_vs_workers(ctx: FigureContext, out: Path) -> Path:
    """The configurations' objective against the number of env runners, one line per other
    setting; error bars are the configurations' intervals (run to run where a configuration
    ran several times). The y axis names the objective and its unit (:func:`objective_label`);
    the legend sits to the right of the axes, the fingerprint note under them."""
    df = completed_configurations(ctx, Family.training)
    if df.empty or "workers" not in df:
        raise FigureNotApplicable("no completed training cells with a workers axis")
    spread = df.groupby(["model", "config_wo_workers"], observed=True)["workers"].transform(
        "nunique"
    )
    df = df[spread > 1]
    models = sorted(df["model"].astype(str).unique())
    if not models:
        raise FigureNotApplicable("no configuration was run with more than one number of workers")
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    ncols = min(3, len(models))
    nrows = -(-len(models) // ncols)
    hues = sorted(df["config_wo_workers"].unique())
    pal = config_palette(hues)
    ylabel = objective_label(df)
    with style():
        fig = Figure(figsize=(4.2 * ncols + 3.4, 3.4 * nrows + 1.0), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False)
        for ax in axes.flat[len(models) :]:
            ax.set_axis_off()
        for ax, model in zip(axes.flat, models, strict=False):
            sub = df[df["model"] == model]
            for hue, line in sub.groupby("config_wo_workers", observed=True):
                _workers_line(ax, line.sort_values("workers"), pal[hue])
            _workers_axis(ax, sorted(int(w) for w in sub["workers"].unique()))
            if sub["objective_value"].max() > 10 * max(sub["objective_value"].min(), 1e-9):
                ax.set_yscale("log")
            ax.set_ylabel(ylabel)
            ax.set_title(model, loc="left", fontweight="bold")
        handles = [Line2D([], [], color=pal[h], marker="o", label=h) for h in hues]
        # On the top-right axes, outside them: constrained layout makes room for an axes'
        # legend below the title (a figure legend "outside right" rises into the title).
        axes.flat[ncols - 1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1),
                                    frameon=False, fontsize=8, title="other settings",
                                    title_fontsize=8)  # fmt: skip
        suptitle(fig, f"{ylabel} vs workers (mean; bars: {level()} intervals, run to run where "
                 "a configuration ran several times: n runs marked)")  # fmt: skip
        return save(fig, out, "iter_time_vs_workers", ctx.mixed_note.get(Family.training, ""))


def _workers_axis(ax: Any, workers: list[int]) -> None:
    """Ticks at the measured worker counts (whole numbers), on a log-2 scale where they
    span a factor 4 or more and none is 0 (``workers=0``: the driver samples)."""
    if workers[0] > 0 and workers[-1] >= 4 * workers[0]:
        ax.set_xscale("log", base=2)
    ax.set_xticks(workers, [str(w) for w in workers])
    ax.minorticks_off()
    ax.set_xlabel("env runners (workers)")


def _workers_line(ax: Any, line: pd.DataFrame, color: Any) -> None:
    """One setting's configurations against workers, with interval bars and run counts."""
    x = line["workers"].to_numpy(dtype=float)
    y = line["objective_value"].to_numpy(dtype=float)
    ax.errorbar(x, y, yerr=interval_errors(line), color=color, marker="o", capsize=3, linewidth=1.2)
    for xi, yi, n in zip(x, y, line["repeats"], strict=True):
        if pd.notna(n) and int(n) > 1:
            ax.annotate(f"{int(n)} runs", (xi, yi), xytext=(4, 4), textcoords="offset points",
                        fontsize=7, color="#333333")  # fmt: skip
