"""One figure per answer (:mod:`rlperf.report.sections.answers`): the configurations the
answer compares, and nothing else, with their 95 % intervals.

An answer compares configurations of one comparison set that differ only in the axis
asked about; its figure plots exactly the rows of its ``points`` (one per configuration:
``name`` on the y axis, ``value``, ``low`` and ``high`` on the x axis, ``one_run`` drawn
hollow), so a figure can never show a configuration of another workload.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rlperf.report.figures.plot import save, style, suptitle

#: The columns an answer's points hold.
POINT_COLUMNS = ("configuration", "workload", "name", "value", "low", "high", "one_run")


def answer_figure(points: pd.DataFrame, title: str, xlabel: str, out: Path, name: str) -> Path:
    """A dot per configuration of ``points`` (best first, on top) with its interval as a
    bar; open dots rest on one run. Written as ``<name>.png`` / ``.svg`` into ``out``."""
    from matplotlib.figure import Figure

    rows = points.reset_index(drop=True)
    value = rows["value"].to_numpy(dtype=float)
    low, high = rows["low"].to_numpy(dtype=float), rows["high"].to_numpy(dtype=float)
    err = np.nan_to_num(np.vstack([value - low, high - value]), nan=0.0)
    y = np.arange(len(rows))
    one_run = rows["one_run"].to_numpy(dtype=bool)
    out.mkdir(parents=True, exist_ok=True)
    with style():
        fig = Figure(figsize=(7.0, 1.4 + 0.45 * len(rows)), layout="constrained")
        ax = fig.subplots()
        for mask, face in ((~one_run, None), (one_run, "white")):
            if mask.any():
                ax.errorbar(value[mask], y[mask], xerr=err[:, mask], fmt="o", color="#0173b2",
                            mfc=face, capsize=3, linewidth=1.2)  # fmt: skip
        ax.set_yticks(y, [str(n) for n in rows["name"]])
        ax.set_ylim(len(rows) - 0.5, -0.5)
        if len(rows) and np.nanmax(value) > 20 * max(np.nanmin(value), 1e-12):
            ax.set_xscale("log")
            xlabel += ", log scale"
        ax.set_xlabel(xlabel)
        suptitle(fig, title + (" (○: one run, its own interval)" if one_run.any() else ""))
        return save(fig, out, name)
