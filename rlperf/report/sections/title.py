"""Section *title*: the report's heading and what was read (cells, completed, skipped)."""

from __future__ import annotations

import datetime as _dt

from rlperf.report.export import render
from rlperf.report.sections.base import Inputs, Section


def title_section(inputs: Inputs) -> list[render.Block]:
    """The title and one sentence on what was read, and when."""
    res = inputs.result
    now = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    n_ok = sum(c.completed for c in res.cells)
    read = render.Para(
        f"Generated {now} from {len(res.cells)} cells ({n_ok} completed; "
        f"{sum(not s.duplicate for s in res.skipped)} unreadable and "
        f"{sum(s.duplicate for s in res.skipped)} duplicate folders skipped) under "
        + ", ".join(f"`{p}`" for p in inputs.paths)
        + "."
    )
    return [render.Heading("rlperf report", 1), read]


SECTION = Section(
    name="title",
    title="rlperf report",
    order=10,
    needs=("cells", "skipped", "paths"),
    render=title_section,
)
