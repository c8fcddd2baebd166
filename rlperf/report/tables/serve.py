"""Serve cells in the report: their load levels, latency against offered load per
configuration, and the highest rate under the latency bound (docs/serve.md#report).

A serve job folder holds ``levels.csv`` (one row per load level) and
``summary.json`` (``max_rate_under_slo``, ``baseline``, ``generator``); the
report reads both (:mod:`rlperf.report.read.load`) and writes ``serve_levels`` and
``serve_max_rate`` tables (:func:`write_serve_tables`); the figure
``serve_latency_vs_load`` is :mod:`rlperf.report.figures.serve`'s, the "Serving"
section :mod:`rlperf.report.sections.serve`'s. Kept apart from the training and inference
families: a serve cell is judged by its rate under the bound, not by a mean time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rlperf.report.compare.axes import AxisPlan
from rlperf.report.read.cells import Cell
from rlperf.report.tables.tidy import write_table
from rlperf.results.record import ServeRecord
from rlperf.vocabulary import Family

#: Columns of the max-rate table, with their summary.json source.
_SLO, _BASE, _GEN = (
    ServeRecord.max_rate_under_slo.name,
    ServeRecord.baseline.name,
    ServeRecord.generator.name,
)
_MAX_RATE_FIELDS = {
    "slo_ms": (_SLO, "slo_ms"),
    "max_rate_rps": (_SLO, "max_rate_rps"),
    "bounded": (_SLO, "bounded"),
    "inprocess_p50_ms": (_BASE, "inprocess_p50_ms"),
    "handle_p50_ms": (_BASE, "handle_p50_ms"),
    "http_p50_ms": (_BASE, "http_p50_ms"),
    "echo_http_p50_ms": (_BASE, "echo_http_p50_ms"),
    "serve_added_http_ms": (_BASE, "serve_added_http_ms"),
    "echo_http_capacity_rps": (_GEN, "echo_http_capacity_rps"),
}


@dataclass
class ServeTables:
    """The serve tables and the files they were written to."""

    levels: pd.DataFrame
    max_rate: pd.DataFrame
    files: list[Path] = field(default_factory=list)


def serve_cells(cells: Sequence[Cell]) -> list[Cell]:
    """The completed serve cells that have their levels."""
    return [c for c in cells if c.family == Family.serve and c.completed and c.levels is not None]


def _label(cell: Cell, plans: dict[str, AxisPlan]) -> str:
    plan = plans.get(cell.family)
    return plan.configs.get(cell.id, cell.id) if plan is not None else cell.id


def _who(cell: Cell) -> dict[str, Any]:
    return {"model": cell.axes.get("model"), "backend": cell.axes.get("backend")}


def _setting(cell: Cell, key: str) -> Any:
    return (cell.record_of(ServeRecord).serve or {}).get(key)


def levels_table(cells: Sequence[Cell], plans: dict[str, AxisPlan]) -> pd.DataFrame:
    """Every level of every serve cell, with the cell's id, configuration and model."""
    frames = []
    for c in serve_cells(cells):
        assert c.levels is not None
        slo = (c.record_of(ServeRecord).max_rate_under_slo or {}).get("slo_ms")
        frames.append(c.levels.assign(cell=c.id, config=_label(c, plans), slo_ms=slo, **_who(c)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def max_rate_table(cells: Sequence[Cell], plans: dict[str, AxisPlan]) -> pd.DataFrame:
    """One row per serve cell: the max rate under the bound, the one-request latencies."""
    rows = []
    for c in serve_cells(cells):
        row: dict[str, Any] = {"cell": c.id, "config": _label(c, plans), **_who(c)}
        for key in ("replicas", "max_batch_size", "transport"):
            row[key] = _setting(c, key)
        for col, (section, key) in _MAX_RATE_FIELDS.items():
            row[col] = (c.record.data.get(section) or {}).get(key)
        row["model_busy_share_at_max"] = _busy_at(c, row["max_rate_rps"])
        rows.append(row)
    return pd.DataFrame(rows)


def _busy_at(cell: Cell, rate: Any) -> float:
    """The replicas' model-time share at the open-loop level of ``rate``."""
    df = cell.levels
    if df is None or rate is None or "offered_rps" not in df:
        return math.nan
    hit = df[(df["loop"] == "open") & (pd.to_numeric(df["offered_rps"]) == float(rate))]
    return float(hit["model_busy_share"].iloc[0]) if len(hit) else math.nan


def write_serve_tables(
    cells: Sequence[Cell], plans: dict[str, AxisPlan], out_dir: Path
) -> ServeTables:
    """``serve_levels`` and ``serve_max_rate`` as CSV + Parquet (nothing without serve cells)."""
    levels, max_rate = levels_table(cells, plans), max_rate_table(cells, plans)
    files: list[Path] = []
    if not levels.empty:
        files += write_table(levels, out_dir, "serve_levels")
        files += write_table(max_rate, out_dir, "serve_max_rate")
    return ServeTables(levels, max_rate, files)
