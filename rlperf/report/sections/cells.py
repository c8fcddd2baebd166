"""Section *Cells*: every cell read (label, stage, source, status, fingerprint, notes), the
folders skipped, and the files the report wrote."""

from __future__ import annotations

import pandas as pd

from rlperf.report.export import render
from rlperf.report.sections.base import Inputs, Section

_FILES = (
    "Tables: `runs.csv` (one row per cell, i.e. per run), `configurations.csv` (one row per "
    "configuration, repeats pooled), `iterations.csv` (training, per iteration), "
    "`latency.csv` (inference samples), `gate.csv` (with `--gate`), each also as Parquet. "
    "Figures: `figures/*.png` and `.svg`."
)


def cells_section(inputs: Inputs) -> list[render.Block]:
    """One row per cell, collapsed; the skipped folders; the files written."""
    res, plans = inputs.result, inputs.plans
    groups = res.fingerprint_groups
    table = pd.DataFrame(
        {
            "cell": [f"`{c.id}`" for c in res.cells],
            "label": [plans[c.family].labels.get(c.id, "") for c in res.cells],
            "stage": [c.stage for c in res.cells],
            "source": [c.source for c in res.cells],
            "status": [c.status for c in res.cells],
            "fp": [next(g.name for g in groups.values() if c.id in g.cells) for c in res.cells],
            "notes": ["; ".join(c.notes) for c in res.cells],
        }
    )
    inner: list[render.Block] = [render.Table(table)]
    if res.skipped:
        inner.append(render.Heading("Skipped", 3))
        inner.append(render.Bullets([f"`{s.path}`: {s.reason}" for s in res.skipped]))
    return [render.Heading("Cells", 2),
            render.Collapsed(f"{len(table)} cell(s), {len(res.skipped)} skipped", inner),
            render.Para(_FILES)]  # fmt: skip


SECTION = Section(
    name="cells",
    title="Cells",
    order=140,
    needs=("cells", "skipped", "fingerprint_groups", "plans"),
    render=cells_section,
)
