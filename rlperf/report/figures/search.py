"""The figures of a search: each trial's score against its proxy, the best so far."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rlperf.layout import METRICS_FILE
from rlperf.report.figures.plot import integer_ticks, save, style
from rlperf.report.read.searches import FIGURE_PREFIX, SearchResult, best_so_far
from rlperf.vocabulary import RunStatus


def draw_search_figures(searches: Sequence[SearchResult], out: Path) -> None:
    """``figures/search[_<i>].png`` for each search with a trial to draw (sets ``figure``)."""
    for i, search in enumerate(searches):
        t = search.trials
        if t.empty or (t["score"].isna().all() and not _proxies(search).notna().any()):
            continue
        name = FIGURE_PREFIX if len(searches) == 1 else f"{FIGURE_PREFIX}_{i}"
        out.mkdir(parents=True, exist_ok=True)
        search.figure = _draw(search, out, name)


#: How a scheduler is named in the figure's legend ("stopped early by ASHA").
SCHEDULER_NAMES = {"asha": "ASHA", "median": "the median stopping rule"}


def _proxies(search: SearchResult) -> pd.Series:
    """Each trial's last value of the scheduler's metric in its own ``metrics.csv`` (NaN
    where it has none): what the scheduler stopped a trial on, and the only value a trial
    stopped before the end has of a summary-only objective such as ``time_to_target_s``."""
    column = search.data.get("scheduler_metric")
    values = []
    for subdir in search.trials.get("trial", pd.Series(dtype=str)):
        value = float("nan")
        path = search.folder / str(subdir) / METRICS_FILE
        if column and path.is_file():
            try:
                series = pd.read_csv(path, usecols=[column])[column]
                found = pd.to_numeric(series, errors="coerce").dropna()
                value = float(found.iloc[-1]) if len(found) else value
            except (OSError, ValueError, pd.errors.ParserError):
                pass  # a torn or foreign file: the trial is drawn as having no value
        values.append(value)
    return pd.Series(values, index=search.trials.index, dtype=float)


@dataclass(frozen=True)
class _Points:
    """One legend entry of the search figure: which trials, on which axis, how drawn."""

    label: str
    rows: pd.Series  # boolean mask over the trials
    value: str  # "score", "proxy" or "none" (drawn on the axis' bottom edge)
    marker: str
    filled: bool


def _point_groups(t: pd.DataFrame, metric: str, proxy: str, scheduler: str) -> list[_Points]:
    """Every trial in exactly one group: completed and scored; stopped early (at its score,
    else at the scheduler's metric it was stopped on); any other without a score at the
    scheduler's metric; and, at the axis' bottom edge, those with no value at all."""
    scored, has_proxy = t["score"].notna(), t["proxy"].notna()
    stopped = t["status"] == RunStatus.stopped_early
    by = f"stopped early by {SCHEDULER_NAMES.get(scheduler, scheduler)}"
    groups = [
        _Points(RunStatus.completed, scored & ~stopped, "score", "o", True),
        _Points(by, scored & stopped, "score", "o", False),
        _Points(f"{by} (at its {proxy})", ~scored & stopped & has_proxy, "proxy", "o", False),
        _Points(
            f"no {metric} (at its {proxy})", ~scored & ~stopped & has_proxy, "proxy", "s", False
        ),
        _Points("no value (status in the table)", ~scored & ~has_proxy, "none", "x", True),
    ]
    return [g for g in groups if g.rows.any()]


def _draw(search: SearchResult, out: Path, name: str) -> Path:
    """Left: every trial in start order (whole-number ticks) with the best so far; then each
    parameter against the metric. Trials without a score are drawn at the scheduler's metric,
    hollow, on a right-hand axis where that metric is not the objective."""
    from matplotlib.figure import (
        Figure,  # only where a figure is drawn (rlperf.report.figures.plot)
    )
    from matplotlib.ticker import NullFormatter
    from matplotlib.transforms import blended_transform_factory

    t = search.trials.assign(proxy=_proxies(search)).sort_values("number")
    metric, mode = str(search.data["metric"]), str(search.data["mode"])
    proxy = str(search.data.get("scheduler_metric") or metric)
    scheduler = str(search.data.get("scheduler", {}).get("name", "none"))
    params = list(search.data.get("space", {}))
    groups = _point_groups(t, metric, proxy, scheduler)
    twin = proxy != metric and any(g.value == "proxy" for g in groups)
    with style():
        fig = Figure(figsize=(4.6 * (1 + len(params)) + 1.0, 3.8), layout="constrained")
        axes = fig.subplots(1, 1 + len(params), squeeze=False)[0]
        for i, ax in enumerate(axes):
            key = "number" if i == 0 else params[i - 1]
            right = ax.twinx() if twin else ax
            for g in groups:
                sub = t[g.rows]
                x = sub[key].astype(str) if sub[key].dtype == object else sub[key]
                target, y = (right, sub["proxy"]) if g.value == "proxy" else (ax, sub["score"])
                kw: dict[str, Any] = {"marker": g.marker, "label": g.label, "zorder": 3}
                if g.value == "none":
                    y = pd.Series(0.02, index=sub.index)
                    kw["transform"] = blended_transform_factory(ax.transData, ax.transAxes)
                if not g.filled:
                    kw.update(facecolors="none", edgecolors="#de8f05", linewidths=1.3)
                target.scatter(x, y, **kw)
            if twin:
                right.set_ylabel(f"{proxy} (hollow: no {metric})", fontsize=8)
                right.grid(False)
            if i == 0:
                ax.step(t["number"], best_so_far(t, mode), where="post", color="k",
                        label="best so far")  # fmt: skip
                integer_ticks(ax.xaxis)
                ax.set(xlabel="trial (start order)", title=f"{metric} over trials ({mode})")
            else:
                if pd.api.types.is_integer_dtype(t[key]):
                    integer_ticks(ax.xaxis)
                if str(search.data["space"][key]).startswith("log"):
                    ax.set_xscale("log")
                    ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels collide
                ax.set(xlabel=key, title=f"{key} vs {metric}")
            ax.set_ylabel(metric)
        fig.legend(*_all_handles(fig), loc="outside right upper", fontsize=7, frameon=False)
        return save(fig, out, name)


def _all_handles(fig: Any) -> tuple[list[Any], list[str]]:
    """Every panel's legend entries, twin axes' included, each label once (all panels draw
    the same groups)."""
    seen: dict[str, Any] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    return list(seen.values()), list(seen)
