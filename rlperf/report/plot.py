"""The figures' visual language and plumbing, shared by every figure module.

Facets: one row (or column) per model when several are present. Colours: one
fixed colour per phase, per backend and per resource; configurations get one
colour each, the same in every figure of a report; bars are ordered fastest
first, in the order of the findings. Matplotlib is used through
``Figure`` objects (no pyplot global state), drawn by the Agg canvas.

Matplotlib and seaborn are imported inside the functions that draw: a report
with ``--no-figures`` (and ``rlperf-report --help``) never loads them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

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


def models_of(df: pd.DataFrame) -> list[str]:
    return sorted(df["model"].dropna().astype(str).unique())


def kept(df: pd.DataFrame) -> pd.DataFrame:
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


def backend_palette(backends: Sequence[str]) -> dict[str, Any]:
    import seaborn as sns

    extra = [b for b in sorted(set(backends)) if b not in BACKEND_COLORS]
    pal = dict(BACKEND_COLORS)
    for b, c in zip(extra, sns.color_palette("dark", len(extra)), strict=False):
        pal[b] = c
    return pal


def grid(
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


def save(fig: Any, out: Path, name: str, note: str = "") -> Path:
    # Constrained layout reserves room for the supxlabel; no bbox_inches="tight", which
    # would cost one more full draw per file.
    if note:
        fig.supxlabel(note, x=0.0, ha="left", fontsize=8, color="#a00000")
    png = out / f"{name}.png"
    fig.savefig(png, dpi=DPI)
    fig.savefig(out / f"{name}.svg")
    return png


def style() -> Any:
    import seaborn as sns

    stack = contextlib.ExitStack()
    stack.enter_context(sns.axes_style("whitegrid"))
    stack.enter_context(sns.plotting_context("notebook", font_scale=0.8))
    return stack


def completed_configurations(ctx: FigureContext, family: str | None = None) -> pd.DataFrame:
    """Completed configurations with a finite objective (of ``family``, or all)."""
    df = ctx.configurations
    if df.empty or "objective_value" not in df:
        return df.iloc[0:0]
    keep = (df["status"] == "completed") & df["objective_value"].notna()
    if family is not None:
        keep &= df["family"] == family
    return df[keep]


def interval_errors(sub: pd.DataFrame) -> np.ndarray:
    """Lower and upper error-bar lengths from the objective's interval (0 without one)."""
    value = sub["objective_value"].to_numpy(dtype=float)
    low = sub["objective_ci_low"].to_numpy(dtype=float)
    high = sub["objective_ci_high"].to_numpy(dtype=float)
    return np.nan_to_num(np.vstack([value - low, high - value]), nan=0.0)
