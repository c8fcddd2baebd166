"""Figures of inference cells (rollout and edge): latency per configuration and backend,
and what exported / compressed variants trade for it.

- ``latency``: latency per action per configuration / backend (box: quartiles, whiskers
  1st-99th percentile), with p50 and p99 marked;
- ``fidelity_latency``: greedy-action agreement against latency for exported variants;
- ``compression_tradeoff``: mean return against latency per variant, marker area = model size.

Matplotlib and seaborn are imported where they draw (:mod:`rlperf.report.figures.plot` says why).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.errors import FigureNotApplicable
from rlperf.report.figures.plot import (
    BACKEND_ORDER,
    FigureContext,
    add_note,
    backend_palette,
    grid,
    kept,
    models_of,
    place_labels,
    save,
    style,
    suptitle,
)
from rlperf.results.columns import ACTION_MS, ACTION_MS_P50, FORWARD_MS
from rlperf.vocabulary import Family, RunStatus


def latency(ctx: FigureContext, out: Path) -> Path:
    """Latency per action per configuration as box plots, p50 and p99 marked."""
    df = kept(ctx.latency) if not ctx.latency.empty else ctx.latency
    if df.empty:
        raise FigureNotApplicable("no completed rollout / edge cells")
    metric = ACTION_MS if df[ACTION_MS].notna().any() else FORWARD_MS
    df = df[df[metric].notna()]
    models = models_of(df)
    pal = backend_palette(df["backend"].astype(str).unique())
    lo, hi = df[metric].min(), df[metric].max()
    log = bool(lo > 0 and hi / lo > 20)
    with style():
        fig, axes = grid([len(ctx.order[(Family.inference, m)]) for m in models], 1, col_width=7.0)
        for ax, model in zip(axes[:, 0], models, strict=True):
            sub = df[df["model"] == model][["config", "backend", metric]].rename(
                columns={metric: "ms"}
            )
            order = ctx.order[(Family.inference, model)]
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
        return save(fig, out, "latency", ctx.mixed_note.get(Family.inference, ""))


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
    """Greedy-action agreement against median latency for exported / quantized variants.

    Variants often sit on top of each other (same agreement, similar latency), so each
    point carries a number placed where it overlaps no other, and the key beside the axes
    names the configuration of each number."""
    import seaborn as sns
    from matplotlib.figure import Figure

    runs = ctx.runs
    if "fidelity_agreement" not in runs or runs["fidelity_agreement"].notna().sum() == 0:
        raise FigureNotApplicable("no cell recorded fidelity (exported variants only)")
    metric = ACTION_MS_P50 if ACTION_MS_P50 in runs else "forward_ms_p50"
    df = runs[
        runs["fidelity_agreement"].notna()
        & runs[metric].notna()
        & (runs["status"] == RunStatus.completed)
    ].copy()
    if df.empty:
        raise FigureNotApplicable("no completed cell with both fidelity and latency")
    df["agreement_pct"] = df["fidelity_agreement"].astype(float) * 100
    df = df.sort_values([metric, "config"]).reset_index(drop=True)
    pal = backend_palette(df["backend"].astype(str).unique())
    with style():
        fig = Figure(figsize=(9.0, 4.8), layout="constrained")
        ax = fig.subplots()
        sns.scatterplot(data=df, x=metric, y="agreement_pct", hue="backend", style="model",
                        palette=pal, s=70, ax=ax)  # fmt: skip
        if df[metric].max() / max(df[metric].min(), 1e-9) > 20:
            ax.set_xscale("log")
        if "fidelity_threshold" in df and df["fidelity_threshold"].notna().any():
            thr = 100 * float(df["fidelity_threshold"].dropna().iloc[0])
            ax.axhline(thr, ls="--", lw=1, color="#a00000", label=f"threshold {thr:g}%")
        ax.set_xlabel("median latency per action (ms)")
        ax.set_ylabel("greedy-action agreement with the source policy (%)")
        ax.set_ylim(min(90.0, float(df["agreement_pct"].min()) - 2), 100.5)
        _numbered_key(fig, ax, [str(c) for c in df["config"]])
        suptitle(fig, "Fidelity vs latency of exported variants (numbers: the key on the right)")
        add_note(fig, ctx.mixed_note.get(Family.inference, ""))
        place_labels(ax, df[metric].tolist(), df["agreement_pct"].tolist(),
                     [str(i + 1) for i in range(len(df))])  # fmt: skip
        return save(fig, out, "fidelity_latency")


def _numbered_key(fig: Any, ax: Any, configs: list[str]) -> None:
    """One legend right of the axes: backend, model and threshold (seaborn's entries), then
    the key "n  configuration" of the numbered points."""
    from matplotlib.lines import Line2D

    handles, labels = ax.get_legend_handles_labels()  # seaborn's and the threshold's
    blank = [Line2D([], [], linestyle="", marker="") for _ in configs]
    key = [f"{i + 1}  {c}" for i, c in enumerate(configs)]
    # An axes' legend outside the axes: constrained layout keeps it below the title.
    ax.legend([*handles, *blank], [*labels, *key], loc="upper left", bbox_to_anchor=(1.02, 1),
              fontsize=7, frameon=False, handlelength=0.8, handletextpad=0.3)  # fmt: skip


def compression_tradeoff(ctx: FigureContext, out: Path) -> Path:
    """Mean episode return against median latency per variant; marker area = model size."""
    import seaborn as sns
    from matplotlib.figure import Figure

    runs = ctx.runs
    metric = ACTION_MS_P50 if ACTION_MS_P50 in runs else "forward_ms_p50"
    need = ("return_mean", "model_size_bytes", metric)
    if any(c not in runs for c in need):
        raise FigureNotApplicable("no edge cell with return, latency and model size")
    df = runs[runs[list(need)].notna().all(axis=1) & (runs["status"] == RunStatus.completed)].copy()
    if df.empty:
        raise FigureNotApplicable("no completed edge cell with return, latency and model size")
    df["size_kb"] = df["model_size_bytes"].astype(float) / 1024
    pal = backend_palette(df["backend"].astype(str).unique())
    with style():
        fig = Figure(figsize=(7.5, 4.8), layout="constrained")
        ax = fig.subplots()
        sns.scatterplot(data=df, x=metric, y="return_mean", hue="backend", style="model",
                        size="size_kb", sizes=(30, 400), palette=pal, alpha=0.8, ax=ax)  # fmt: skip
        ax.set_xlabel("median latency per action (ms)")
        ax.set_ylabel("mean episode return (same seeded episodes)")
        ax.legend(loc="best", fontsize=6.5, frameon=True)
        suptitle(fig, "Compression trade-off: return vs latency (marker area: model size)")
        add_note(fig, ctx.mixed_note.get(Family.inference, ""))
        place_labels(ax, df[metric].tolist(), df["return_mean"].tolist(),
                     [str(b) for b in df["backend"]], fontsize=6.5)  # fmt: skip
        return save(fig, out, "compression_tradeoff")
