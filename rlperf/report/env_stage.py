"""``stage=env`` cells in the report: an env's raw throughput per engine, envs and threads.

An env cell's windows are ``metrics.csv`` rows (:data:`rlperf.results.columns.ENV_WINDOW_COLUMNS`)
with the training names where the meaning is the same, so the generic machinery ranks
its configurations on time per 1 000 env steps (bootstrapped over the windows), gives
their env steps per second with intervals, and fits the Universal Scalability Law over
``env_runner.num_envs`` (:mod:`rlperf.report.scaling`). This module adds what is the env
stage's own: the summary columns of a run (:func:`env_summary`) and the figure
``env_throughput``: env steps per second against the number of envs, one line per engine
and thread count. Its ranked table is :func:`rlperf.report.family_tables`'s env table; its
windows are the ``env_windows`` table (:func:`rlperf.report.tables.env_windows_table`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.errors import FigureNotApplicable
from rlperf.report.cells import ENV_FAMILY, Cell, included
from rlperf.report.plot import FigureContext, completed_configurations, save, style, suptitle

#: The figure this module draws, and its title in the registry.
FIGURE = "env_throughput"
TITLE = (
    "Raw env throughput (stage=env): env steps per second against the number of envs, one "
    "line per engine and thread count (95 % intervals over the windows)"
)


def env_summary(c: Cell) -> dict[str, Any]:
    """The runs-table columns of an env cell: its windows, engine, rates, latency, CPU, RSS."""
    s = c.summary
    engine = s.get("engine") or {}
    row: dict[str, Any] = {
        "engine": engine.get("name"),
        "engine_threads": engine.get("threads"),
        "num_envs": engine.get("num_envs"),
        "actions": s.get("actions"),
    }
    df = c.iterations
    if df is not None and len(df):
        kept = included(df)
        row.update(
            iterations=int(len(df)),
            warmup_iterations=int(len(df) - len(kept)),
            total_env_steps=float(kept["env_steps"].sum()),
        )
    step = (s.get("latency") or {}).get("step_ms") or {}
    cpu = s.get("cpu") or {}
    row.update(
        env_steps_per_s=s.get("env_steps_per_s"),
        frames_per_s=s.get("frames_per_s"),
        wall_steps_per_s=s.get("wall_steps_per_s"),
        step_ms_p50=step.get("p50"),
        step_ms_p99=step.get("p99"),
        process_cores=cpu.get("process_cores"),
        per_core_busy_pct=" ".join(f"{v:g}" for v in cpu.get("per_core_busy_pct") or []),
        rss_mb_max=(s.get("rss_mb") or {}).get("max"),
        episodes=s.get("episodes_ended"),
    )
    return row


def env_throughput(ctx: FigureContext, out: Path) -> Path:
    """Env steps per second against the number of envs (log 2), one panel per workload (env
    and actions), one line per engine and thread count, with 95 % intervals."""
    df = completed_configurations(ctx, ENV_FAMILY)
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
        return save(fig, out, FIGURE, ctx.mixed_note.get(ENV_FAMILY, ""))


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
