"""Section *Time to target*: configurations ranked by median time to target
(:mod:`rlperf.report.stats.targets`); the runs that missed listed."""

from __future__ import annotations

import pandas as pd

from rlperf.report.export import render
from rlperf.report.sections.base import Inputs, Section


def targets_section(inputs: Inputs) -> list[render.Block]:
    """Time-to-target ranking; the runs that missed listed."""
    t = inputs.result.targets
    if t is None or t.empty:
        return []
    shown = pd.DataFrame({
        "rank": t["rank"], "configuration": t["label"], "target": t["target"],
        "judged on": t["judge"], "reached": [f"{r}/{n}" for r, n in zip(t["reached"], t["runs"],
                                                                         strict=True)],
        "median time to target [s]": [("≥ " if c else "") + f"{v:.1f}" for v, c in
                                      zip(t["median_time_to_target_s"], t["time_censored"],
                                          strict=True)],
        "median env steps": [("≥ " if c else "") + f"{v:.0f}" for v, c in
                             zip(t["median_env_steps_to_target"], t["steps_censored"],
                                 strict=True)],
    })  # fmt: skip
    missed = [m for m in t["missed"] if m]
    text = (
        "Configurations ranked by median time to target (training seconds since the "
        "algorithm was built, evaluation left out); a run that missed counts at its budget, "
        "so a median marked ≥ is a lower bound. "
        + ("Runs that missed: " + ", ".join(f"`{m}`" for m in " ".join(missed).split()) + "."
           if missed else "Every run reached its target.")
    )  # fmt: skip
    return [render.Heading("Time to target", 2), render.Para(text), render.Table(shown)]


SECTION = Section(
    name="targets",
    title="Time to target",
    order=40,
    needs=("targets",),
    render=targets_section,
)
