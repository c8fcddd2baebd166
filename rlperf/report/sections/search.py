"""Section *Searches*: the objective, the best trial and its parameters of every search read."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlperf.report.export import render
from rlperf.report.figures.search import draw_search_figures
from rlperf.report.read.searches import SearchResult, read_searches
from rlperf.report.sections.base import Section


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
                f"Left: `{d['metric']}` of each trial and the best so far among completed "
                "trials; then each parameter against the metric. Hollow: stopped early by the "
                "scheduler, at its value of the metric it was stopped on where the objective "
                "has none."
            )
            blocks.append(render.Image(s.figure, caption))
    return blocks


def draw(searches: Sequence[SearchResult], out: Path) -> dict[str, Path]:
    """Each search's figure (kept apart from the report's figure list)."""
    draw_search_figures(searches, out)
    return {s.figure.stem: s.figure for s in searches if s.figure is not None}


SECTION = Section(
    name="search",
    title="Searches",
    order=80,
    needs=("sweeps",),
    render=lambda inputs: search_section(inputs.data("search")),
    collect=lambda inputs: read_searches(inputs.sweeps),
    draw=draw,
    listed=False,
)
