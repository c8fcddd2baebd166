"""The report's Search section: a search folder's ``search.json`` (docs/search.md).

For each search under the report's paths: its objective and best trial, a table
of its trials, and one figure — the metric of every trial in start order with the
best-so-far curve, and each searched parameter against the metric.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rlperf.layout import SEARCH_FILE
from rlperf.report import render
from rlperf.report.plot import save, style

FIGURE_PREFIX = "search"


@dataclass
class SearchResult:
    """One search folder: its ``search.json`` as a dict, its trials as a table, its figure."""

    folder: Path
    data: dict[str, Any]
    trials: pd.DataFrame
    figure: Path | None = None


def read_searches(sweeps: Sequence[Path]) -> list[SearchResult]:
    """The searches among the sweep folders the report found (those with ``search.json``)."""
    out = []
    for folder in sweeps:
        try:
            data = json.loads((Path(folder) / SEARCH_FILE).read_text())
        except (OSError, ValueError):
            continue
        rows = [
            {
                "number": t["number"],
                "trial": t["subdir"],
                "status": t["status"],
                "score": t["score"],
                **t["params"],
            }  # fmt: skip
            for t in data.get("trials", [])
        ]
        out.append(SearchResult(Path(folder), data, pd.DataFrame(rows)))
    return out


def best_so_far(trials: pd.DataFrame, mode: str) -> pd.Series:
    """The best completed score up to each trial (in start order); NaN before the first."""
    scores = trials["score"].where(trials["status"] == "completed").astype(float)
    best = scores.cummax() if mode == "max" else scores.cummin()
    return best.ffill()


def draw_search_figures(searches: Sequence[SearchResult], out: Path) -> None:
    """``figures/search[_<i>].png`` for each search with scored trials (sets ``figure``)."""
    for i, search in enumerate(searches):
        t = search.trials
        if t.empty or t["score"].isna().all():
            continue
        name = FIGURE_PREFIX if len(searches) == 1 else f"{FIGURE_PREFIX}_{i}"
        out.mkdir(parents=True, exist_ok=True)
        search.figure = _draw(search, out, name)


def _draw(search: SearchResult, out: Path, name: str) -> Path:
    from matplotlib.figure import Figure  # only where a figure is drawn (rlperf.report.plot)

    t = search.trials.sort_values("number")
    metric, mode = str(search.data["metric"]), str(search.data["mode"])
    params = list(search.data.get("space", {}))
    with style():
        fig = Figure(figsize=(4.2 * (1 + len(params)), 3.4), layout="constrained")
        axes = fig.subplots(1, 1 + len(params), squeeze=False)[0]
        ax = axes[0]
        for status, marker in (("completed", "o"), ("stopped_early", "x")):
            sub = t[t["status"] == status]
            ax.scatter(sub["number"], sub["score"], marker=marker, label=status.replace("_", " "))
        ax.step(t["number"], best_so_far(t, mode), where="post", color="k", label="best so far")
        ax.set(xlabel="trial (start order)", ylabel=metric, title=f"{metric} over trials ({mode})")
        ax.legend(fontsize=7)
        for ax, key in zip(axes[1:], params, strict=True):
            for status, marker in (("completed", "o"), ("stopped_early", "x")):
                sub = t[t["status"] == status]
                ax.scatter(sub[key].astype(str) if sub[key].dtype == object else sub[key],
                           sub["score"], marker=marker)  # fmt: skip
            if str(search.data["space"][key]).startswith("log"):
                ax.set_xscale("log")
            ax.set(xlabel=key, ylabel=metric, title=f"{key} vs {metric}")
        return save(fig, out, name)


def _f(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None or value != value else str(value)


def search_section(searches: Sequence[SearchResult]) -> list[render.Block]:
    """One subsection per search: objective, best trial, the trials, the figure."""
    if not searches:
        return []
    blocks: list[render.Block] = [render.Heading("Search", 2)]
    for s in searches:
        d, t = s.data, s.trials
        counts = t["status"].value_counts().to_dict() if not t.empty else {}
        sched = d.get("scheduler", {})
        text = (
            f"`{s.folder}`: {d['algorithm']} search, {len(t)} trials ("
            + ", ".join(f"{n} {k}" for k, n in counts.items())
            + f"); objective `{d['metric']}` ({d['mode']}); scheduler {sched.get('name')}"
            + (f" on `{d.get('scheduler_metric')}`" if sched.get("name") != "none" else "")
            + ". Space: "
            + "; ".join(f"`{k}` {v}" for k, v in d.get("space", {}).items())
            + "."
        )
        best = d.get("best")
        best_text = (
            "No completed trial has a value of the objective."
            if not best
            else f"Best: `{best['subdir']}` with `{d['metric']}` = {_f(best['score'])} ("
            + ", ".join(f"`{k}={_f(v)}`" for k, v in best["params"].items())
            + f"); its preset: `rlperf experiment={best.get('preset')}`."
        )
        table = t.assign(score=t["score"].map(_f)).map(_f) if not t.empty else t
        blocks += [render.Heading(s.folder.name, 3), render.Para(text), render.Para(best_text)]
        blocks.append(render.Table(table.astype(str), "Trials in start order."))
        if s.figure is not None:
            caption = (
                f"Left: `{d['metric']}` of each trial (x: stopped early) and the best so far "
                "among completed trials; then each parameter against the metric."
            )
            blocks.append(render.Image(s.figure, caption))
    return blocks
