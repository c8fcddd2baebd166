"""Section *across workloads* and *across machines*: the cross-workload and cross-machine
tables (:mod:`rlperf.report.compare.across`), one heading each."""

from __future__ import annotations

import pandas as pd

from rlperf.report.compare.across import AcrossTable, across_machines, across_workloads
from rlperf.report.compare.findings import level
from rlperf.report.export import render
from rlperf.report.sections.base import Inputs, Section
from rlperf.report.sections.families import fmt_ci, fmt_count
from rlperf.results.columns import ENV_STEPS_PER_S, FRAMES_PER_S
from rlperf.stats.intervals import Estimate


def collect(inputs: Inputs) -> list[AcrossTable]:
    """One table per family across its workloads, then the tables across machines."""
    analyses = inputs.result.analyses
    tables = [t for t in (across_workloads(a) for a in analyses.values()) if t is not None]
    return tables + across_machines(inputs.comparison, analyses)


def across_section(inputs: Inputs) -> list[render.Block]:
    """Each table with its heading and caption."""
    plans = inputs.plans
    blocks: list[render.Block] = []
    for t in inputs.data("across"):
        labels = plans[t.family].configuration_labels if t.family in plans else {}
        blocks.append(render.Heading(t.heading, 2))
        blocks.append(render.Para(t.caption))
        if t.kind == "workloads":
            blocks.append(render.Table(_workloads_table(t.rows, labels, t.ranked)))
            blocks += [render.Para(n) for n in t.notes]
        else:
            blocks.append(render.Table(_machines_table(t.rows, labels)))
    return blocks


def _workloads_table(rows: pd.DataFrame, labels: dict[str, str], ranked: bool) -> pd.DataFrame:
    frames = bool(rows["frames_per_step"].notna().any())
    out = {
        "rank": [fmt_count(v) if pd.notna(v) else "" for v in rows["rank"]] if ranked else None,
        "configuration": [labels.get(c, c) for c in rows["configuration"]],
        "workload": rows["workload"].to_numpy(),
        f"emulator frames/s [{level()} CI]": [
            fmt_ci(v, a, b) for v, a, b in zip(rows[FRAMES_PER_S], rows["frames_per_s_low"],
                                               rows["frames_per_s_high"], strict=True)]
        if frames else None,
        "frames per env step": [fmt_ci(v, None, None) for v in rows["frames_per_step"]]
        if frames else None,
        f"env steps/s [{level()} CI]": [
            fmt_ci(v, a, b) for v, a, b in zip(rows[ENV_STEPS_PER_S],
                                               rows["env_steps_per_s_low"],
                                               rows["env_steps_per_s_high"], strict=True)],
    }  # fmt: skip
    return pd.DataFrame({k: v for k, v in out.items() if v is not None})


def _machines_table(rows: pd.DataFrame, labels: dict[str, str]) -> pd.DataFrame:
    out = pd.DataFrame({
        "configuration": [labels.get(c, c) for c in rows["configuration"]],
        "workload": rows["workload"].to_numpy(),
        "objective": rows["objective"].to_numpy(),
    })  # fmt: skip
    for col in rows.columns:
        if col in ("configuration", "workload", "objective"):
            continue
        head = f"speedup {col} [{level()} CI]" if " over " in col else col
        out[head] = [fmt_ci(e.value, e.low, e.high) if isinstance(e, Estimate) else ""
                     for e in rows[col]]  # fmt: skip
    return out


SECTION = Section(
    name="across",
    title="Across workloads / across machines",
    order=50,
    needs=("analyses", "comparison", "plans"),
    render=across_section,
    collect=collect,
)
