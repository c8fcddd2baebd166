"""The serve figure: p50 and p99 latency against the offered rate, one panel per configuration."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.layout import EXCLUDED_COLUMN, is_excluded
from rlperf.report.figures.plot import DPI, save
from rlperf.report.tables.serve import ServeTables

#: The figure this module draws, and its caption.
FIGURE = "serve_latency_vs_load"


CAPTION = (
    "Serving: p50 and p99 latency (from the scheduled send time, order-statistic intervals "
    "at serve.confidence) against the offered Poisson rate, one panel per configuration; "
    "the dashed line is the p99 bound; hollow markers: levels not counted (the generator "
    "fell behind its schedule, or a replica was killed during the level); an infinite upper "
    "bound (too few requests, or failed ones) is not drawn."
)


def draw_serve_figures(data: ServeTables, out: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """The latency-vs-offered-load figure; (drawn, reason not drawn) like the figure registry."""
    if data.levels.empty:
        return {}, {}
    try:
        return {FIGURE: latency_vs_load(data.levels, out)}, {}
    except Exception as exc:  # noqa: BLE001 - one broken figure must not lose the report
        return {}, {FIGURE: f"failed: {exc.__class__.__name__}: {exc}"}


def latency_vs_load(levels: pd.DataFrame, out: Path) -> Path:
    """One panel per configuration: p50 and p99 (with intervals) against the offered rate."""
    from matplotlib.figure import (
        Figure,  # only where a figure is drawn (rlperf.report.figures.plot)
    )

    load = levels[(levels["loop"] == "open") & (levels["phase"] == "load")]
    configs = sorted(load["config"].astype(str).unique())
    cols = min(3, max(1, len(configs)))
    rows = math.ceil(len(configs) / cols)
    fig = Figure(figsize=(4.2 * cols, 3.2 * rows), dpi=DPI, layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for ax, config in zip(axes, configs, strict=False):
        _panel(ax, load[load["config"].astype(str) == config], config)
    for ax in axes[len(configs) :]:
        ax.set_visible(False)
    out.mkdir(parents=True, exist_ok=True)
    return save(fig, out, FIGURE)


def _counted(sub: pd.DataFrame) -> np.ndarray:
    """Levels that count: the generator kept the schedule and no replica was killed."""
    kept = sub["on_schedule"].astype(str).str.lower().isin(["true", "1", "1.0"]).to_numpy()
    if EXCLUDED_COLUMN in sub:
        kept = kept & ~sub[EXCLUDED_COLUMN].map(is_excluded).to_numpy(dtype=bool)
    return kept


def _panel(ax: Any, sub: pd.DataFrame, config: str) -> None:
    sub = sub.sort_values("offered_rps")
    rate = pd.to_numeric(sub["offered_rps"]).to_numpy(dtype=float)
    kept = _counted(sub)
    for name, color in (("p50", "#0173b2"), ("p99", "#d55e00")):
        # An infinite estimate (failed requests count as infinitely late) is not drawn.
        est = pd.to_numeric(sub[f"{name}_ms"]).to_numpy(dtype=float)
        est = np.where(np.isfinite(est), est, np.nan)
        lo = pd.to_numeric(sub[f"{name}_lo_ms"]).to_numpy(dtype=float)
        hi = pd.to_numeric(sub[f"{name}_hi_ms"]).to_numpy(dtype=float)
        err = [np.nan_to_num(est - lo, nan=0.0), np.where(np.isfinite(hi), hi - est, 0.0)]
        ax.errorbar(rate, est, yerr=np.clip(err, 0, None), color=color, capsize=3, label=name)
        ax.scatter(rate[kept], est[kept], color=color, zorder=3)
        ax.scatter(rate[~kept], est[~kept], facecolors="white", edgecolors=color, zorder=3)
    slo = pd.to_numeric(sub["slo_ms"], errors="coerce").dropna() if "slo_ms" in sub else None
    if slo is not None and len(slo):
        ax.axhline(float(slo.iloc[0]), color="#949494", ls="--", label="p99 bound")
    ax.set_yscale("log")
    ax.set_xlabel("offered rate (requests/s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(config, fontsize=9)
    ax.legend(fontsize=8)
