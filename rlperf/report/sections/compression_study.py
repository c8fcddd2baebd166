"""Section *Compression study*: per algorithm x env x backend over trained policies, and
the study's four claims (rlperf.report.compare.compression_study)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from rlperf.report.compare.compression_study import (
    ENERGY,
    MODEL_RSS,
    P50,
    P99,
    PEAK,
    SIZE,
    StudyRow,
    claims,
    study_rows,
)
from rlperf.report.compare.findings import level
from rlperf.report.export import render
from rlperf.report.sections.base import Section
from rlperf.report.sections.families import fmt_value


def _diff(r: StudyRow) -> str:
    if r.reference:
        return "(reference)"
    if not np.isfinite(r.return_diff):
        return ""
    text = f"{r.return_diff:+.3g}"
    if np.isfinite(r.return_low):
        text += f" [{r.return_low:.3g}, {r.return_high:.3g}]"
    return f"{text} ({r.statistic})"


def _energy(r: StudyRow) -> str:
    value = r.mean(ENERGY)
    return fmt_value(value, 3) if np.isfinite(value) else "not measured here"


def study_section(rows: Sequence[StudyRow]) -> list[render.Block]:
    """The study's table and its claims; nothing where no edge cell names its training."""
    if not rows:
        return []
    table = pd.DataFrame({
        "algorithm": [r.algo for r in rows],
        "env": [r.env for r in rows],
        "backend": [r.backend for r in rows],
        "policies": [r.policies for r in rows],
        "runs": [len(r.cells) for r in rows],
        f"return diff [{level()} CI]": [_diff(r) for r in rows],
        "size B": [fmt_value(r.mean(SIZE), 0) for r in rows],
        "peak RSS MB": [fmt_value(r.mean(PEAK), 0) for r in rows],
        "model RSS MB": [fmt_value(r.mean(MODEL_RSS), 2) for r in rows],
        "action ms p50": [fmt_value(r.mean(P50), 3) for r in rows],
        "p99": [fmt_value(r.mean(P99), 3) for r in rows],
        "CPU J / 1k actions": [_energy(r) for r in rows],
    })  # fmt: skip
    return [
        render.Heading("Compression study", 2),
        render.Para(
            "Edge cells of trained policies, per algorithm, env and backend over the policies "
            "(training runs): the return difference against each policy's own torch "
            "reference on the same seeded episodes, averaged per policy, then the IQM over "
            f"policies with its stratified-bootstrap {level()} interval where there are 3 "
            "or more (a mean without an interval where fewer); the other columns are means "
            "over every run of the row."
        ),
        render.Table(table, "Per algorithm, env and backend, over the trained policies."),
        render.Heading("The study's claims, here", 3),
        render.Bullets(claims(rows)),
    ]


SECTION = Section(
    name="compression_study",
    title="Compression study",
    order=75,
    needs=("comparison",),
    render=lambda inputs: study_section(inputs.data("compression_study")),
    collect=lambda inputs: study_rows(inputs.comparison.cells),
)
