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
import textwrap
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.layout import EXCLUDED_COLUMN
from rlperf.results.columns import LEARN_S, LOAD_S, OTHER_S, SAMPLE_S, SYNC_S
from rlperf.vocabulary import RunStatus

PHASE_NAMES = {
    SAMPLE_S: "sample",
    LOAD_S: "load",
    LEARN_S: "learn",
    SYNC_S: "sync",
    OTHER_S: "other",
}

PHASE_COLORS = {
    SAMPLE_S: "#0173b2",
    LOAD_S: "#de8f05",
    LEARN_S: "#029e73",
    SYNC_S: "#d55e00",
    OTHER_S: "#949494",
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
    #: configuration id -> its target return (summary.json ``stop.episode_return``; the
    #: targets table's ``configuration`` and ``target``): learning curves draw it.
    targets: dict[str, float] = field(default_factory=dict)


def models_of(df: pd.DataFrame) -> list[str]:
    return sorted(df["model"].dropna().astype(str).unique())


def kept(df: pd.DataFrame) -> pd.DataFrame:
    return df.loc[df[EXCLUDED_COLUMN].eq("") & (df["status"] == RunStatus.completed)]


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


#: Figures saved while :func:`keep_figures` is active (None: none kept, the default).
_KEPT: ContextVar[dict[str, Any] | None] = ContextVar("rlperf_report_kept_figures", default=None)


@contextlib.contextmanager
def keep_figures() -> Iterator[dict[str, Any]]:
    """Collect every ``Figure`` :func:`save` writes inside the block, by file name (without
    suffix). The figure functions return paths; tests check the matplotlib objects
    themselves: where titles, legends and notes landed, which ticks an axis got."""
    kept: dict[str, Any] = {}
    token = _KEPT.set(kept)
    try:
        yield kept
    finally:
        _KEPT.reset(token)


def wrap(fig: Any, text: str, fontsize: float) -> str:
    """``text`` broken into lines that fit the figure's width: a long title or note is
    otherwise centred past both edges of a narrow figure and cut off."""
    # A DejaVu Sans character is about 0.6 em wide on average; keep a margin.
    chars = int(fig.get_figwidth() * 72 / (0.6 * fontsize)) - 4
    return "\n".join(textwrap.wrap(text, max(chars, 20))) if text else text


def suptitle(fig: Any, text: str, fontsize: float = 10) -> Any:
    """The figure's title, wrapped to its width (constrained layout keeps it inside)."""
    return fig.suptitle(wrap(fig, text, fontsize), fontsize=fontsize)


def save(fig: Any, out: Path, name: str, note: str = "") -> Path:
    """Write ``<name>.png`` and ``.svg``; ``note`` (e.g. the mixed-fingerprint warning) goes
    under everything, wrapped to the figure's width."""
    # Constrained layout reserves room for the supxlabel; no bbox_inches="tight", which
    # would cost one more full draw per file. A figure's legend must therefore not sit
    # "outside lower" (it would share the bottom margin with the note): figures put
    # theirs above the axes or to their right.
    add_note(fig, note)
    png = out / f"{name}.png"
    fig.savefig(png, dpi=DPI)
    compact_png(png)
    fig.savefig(out / f"{name}.svg")
    kept = _KEPT.get()
    if kept is not None:
        kept[name] = fig
    return png


def compact_png(png: Path) -> None:
    """Rewrite ``png`` with a 256-colour palette: a plot's flat colours and anti-aliased
    text survive it, and the file is about 2.6 times smaller (report.html embeds every
    figure as base64). The SVG beside it keeps every colour."""
    from PIL import Image as PILImage

    with PILImage.open(png) as image:
        palette = image.convert("RGB").quantize(
            colors=256, method=PILImage.Quantize.MEDIANCUT, dither=PILImage.Dither.NONE
        )
    palette.save(png, optimize=True)


def add_note(fig: Any, note: str) -> None:
    """``note`` under everything (the figure's supxlabel), wrapped to the figure's width."""
    if note:
        fig.supxlabel(wrap(fig, note, 8), x=0.01, ha="left", fontsize=8, color="#a00000")


def objective_label(df: pd.DataFrame) -> str:
    """The axis label of ``objective_value``: the objective's name and unit, from the
    configurations table's ``objective`` and ``objective_unit`` columns (e.g. "time per
    1 000 env steps (s)"). Tables without ``objective_unit`` (written before it existed)
    name the unit in the metric (``iter_s``, ``action_ms``): "ms" for ``_ms``, else "s"."""
    name = _first(df, "objective") or "objective"
    unit = _first(df, "objective_unit") or ("ms" if name.endswith("_ms") else "s")
    return f"{name} ({unit})"


def _first(df: pd.DataFrame, column: str) -> str:
    """The first non-empty value of ``column`` ("" where there is none)."""
    if column not in df:
        return ""
    values = df[column].dropna().astype(str)
    values = values[values != ""]
    return str(values.iloc[0]) if len(values) else ""


def integer_ticks(axis: Any) -> None:
    """Ticks at whole numbers only on a count axis (workers, N, trials, iterations)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def place_labels(
    ax: Any, xs: Sequence[float], ys: Sequence[float], texts: Sequence[str], fontsize: float = 7
) -> list[Any]:
    """Annotate point i with ``texts[i]`` where the label overlaps no label placed before it.

    A greedy pass in display coordinates: each label tries offsets around its point
    (right, above, left, below, the diagonals, then twice and three times as far) and
    takes the first whose box meets no earlier label's box (nor the axes' legend) and stays
    inside the axes; a label with no free place takes the last offset tried. Call it last,
    after the legends and the note (:func:`add_note`): the layout they change moves the
    points. Returns the annotations.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = ax.get_figure()
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)  # a bare Figure's canvas cannot measure text; savefig uses Agg too
    fig.canvas.draw()  # the layout decides where the axes and so the points are
    renderer = fig.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    directions = [(1, 0.4), (0, 1.2), (-1, 0.4), (0, -1.6), (1, 1), (-1, 1), (1, -1), (-1, -1)]
    offsets = [(dx * 5 * r, dy * 5 * r) for r in (1, 2, 3) for dx, dy in directions]
    placed: list[Any] = []
    legend = ax.get_legend()
    boxes: list[Any] = [legend.get_window_extent(renderer)] if legend is not None else []
    for x, y, text in zip(xs, ys, texts, strict=True):
        for dx, dy in offsets:
            ha = "left" if dx > 0 else "right" if dx < 0 else "center"
            va = "bottom" if dy > 0 else "top" if dy < 0 else "center"
            label = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points",
                                ha=ha, va=va, fontsize=fontsize)  # fmt: skip
            label.set_in_layout(False)  # a re-layout would move the points under the labels
            box = label.get_window_extent(renderer)
            free = not any(box.overlaps(b) for b in boxes)
            fits = inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1)
            if (free and fits) or (dx, dy) == offsets[-1]:
                break
            label.remove()
        placed.append(label)
        boxes.append(box)
    return placed


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
    keep = (df["status"] == RunStatus.completed) & df["objective_value"].notna()
    if family is not None:
        keep &= df["family"] == family
    return df[keep]


def interval_errors(sub: pd.DataFrame) -> np.ndarray:
    """Lower and upper error-bar lengths from the objective's interval (0 without one)."""
    value = sub["objective_value"].to_numpy(dtype=float)
    low = sub["objective_ci_low"].to_numpy(dtype=float)
    high = sub["objective_ci_high"].to_numpy(dtype=float)
    return np.nan_to_num(np.vstack([value - low, high - value]), nan=0.0)
