"""Figures, one per question the study asked (docs/study.md), in one visual language.

- ``phase_times``: time per iteration split into sample / load / learn / sync / other,
  stacked, with the share of each phase;
- ``phase_breakdown``: each phase per configuration (mean ± sd over iterations, runs pooled);
- ``utilisation``: CPU, RAM, GPU and GPU-memory utilisation per configuration;
- ``iter_time_vs_workers``: time per iteration against the number of workers, with each
  configuration's interval (run to run where it ran several times);
- ``intervals``: every configuration's objective with its interval and number of runs;
- ``gpu_power``: GPU board power over each run (``telemetry.csv``);
- ``latency``: latency per action per configuration / backend (box: quartiles, whiskers
  1st-99th percentile), with p50 and p99 marked;
- ``fidelity_latency``: greedy-action agreement against latency for exported variants.
- ``compression_tradeoff``: mean return against latency per variant, marker area = model size.

Facets: one row (or column) per model when several are present. Colours: one
fixed colour per phase, per backend and per resource; configurations get one
colour each, the same in every figure of a report; bars are ordered fastest
first, in the order of the findings. Matplotlib is used through
``Figure`` objects (no pyplot global state), drawn by the Agg canvas.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.report.objectives import objective_of

PHASE_NAMES = {
    "sample_s": "sample",
    "load_s": "load",
    "learn_s": "learn",
    "sync_s": "sync",
    "other_s": "other",
}
PHASE_COLORS = {
    "sample_s": "#0173b2",
    "load_s": "#de8f05",
    "learn_s": "#029e73",
    "sync_s": "#d55e00",
    "other_s": "#949494",
}
BACKEND_ORDER = ["rllib", "tflite_fp32", "tflite_fp16", "tflite_dynamic", "tflite_int8", "edgetpu"]
BACKEND_COLORS = {
    "rllib": "#0173b2",
    "tflite_fp32": "#029e73",
    "tflite_fp16": "#56b4e9",
    "tflite_dynamic": "#cc78bc",
    "tflite_int8": "#de8f05",
    "edgetpu": "#d55e00",
}
RESOURCE_COLORS = {"CPU": "#0173b2", "RAM": "#949494", "GPU": "#029e73", "GPU memory": "#de8f05"}
DPI = 110


class NotApplicable(Exception):
    """The data holds nothing this figure could show (the reason is the message)."""


@dataclass
class FigureContext:
    """What every figure function needs: tidy data, orders, palettes, warnings."""

    iterations: pd.DataFrame
    latency: pd.DataFrame
    runs: pd.DataFrame
    order: dict[tuple[str, str], list[str]]
    config_colors: dict[str, Any]
    mixed_note: dict[str, str] = field(default_factory=dict)
    configurations: pd.DataFrame = field(default_factory=pd.DataFrame)
    power: pd.DataFrame = field(default_factory=pd.DataFrame)  # cell, label, config, ...
    power_note: str = ""  # why no run has GPU power


def _models(df: pd.DataFrame) -> list[str]:
    return sorted(df["model"].dropna().astype(str).unique())


def _kept(df: pd.DataFrame) -> pd.DataFrame:
    return df.loc[df["excluded"].eq("") & (df["status"] == "completed")]


def config_palette(configs: Sequence[str]) -> dict[str, Any]:
    """One colour per configuration label, stable for a given set of labels."""
    import seaborn as sns

    uniq = sorted(set(configs))
    base = (
        sns.color_palette("colorblind", 10)
        if len(uniq) <= 10
        else sns.color_palette("husl", len(uniq))
    )
    return {c: base[i % len(base)] for i, c in enumerate(uniq)}


def _backend_palette(backends: Sequence[str]) -> dict[str, Any]:
    import seaborn as sns

    extra = [b for b in sorted(set(backends)) if b not in BACKEND_COLORS]
    pal = dict(BACKEND_COLORS)
    for b, c in zip(extra, sns.color_palette("dark", len(extra)), strict=False):
        pal[b] = c
    return pal


def _grid(
    n_rows_items: Sequence[int],
    ncols: int,
    col_width: float = 4.0,
    row_unit: float = 0.32,
) -> tuple[Any, np.ndarray]:
    from matplotlib.figure import Figure

    heights = [max(1.6, 0.9 + row_unit * n) for n in n_rows_items]
    label_room = 2.8
    fig = Figure(figsize=(label_room + col_width * ncols, sum(heights) + 1.2), layout="constrained")
    axes = fig.subplots(len(heights), ncols, squeeze=False, gridspec_kw={"height_ratios": heights})
    return fig, axes


def _save(fig: Any, out: Path, name: str, note: str = "") -> Path:
    # Constrained layout reserves room for the supxlabel; no bbox_inches="tight", which
    # would cost one more full draw per file.
    if note:
        fig.supxlabel(note, x=0.0, ha="left", fontsize=8, color="#a00000")
    png = out / f"{name}.png"
    fig.savefig(png, dpi=DPI)
    fig.savefig(out / f"{name}.svg")
    return png


def _style() -> Any:
    import contextlib

    import seaborn as sns

    stack = contextlib.ExitStack()
    stack.enter_context(sns.axes_style("whitegrid"))
    stack.enter_context(sns.plotting_context("notebook", font_scale=0.8))
    return stack


def phase_times(ctx: FigureContext, out: Path) -> Path:
    """Stacked bars of the mean phase times per configuration, with each phase's share.

    A bar more than three times the median total is cut at the axis end and labelled
    with its full length, so one very slow configuration does not flatten the rest.
    """
    df = _kept(ctx.iterations) if not ctx.iterations.empty else ctx.iterations
    if df.empty:
        raise NotApplicable("no completed training cells")
    models = _models(df)
    means = df.groupby(["model", "config"], observed=True)[list(PHASE_NAMES)].mean()
    with _style():
        fig, axes = _grid([len(ctx.order[("training", m)]) for m in models], 1, col_width=7.5)
        for ax, model in zip(axes[:, 0], models, strict=True):
            order = ctx.order[("training", model)]
            _stack_phases(ax, means.loc[model].reindex(order).fillna(0.0).clip(lower=0.0))
            ax.set_yticks(np.arange(len(order)), order)
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
            title="Where an iteration's time goes (mean of non-warm-up iterations; "
            "% = share of the iteration; ▸ = bar cut)",
            title_fontsize=9,
        )
        return _save(fig, out, "phase_times", ctx.mixed_note.get("training", ""))


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

    models = _models(df)
    with _style():
        fig, axes = _grid(
            [len(ctx.order[(family, m)]) for m in models], len(columns), col_width=2.4
        )
        for r, model in enumerate(models):
            sub = df[df["model"] == model]
            order = ctx.order[(family, model)]
            for c, (col, xlabel, color) in enumerate(columns):
                ax = axes[r, c]
                data = sub[["config", col]].dropna()
                if data.empty:
                    ax.set_yticks(range(len(order)), order if c == 0 else [])
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
                    ax.set_title(model, loc="left", fontweight="bold")
        fig.suptitle(title, fontsize=10)
        return _save(fig, out, name, ctx.mixed_note.get(family, ""))


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
    df = _kept(ctx.iterations) if not ctx.iterations.empty else ctx.iterations
    if df.empty:
        raise NotApplicable("no completed training cells")
    cols = [
        (p, f"{PHASE_NAMES[p]} time (s)", PHASE_COLORS[p])
        for p in ("sample_s", "load_s", "learn_s", "sync_s")
    ]
    return _bar_grid(
        ctx,
        out,
        df,
        cols,
        "training",
        "Time per phase and iteration (bar: mean, line: ± sd over the non-warm-up iterations "
        "of all runs of a configuration)",
        "phase_breakdown",
    )


def utilisation(ctx: FigureContext, out: Path) -> Path:
    """CPU, RAM, GPU and GPU-memory utilisation per configuration (mean ± sd over the
    iterations of all its runs)."""
    df = _kept(ctx.iterations) if not ctx.iterations.empty else ctx.iterations
    if df.empty:
        raise NotApplicable("no completed training cells")
    cols: list[tuple[str, str, Any]] = [
        ("cpu_util_pct", "CPU utilisation (%)", RESOURCE_COLORS["CPU"]),
        ("ram_util_pct", "RAM in use (%)", RESOURCE_COLORS["RAM"]),
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
        raise NotApplicable("no utilisation columns recorded")
    return _bar_grid(
        ctx,
        out,
        df,
        cols,
        "training",
        "Utilisation during training (bar: mean, line: ± sd over the non-warm-up iterations "
        "of all runs of a configuration)",
        "utilisation",
        xlim=(0, 100),
    )


def _completed_configurations(ctx: FigureContext, family: str | None = None) -> pd.DataFrame:
    """Completed configurations with a finite objective (of ``family``, or all)."""
    df = ctx.configurations
    if df.empty or "objective_value" not in df:
        return df.iloc[0:0]
    keep = (df["status"] == "completed") & df["objective_value"].notna()
    if family is not None:
        keep &= df["family"] == family
    return df[keep]


def _errors(sub: pd.DataFrame) -> np.ndarray:
    """Lower and upper error-bar lengths from the objective's interval (0 without one)."""
    value = sub["objective_value"].to_numpy(dtype=float)
    low = sub["objective_ci_low"].to_numpy(dtype=float)
    high = sub["objective_ci_high"].to_numpy(dtype=float)
    return np.nan_to_num(np.vstack([value - low, high - value]), nan=0.0)


