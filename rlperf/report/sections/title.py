"""Section *title*: the report's heading, what was read (cells, completed, skipped) and the
workloads' legend: each comparison set's short name, used everywhere below, and the whole
workload it stands for (:func:`rlperf.report.compare.workloads.workload_legend`)."""

from __future__ import annotations

import datetime as _dt

import pandas as pd

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
    return [render.Heading("rlperf report", 1), read, *legend(inputs)]


def legend(inputs: Inputs) -> list[render.Block]:
    """The workloads by the short names the page uses, with what each stands for (folded:
    a reader opens it when a name is not enough)."""
    rows = [{"workload": short, "family": fam, "the whole workload": whole}
            for fam, names in inputs.comparison.workload_legend.items()
            for short, whole in sorted(names.items())]  # fmt: skip
    if not rows:
        return []
    n = len({r["workload"] for r in rows})
    return [render.Collapsed(
        f"Workloads: {n} comparison set(s), named below by what differs between them",
        [render.Para("A workload is what a run measures (model, env protocol and, for "
                     "training, algorithm, batch and target); runs are ranked only against "
                     "runs of the same one."), render.Table(pd.DataFrame(rows))],
    )]  # fmt: skip


SECTION = Section(
    name="title",
    title="rlperf report",
    order=10,
    needs=("cells", "skipped", "paths", "comparison"),
    render=title_section,
)
