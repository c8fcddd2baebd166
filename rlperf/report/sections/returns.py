"""Section *Returns*: the returns compared with IQM intervals (rlperf.report.compare.returns)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from rlperf.report.compare.findings import level
from rlperf.report.compare.returns import ReturnComparison, return_comparisons
from rlperf.report.export import render
from rlperf.report.figures.returns import draw
from rlperf.report.sections.base import Section


def _ci(v: float, lo: float, hi: float, digits: int = 3) -> str:
    if not np.isfinite(v):
        return ""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{v:.{digits}g}"
    return f"{v:.{digits}g} [{lo:.{digits}g}, {hi:.{digits}g}]"


def returns_section(comparisons: Sequence[ReturnComparison]) -> list[render.Block]:
    """The "Returns" section: per comparison a table (IQM and P(improvement) with their
    intervals) and its figure."""
    if not comparisons:
        return []
    blocks: list[render.Block] = [
        render.Heading("Returns", 2),
        render.Para(
            "Returns compared where they are the same score (one env protocol): the "
            f"interquartile mean (IQM) with a stratified-bootstrap {level()} interval, the "
            "probability that a run of a configuration scores higher than a run of the "
            "reference (P(improvement), 0.5: no difference) with its interval, and "
            "performance profiles (the share of runs scoring above each return), the "
            "methods of Agarwal et al. 2021. The unit is the seed where every configuration "
            "has 3 or more runs."
        ),
    ]
    for rc in comparisons:
        t = rc.table
        shown = pd.DataFrame({
            "configuration": t["label"],
            "n": t["n"].astype(int),
            f"IQM [{level()} CI]": [_ci(v, a, b) for v, a, b in
                                    zip(t["iqm"], t["iqm_low"], t["iqm_high"], strict=True)],
            "mean": [f"{v:.3g}" for v in t["mean"]],
            "median": [f"{v:.3g}" for v in t["median"]],
            f"P(improvement over {rc.reference}) [{level()} CI]": [
                _ci(v, a, b, 2) for v, a, b in zip(t["p_improvement"], t["p_improvement_low"],
                                                   t["p_improvement_high"], strict=True)],
        })  # fmt: skip
        blocks += [
            render.Heading(rc.title, 3),
            render.Table(shown, f"Unit: {rc.unit_text}. Reference: {rc.reference}."),
        ]
        if rc.figure is not None:
            blocks.append(render.Image(rc.figure, f"{rc.title}: IQM and performance profiles"))
    return blocks


SECTION = Section(
    name="returns",
    title="Returns",
    order=70,
    needs=("comparison",),
    render=lambda inputs: returns_section(inputs.data("returns")),
    collect=lambda inputs: return_comparisons(inputs.comparison),
    draw=draw,
)
