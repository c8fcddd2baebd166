"""The env stage's figure: env steps per second against the number of envs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.errors import FigureNotApplicable
from rlperf.report.figures.plot import (
    FigureContext,
    completed_configurations,
    save,
    style,
    suptitle,
)
from rlperf.vocabulary import Family

#: The figure this module draws, and its title in the registry.
FIGURE = "env_throughput"


TITLE = (
    "Raw env throughput (stage=env): env steps per second against the number of envs, one "
    "line per engine and thread count (95 % intervals over the windows)"
)


def env_throughput(ctx: FigureContext, out: Path) -> Path:
    """Env steps per second against the number of envs (log 2), one panel per workload (env
    and actions), one line per engine and thread count, with 95 % intervals."""
    df = completed_configurations(ctx, Family.env)
    if df.empty or "throughput" not in df:
        raise FigureNotApplicable("no completed stage=env cells")
    df = df.assign(
        _n=pd.to_numeric(df["num_envs"], errors="coerce"),
        _x=pd.to_numeric(df["throughput"], errors="coerce"),
        _threads=pd.to_numeric(df["engine_threads"], errors="coerce"),
    ).dropna(subset=["_n", "_x"])
    if df.empty:
        raise FigureNotApplicable("no stage=env configuration with a throughput")
    from matplotlib.figure import Figure

    panels = sorted(df["workload"].astype(str).unique())
    engines = sorted(df["engine"].astype(str).unique())
    colors = dict(zip(engines, _colors(len(engines)), strict=True))
    with style():
        fig = Figure(figsize=(6.4 * len(panels), 4.4), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(panels), squeeze=False)).ravel()
        for ax, panel in zip(axes, panels, strict=True):
            sub = df[df["workload"].astype(str) == panel]
            for (engine, threads), pts in sub.groupby(["engine", "_threads"], dropna=False):
                pts = pts.sort_values("_n")
                x, y = pts["_n"].to_numpy(float), pts["_x"].to_numpy(float)
                lo = pd.to_numeric(pts["throughput_ci_low"], errors="coerce").to_numpy(float)
                hi = pd.to_numeric(pts["throughput_ci_high"], errors="coerce").to_numpy(float)
                err = np.clip(np.nan_to_num([y - lo, hi - y], nan=0.0), 0, None)
                # One colour per engine; its thread counts as line styles (1: solid).
                t = 1 if not math.isfinite(threads) else int(threads)
                ax.errorbar(x, y, yerr=err, marker="o", capsize=3, color=colors[str(engine)],
                            linestyle=_STYLES[min(t, len(_STYLES)) - 1],
                            label=_line(engine, threads))  # fmt: skip
            ax.set_xscale("log", base=2)
            ticks = sorted(sub["_n"].unique())
            ax.set_xticks(ticks, [f"{int(t)}" for t in ticks])
            ax.set_xlabel("envs stepped by the engine (env_runner.num_envs)")
            ax.set_ylabel("env steps per second")
            ax.set_ylim(bottom=0)
            ax.set_title(panel, loc="left", fontsize=9, fontweight="bold")
            ax.legend(fontsize=8, frameon=False)
        suptitle(fig, "Raw env throughput per engine (time inside the engine's step calls; "
                 "random actions unless a run's policy chose them)")  # fmt: skip
        return save(fig, out, FIGURE, ctx.mixed_note.get(Family.env, ""))


#: Line styles of 1, 2, 3 and more engine threads.
_STYLES = ("-", "--", "-.", ":")


def _line(engine: Any, threads: Any) -> str:
    try:
        t = float(threads)
    except (TypeError, ValueError):
        t = math.nan
    return f"{engine}" + (f", {int(t)} thread{'s' if t > 1 else ''}" if math.isfinite(t) else "")


def _colors(n: int) -> list[Any]:
    import seaborn as sns

    return list(sns.color_palette("colorblind", max(n, 1)))[:n]
