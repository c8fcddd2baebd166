"""The text of the report: the blocks that :mod:`rlperf.report.export.render` writes as
``report.md`` and ``report.html``.

Sections, in reading order: what was read → the answers to the users' questions
(:mod:`.answers`) → warnings and findings, those saying the same of several cells folded
into one line (and the gate's verdict) → time to target → across workloads and across
machines (:mod:`.across`) → scaling (:mod:`.scaling`) → returns (:mod:`.returns`) →
searches (:mod:`.search`) → one section per comparison family with a table per
comparison set (:mod:`.family_tables`) → serving (:mod:`.serve`) → methods
(:mod:`.methods`) → figures → fingerprints → cells.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from rlperf.report.compare import gate
from rlperf.report.compare.axes import AxisPlan
from rlperf.report.compare.findings import fold, level
from rlperf.report.export import render
from rlperf.report.figures.registry import FIGURES
from rlperf.report.figures.serve import CAPTION as SERVE_CAPTION
from rlperf.report.figures.serve import FIGURE as SERVE_FIGURE
from rlperf.report.read.cells import ENV_FAMILY, SERVE_FAMILY
from rlperf.report.read.fingerprints import FingerprintGroup
from rlperf.report.result import ReportResult
from rlperf.report.sections.answers import answers_section
from rlperf.report.sections.families import family_section, fmt_ci, fmt_count
from rlperf.report.sections.methods import methods_section
from rlperf.report.sections.returns import returns_section
from rlperf.report.sections.scaling import scaling_section
from rlperf.report.sections.search import search_section
from rlperf.report.sections.serve import serve_findings, serve_section
from rlperf.report.stats import estimates

_FILES = (
    "Tables: `runs.csv` (one row per cell, i.e. per run), `configurations.csv` (one row per "
    "configuration, repeats pooled), `iterations.csv` (training, per iteration), "
    "`latency.csv` (inference samples), `gate.csv` (with `--gate`), each also as Parquet. "
    "Figures: `figures/*.png` and `.svg`."
)


def document(
    res: ReportResult, plans: dict[str, AxisPlan], sweeps: Sequence[Path], paths: Sequence[Path]
) -> list[render.Block]:
    """Every block of the report, in reading order."""
    blocks = _summary(res, paths, plans)
    blocks += _targets_section(res)
    blocks += _across_section(res, plans)
    blocks += scaling_section(res.scaling)  # rlperf.report.compare.scaling
    blocks += returns_section(res.returns)  # rlperf.report.compare.returns
    blocks += search_section(res.searches)  # rlperf.report.read.searches
    first = ("training", "inference", ENV_FAMILY)
    others = [f for f in plans if f not in first and f != SERVE_FAMILY]
    for fam in (*first, *others):
        if fam in plans:
            blocks += family_section(res, fam, plans[fam])
    blocks += serve_section(res)  # rlperf.report.tables.serve: ranked by rate, not by time
    blocks += methods_section(res, sweeps)
    blocks += _figures_section(res)
    blocks += _fingerprints_section(res.fingerprint_groups)
    blocks += _cells_section(res, plans)
    return blocks


def _summary(
    res: ReportResult, paths: Sequence[Path], plans: dict[str, AxisPlan]
) -> list[render.Block]:
    """Title, what was read, the answers, warnings and findings."""
    now = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    n_ok = sum(c.completed for c in res.cells)
    read = render.Para(
        f"Generated {now} from {len(res.cells)} cells ({n_ok} completed; "
        f"{sum(not s.duplicate for s in res.skipped)} unreadable and "
        f"{sum(s.duplicate for s in res.skipped)} duplicate folders skipped) under "
        + ", ".join(f"`{p}`" for p in paths)
        + "."
    )
    findings = fold(res.findings) + serve_findings(res.serve)
    findings = findings or ["No completed cell to compare."]
    return [
        render.Heading("rlperf report", 1),
        read,
        *answers_section(res, plans),
        *[render.Warn(w) for w in res.warnings],
        render.Heading("Findings", 2),
        render.Bullets(findings),
        *_gate_section(res),
    ]


def _targets_section(res: ReportResult) -> list[render.Block]:
    """Time-to-target ranking (:mod:`rlperf.report.stats.targets`); the runs that missed listed."""
    t = res.targets
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


def _across_section(res: ReportResult, plans: dict[str, AxisPlan]) -> list[render.Block]:
    """The cross-workload and cross-machine tables (:mod:`rlperf.report.compare.across`)."""
    blocks: list[render.Block] = []
    for t in res.across:
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
            fmt_ci(v, a, b) for v, a, b in zip(rows["frames_per_s"], rows["frames_per_s_low"],
                                               rows["frames_per_s_high"], strict=True)]
        if frames else None,
        "frames per env step": [fmt_ci(v, None, None) for v in rows["frames_per_step"]]
        if frames else None,
        f"env steps/s [{level()} CI]": [
            fmt_ci(v, a, b) for v, a, b in zip(rows["env_steps_per_s"],
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
        out[head] = [fmt_ci(e.value, e.low, e.high) if isinstance(e, estimates.Estimate) else ""
                     for e in rows[col]]  # fmt: skip
    return out


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


def _figures_section(res: ReportResult) -> list[render.Block]:
    blocks: list[render.Block] = [render.Heading("Figures", 2)]
    for name, (_, caption) in FIGURES.items():
        if name in res.figures:
            blocks.append(render.Image(res.figures[name], caption))
    if SERVE_FIGURE in res.figures:
        blocks.append(render.Image(res.figures[SERVE_FIGURE], SERVE_CAPTION))
    if not res.figures and not res.figures_skipped:
        blocks.append(render.Para("Figures were not drawn (`--no-figures`)."))
    if res.figures_skipped:
        why = "; ".join(f"{n} ({why})" for n, why in res.figures_skipped.items())
        blocks.append(render.Para(f"Not drawn: {why}."))
    return blocks


def _fingerprints_section(groups: dict[str, FingerprintGroup]) -> list[render.Block]:
    table = pd.DataFrame(
        {
            "fingerprint": [g.name for g in groups.values()],
            "machine": [g.machine for g in groups.values()],
            "cells": [len(g.cells) for g in groups.values()],
            "fields": [
                ", ".join(f"{k}={v}" for k, v in list(g.fingerprint.items())[:12])
                for g in groups.values()
            ],
        }
    )
    return [render.Heading("Fingerprints", 2),
            render.Collapsed(f"{len(table)} fingerprint(s): every comparable field",
                             [render.Table(table)])]  # fmt: skip


def _cells_section(res: ReportResult, plans: dict[str, AxisPlan]) -> list[render.Block]:
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
