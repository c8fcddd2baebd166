"""Section *Findings*: the warnings, the findings (a headline each, the whole text under
it on demand; those saying the same of several cells or comparisons folded into one, the
serve findings after them) and, with ``--gate``, the gate's
verdict with one row per configuration (:mod:`rlperf.report.compare.gate`)."""

from __future__ import annotations

import pandas as pd

from rlperf.report.compare import gate
from rlperf.report.compare.findings import ONE_RUN_LINE, fold, level
from rlperf.report.export import render
from rlperf.report.result import ReportResult
from rlperf.report.sections.base import Inputs, Section
from rlperf.report.sections.families import fmt_ci, fmt_count
from rlperf.report.sections.serve import serve_findings


def findings_section(inputs: Inputs) -> list[render.Block]:
    """Warnings, findings and the gate."""
    res = inputs.result
    findings = fold(res.findings) + [(f, "") for f in serve_findings(res.serve)]
    findings = findings or [("No completed cell to compare.", "")]
    marked = any("†" in headline for headline, _ in findings)
    return [
        *[render.Warn(w) for w in res.warnings],
        render.Heading("Findings", 2),
        render.Points(findings),
        *([render.Para(ONE_RUN_LINE)] if marked else []),
        *_gate_section(res),
    ]


def _gate_section(res: ReportResult) -> list[render.Block]:
    """``--gate``: the verdict and one row per configuration."""
    if res.gate is None:
        return []
    units = {fam: a.unit for fam, a in res.analyses.items()}
    head, *_, verdict = gate.lines(res.gate, units)
    rows = gate.table(res.gate)
    table = pd.DataFrame({
        "verdict": rows["verdict"], "family": rows["family"], "configuration": rows["label"],
        f"speedup [{level()} CI]": [fmt_ci(v, a, b) for v, a, b in
                                   zip(rows["speedup"], rows["speedup_ci_low"],
                                       rows["speedup_ci_high"], strict=True)],
        "candidate": [fmt_ci(v, a, b) for v, a, b in zip(rows["candidate_value"],
                      rows["candidate_ci_low"], rows["candidate_ci_high"], strict=True)],
        "baseline": [fmt_ci(v, a, b) for v, a, b in zip(rows["baseline_value"],
                     rows["baseline_ci_low"], rows["baseline_ci_high"], strict=True)],
        "runs (candidate / baseline)": [f"{fmt_count(a)} / {fmt_count(b)}" for a, b in zip(
            rows["candidate_runs"], rows["baseline_runs"], strict=True)],
        "note": rows["note"],
    })  # fmt: skip
    return [
        render.Heading("Gate", 2),
        render.Para(f"{head.removeprefix('gate: ')}. A regression is a configuration whose "
                    "speedup interval (baseline / candidate) lies entirely below 1 − the "
                    "tolerance; `missing` ones (no completed candidate run) fail too."),
        render.Table(table),
        render.Para(f"**{verdict.removeprefix('gate: ')}**"),
    ]  # fmt: skip


SECTION = Section(
    name="findings",
    title="Findings",
    order=30,
    needs=("warnings", "findings", "serve", "gate", "analyses"),
    render=findings_section,
)