def _runs_label(config: str, runs: Any) -> str:
    return f"{config} ({int(runs)} runs)" if pd.notna(runs) and int(runs) > 1 else config


def iter_time_vs_workers(ctx: FigureContext, out: Path) -> Path:
    """Time per iteration against the number of env runners, one line per other setting;
    error bars are the configurations' intervals (run to run where a configuration ran
    several times)."""
    df = _completed_configurations(ctx, "training")
    if df.empty or "workers" not in df:
        raise NotApplicable("no completed training cells with a workers axis")
    spread = df.groupby(["model", "config_wo_workers"], observed=True)["workers"].transform(
        "nunique"
    )
    df = df[spread > 1]
    models = sorted(df["model"].astype(str).unique())
    if not models:
        raise NotApplicable("no configuration was run with more than one number of workers")
    from matplotlib.figure import Figure

    ncols = min(3, len(models))
    nrows = -(-len(models) // ncols)
    hues = sorted(df["config_wo_workers"].unique())
    pal = config_palette(hues)
    with _style():
        fig = Figure(figsize=(4.2 * ncols + 2.5, 3.4 * nrows + 0.6), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False)
        for ax in axes.flat[len(models) :]:
            ax.set_axis_off()
        for ax, model in zip(axes.flat, models, strict=False):
            sub = df[df["model"] == model]
            for hue, line in sub.groupby("config_wo_workers", observed=True):
                _workers_line(ax, line.sort_values("workers"), pal[hue])
            ticks = sorted(sub["workers"].astype(float).unique())
            if sub["objective_value"].max() > 10 * max(sub["objective_value"].min(), 1e-9):
                ax.set_yscale("log")
            ax.set_xscale("log", base=2)
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.minorticks_off()
            ax.set_xlabel("env runners (workers)")
            ax.set_ylabel("time per iteration (s)")
            ax.set_title(model, loc="left", fontweight="bold")
        from matplotlib.lines import Line2D

        handles = [Line2D([], [], color=pal[h], marker="o", label=h) for h in hues]
        fig.legend(handles=handles, loc="outside lower center", ncols=min(3, len(handles)),
                   frameon=False, fontsize=8, title="other settings", title_fontsize=8)  # fmt: skip
        fig.suptitle(
            f"Time per iteration vs workers (mean; bars: {_level()} intervals, run to run where "
            "a configuration ran several times: n runs marked)",
            fontsize=10,
        )
        return _save(fig, out, "iter_time_vs_workers", ctx.mixed_note.get("training", ""))


def _workers_line(ax: Any, line: pd.DataFrame, color: Any) -> None:
    """One setting's configurations against workers, with interval bars and run counts."""
    x = line["workers"].to_numpy(dtype=float)
    y = line["objective_value"].to_numpy(dtype=float)
    ax.errorbar(x, y, yerr=_errors(line), color=color, marker="o", capsize=3, linewidth=1.2)
    for xi, yi, n in zip(x, y, line["repeats"], strict=True):
        if pd.notna(n) and int(n) > 1:
            ax.annotate(f"{int(n)} runs", (xi, yi), xytext=(4, 4), textcoords="offset points",
                        fontsize=7, color="#333333")  # fmt: skip


def _level() -> str:
    from rlperf.report.stats import CONFIDENCE

    return f"{100 * CONFIDENCE:g}%"


def intervals(ctx: FigureContext, out: Path) -> Path:
    """Every configuration's objective with its interval, one facet per family and model;
    filled markers are run-to-run intervals (n runs in the label), open ones within one run."""
    df = _completed_configurations(ctx)
    if df.empty:
        raise NotApplicable("no completed configuration with an estimate")
    pairs = {(str(f), str(m)) for f, m in zip(df["family"], df["model"], strict=True)}
    facets = sorted(pairs, key=lambda fm: (fm[0] != "training", fm))
    with _style():
        fig, axes = _grid([len(ctx.order.get(k, [])) for k in facets], 1, col_width=6.5)
        for ax, (fam, model) in zip(axes[:, 0], facets, strict=True):
            order = ctx.order.get((fam, model), [])
            sub = df[(df["family"] == fam) & (df["model"].astype(str) == model)]
            sub = sub.set_index("config").reindex(order).dropna(subset=["objective_value"])
            y = np.arange(len(sub))
            err = _errors(sub)
            repeated = (sub["repeats"].fillna(1) > 1).to_numpy()
            for mask, face in ((repeated, None), (~repeated, "white")):
                ax.errorbar(sub["objective_value"].to_numpy(dtype=float)[mask], y[mask],
                            xerr=err[:, mask], fmt="o", color="#0173b2", mfc=face,
                            capsize=3, linewidth=1.2)  # fmt: skip
            ax.set_yticks(y, [_runs_label(c, n) for c, n in zip(sub.index, sub["repeats"],
                                                                 strict=True)])  # fmt: skip
            ax.set_ylim(len(sub) - 0.5, -0.5)
            unit = objective_of(fam).unit
            log = len(sub) and sub["objective_value"].max() > 20 * sub["objective_value"].min()
            if log:
                ax.set_xscale("log")
            scale = ", log scale" if log else ""
            ax.set_xlabel(f"{sub['objective'].iloc[0]} ({unit}{scale})" if len(sub) else "")
            ax.set_title(f"{fam} · {model}", loc="left", fontweight="bold")
        fig.suptitle(f"Objective per configuration with {_level()} intervals (●: run to run over "
                     "n runs; ○: within one run)", fontsize=10)  # fmt: skip
        return _save(fig, out, "intervals")


def gpu_power(ctx: FigureContext, out: Path) -> Path:
    """GPU board power over each run (``telemetry.csv``, monitored GPUs summed)."""
    df = ctx.power
    if df.empty:
        raise NotApplicable(ctx.power_note or "no GPU power in any telemetry.csv")
    facets = sorted({(str(f), str(m)) for f, m in zip(df["family"], df["model"], strict=True)})
    from matplotlib.figure import Figure

    with _style():
        fig = Figure(figsize=(9.0, 2.6 * len(facets) + 1.0), layout="constrained")
        axes = fig.subplots(len(facets), 1, squeeze=False)
        for ax, (fam, model) in zip(axes[:, 0], facets, strict=True):
            sub = df[(df["family"] == fam) & (df["model"].astype(str) == model)]
            for label, run in sub.groupby("label", observed=True, sort=True):
                color = ctx.config_colors.get(str(run["config"].iloc[0]), "#0173b2")
                ax.plot(run["time_s"], run["gpu_power_w"], color=color, linewidth=1.0,
                        label=str(label))  # fmt: skip
            ax.set_xlabel("time since the job started (s)")
            ax.set_ylabel("GPU power (W)")
            ax.set_ylim(bottom=0)
            ax.set_title(f"{fam} · {model}", loc="left", fontweight="bold")
            ax.legend(fontsize=7, frameon=False, loc="upper right")
        fig.suptitle("GPU board power over each run (NVML, monitored GPUs summed)", fontsize=10)
        return _save(fig, out, "gpu_power")


def latency(ctx: FigureContext, out: Path) -> Path:
    """Latency per action per configuration as box plots, p50 and p99 marked."""
    df = _kept(ctx.latency) if not ctx.latency.empty else ctx.latency
    if df.empty:
        raise NotApplicable("no completed rollout / edge cells")
    metric = "action_ms" if df["action_ms"].notna().any() else "forward_ms"
    df = df[df[metric].notna()]
    models = _models(df)
    pal = _backend_palette(df["backend"].astype(str).unique())
    lo, hi = df[metric].min(), df[metric].max()
    log = bool(lo > 0 and hi / lo > 20)
    with _style():
        fig, axes = _grid([len(ctx.order[("inference", m)]) for m in models], 1, col_width=7.0)
        for ax, model in zip(axes[:, 0], models, strict=True):
            sub = df[df["model"] == model][["config", "backend", metric]].rename(
                columns={metric: "ms"}
            )
            order = ctx.order[("inference", model)]
            _latency_boxes(ax, sub, order, pal, log)
            _mark_p50_p99(ax, sub, order)
            ax.set_xlabel("latency per action (ms)" + (", log scale" if log else ""))
            ax.set_ylabel("")
            ax.set_title(model, loc="left", fontweight="bold")
        handles = _latency_legend(set(df["backend"].astype(str)), pal)
        gran = set(df["granularity"].astype(str))
        what = (
            "per step"
            if gran == {"step"}
            else "per step, or per-episode / per-run means where a legacy file kept only those"
        )
        fig.legend(
            handles=handles,
            loc="outside upper center",
            ncols=min(8, len(handles)),
            frameon=False,
            title=f"Inference latency ({what}; box: quartiles, whiskers: p1-p99)",
            title_fontsize=9,
        )
        return _save(fig, out, "latency", ctx.mixed_note.get("inference", ""))


def _latency_boxes(
    ax: Any, sub: pd.DataFrame, order: list[str], pal: dict[str, Any], log: bool
) -> None:
    """A box per configuration of ``sub`` (columns config, backend, ms), coloured by backend."""
    import seaborn as sns

    with warnings.catch_warnings():
        # seaborn 0.13 passes matplotlib 3.11's deprecated `vert` to bxp.
        warnings.filterwarnings("ignore", message=".*vert.*", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*vert.*")
        sns.boxplot(data=sub, x="ms", y="config", order=order, hue="backend", palette=pal,
                    dodge=False, showfliers=False, whis=(1, 99), width=0.6, ax=ax,
                    log_scale=log, legend=False, linewidth=0.8)  # fmt: skip


def _mark_p50_p99(ax: Any, sub: pd.DataFrame, order: list[str]) -> None:
    """p50 and p99 of every configuration as markers, with their values written above."""
    q = sub.groupby("config", observed=True)["ms"].quantile([0.5, 0.99]).unstack()
    q = q.reindex(order)
    y = np.arange(len(order))
    ax.scatter(q[0.5], y, marker="|", s=220, color="black", zorder=5, label="p50")
    ax.scatter(q[0.99], y, marker="D", s=22, color="#a00000", zorder=5, label="p99")
    for yi, (p50, p99) in enumerate(zip(q[0.5], q[0.99], strict=True)):
        if np.isfinite(p99):
            ax.text(p99, yi - 0.38, f" p50 {p50:.3g} · p99 {p99:.3g} ms", fontsize=6.5,
                    va="center", color="#333333")  # fmt: skip


def _latency_legend(backends: set[str], pal: dict[str, Any]) -> list[Any]:
    """A patch per backend present (in :data:`BACKEND_ORDER`), then the p50 / p99 markers."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    present = [b for b in [*BACKEND_ORDER, *sorted(pal)] if b in backends]
    handles: list[Any] = [Patch(color=pal[b], label=b) for b in dict.fromkeys(present)]
    return [
        *handles,
        Line2D([], [], marker="|", ls="", color="black", markersize=12, label="p50"),
        Line2D([], [], marker="D", ls="", color="#a00000", label="p99"),
    ]


def fidelity_latency(ctx: FigureContext, out: Path) -> Path:
    """Greedy-action agreement against median latency for exported / quantized variants."""
    import seaborn as sns
    from matplotlib.figure import Figure

    runs = ctx.runs
    if "fidelity_agreement" not in runs or runs["fidelity_agreement"].notna().sum() == 0:
        raise NotApplicable("no cell recorded fidelity (exported variants only)")
    metric = "action_ms_p50" if "action_ms_p50" in runs else "forward_ms_p50"
    df = runs[
        runs["fidelity_agreement"].notna() & runs[metric].notna() & (runs["status"] == "completed")
    ].copy()
    if df.empty:
        raise NotApplicable("no completed cell with both fidelity and latency")
    df["agreement_pct"] = df["fidelity_agreement"].astype(float) * 100
    pal = _backend_palette(df["backend"].astype(str).unique())
    with _style():
        fig = Figure(figsize=(7.5, 4.8), layout="constrained")
        ax = fig.subplots()
        sns.scatterplot(
            data=df,
            x=metric,
            y="agreement_pct",
            hue="backend",
            style="model",
            palette=pal,
            s=70,
            ax=ax,
        )
        for _, r in df.iterrows():
            ax.annotate(
                str(r["config"]),
                (r[metric], r["agreement_pct"]),
                fontsize=6.5,
                xytext=(4, 3),
                textcoords="offset points",
            )
        if df[metric].max() / max(df[metric].min(), 1e-9) > 20:
            ax.set_xscale("log")
        if "fidelity_threshold" in df and df["fidelity_threshold"].notna().any():
            thr = 100 * float(df["fidelity_threshold"].dropna().iloc[0])
            ax.axhline(thr, ls="--", lw=1, color="#a00000")
            ax.text(
                ax.get_xlim()[0],
                thr,
                f" threshold {thr:g}%",
                va="bottom",
                fontsize=7,
                color="#a00000",
            )
        ax.set_xlabel("median latency per action (ms)")
        ax.set_ylabel("greedy-action agreement with the source policy (%)")
        ax.set_ylim(min(90.0, float(df["agreement_pct"].min()) - 2), 100.5)
        ax.legend(loc="lower right", fontsize=7, frameon=True)
        fig.suptitle("Fidelity vs latency of exported variants", fontsize=10)
        return _save(fig, out, "fidelity_latency", ctx.mixed_note.get("inference", ""))


def compression_tradeoff(ctx: FigureContext, out: Path) -> Path:
    """Mean episode return against median latency per variant; marker area = model size."""
    import seaborn as sns
    from matplotlib.figure import Figure

    runs = ctx.runs
    metric = "action_ms_p50" if "action_ms_p50" in runs else "forward_ms_p50"
    need = ("return_mean", "model_size_bytes", metric)
    if any(c not in runs for c in need):
        raise NotApplicable("no edge cell with return, latency and model size")
    df = runs[runs[list(need)].notna().all(axis=1) & (runs["status"] == "completed")].copy()
    if df.empty:
        raise NotApplicable("no completed edge cell with return, latency and model size")
    df["size_kb"] = df["model_size_bytes"].astype(float) / 1024
    pal = _backend_palette(df["backend"].astype(str).unique())
    with _style():
        fig = Figure(figsize=(7.5, 4.8), layout="constrained")
        ax = fig.subplots()
        sns.scatterplot(data=df, x=metric, y="return_mean", hue="backend", style="model",
                        size="size_kb", sizes=(30, 400), palette=pal, alpha=0.8, ax=ax)  # fmt: skip
        for _, r in df.iterrows():
            ax.annotate(str(r["backend"]), (r[metric], r["return_mean"]), fontsize=6.5,
                        xytext=(4, 3), textcoords="offset points")  # fmt: skip
        ax.set_xlabel("median latency per action (ms)")
        ax.set_ylabel("mean episode return (same seeded episodes)")
        ax.legend(loc="best", fontsize=6.5, frameon=True)
        fig.suptitle("Compression trade-off: return vs latency (marker area: model size)",
                     fontsize=10)  # fmt: skip
        return _save(fig, out, "compression_tradeoff", ctx.mixed_note.get("inference", ""))


FIGURES: dict[str, tuple[Callable[[FigureContext, Path], Path], str]] = {
    "phase_times": (phase_times, "Phase times per configuration (stacked, share of each phase)"),
    "phase_breakdown": (phase_breakdown, "Sample / load / learn / sync time per configuration"),
    "utilisation": (utilisation, "CPU, RAM, GPU and GPU-memory utilisation"),
    "iter_time_vs_workers": (iter_time_vs_workers, "Time per iteration vs workers"),
    "intervals": (intervals, "Objective per configuration with its interval and number of runs"),
    "gpu_power": (gpu_power, "GPU power over each run"),
    "latency": (latency, "Inference latency per backend / configuration (p50, p99 marked)"),
    "fidelity_latency": (fidelity_latency, "Fidelity vs latency of exported variants"),
    "compression_tradeoff": (
        compression_tradeoff,
        "Compression trade-off: return vs latency per variant (marker area: model size)",
    ),
}


def draw_all(ctx: FigureContext, out: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """Draw every figure that applies; returns (name → PNG path, name → reason not drawn)."""
    out.mkdir(parents=True, exist_ok=True)
    drawn: dict[str, Path] = {}
    skipped: dict[str, str] = {}
    for name, (func, _title) in FIGURES.items():
        try:
            drawn[name] = func(ctx, out)
        except NotApplicable as exc:
            skipped[name] = str(exc)
        except Exception as exc:  # noqa: BLE001 - one broken figure must not lose the report
            skipped[name] = f"failed: {exc.__class__.__name__}: {exc}"
    return drawn, skipped
