"""Serve cells in the report: their load levels, latency against offered load per
configuration, and the highest rate under the latency bound (docs/serve.md#report).

A serve job folder holds ``levels.csv`` (one row per load level) and
``summary.json`` (``max_rate_under_slo``, ``baseline``, ``generator``); the
report reads both (:mod:`rlperf.report.load`), writes ``serve_levels`` and
``serve_max_rate`` tables (:func:`write_serve_tables`), draws
``serve_latency_vs_load`` (:func:`draw_serve_figures`) and adds a "Serving"
section (:func:`serve_section`). Kept apart from the training and inference
families: a serve cell is judged by its rate under the bound, not by a mean time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.layout import is_excluded
from rlperf.report import render
from rlperf.report.axes import AxisPlan
from rlperf.report.cells import Cell
from rlperf.report.plot import DPI, save
from rlperf.report.tables import write_table

#: The figure this module draws, and its caption.
FIGURE = "serve_latency_vs_load"
CAPTION = (
    "Serving: p50 and p99 latency (from the scheduled send time, order-statistic intervals "
    "at serve.confidence) against the offered Poisson rate, one panel per configuration; "
    "the dashed line is the p99 bound; hollow markers: levels not counted (the generator "
    "fell behind its schedule, or a replica was killed during the level); an infinite upper "
    "bound (too few requests, or failed ones) is not drawn."
)

#: Columns of the max-rate table, with their summary.json source.
_MAX_RATE_FIELDS = {
    "slo_ms": ("max_rate_under_slo", "slo_ms"),
    "max_rate_rps": ("max_rate_under_slo", "max_rate_rps"),
    "bounded": ("max_rate_under_slo", "bounded"),
    "inprocess_p50_ms": ("baseline", "inprocess_p50_ms"),
    "handle_p50_ms": ("baseline", "handle_p50_ms"),
    "http_p50_ms": ("baseline", "http_p50_ms"),
    "echo_http_p50_ms": ("baseline", "echo_http_p50_ms"),
    "serve_added_http_ms": ("baseline", "serve_added_http_ms"),
    "echo_http_capacity_rps": ("generator", "echo_http_capacity_rps"),
}


@dataclass
class ServeTables:
    """The serve tables and the files they were written to."""

    levels: pd.DataFrame
    max_rate: pd.DataFrame
    files: list[Path] = field(default_factory=list)


def serve_cells(cells: Sequence[Cell]) -> list[Cell]:
    """The completed serve cells that have their levels."""
    return [c for c in cells if c.stage == "serve" and c.completed and c.levels is not None]


def _label(cell: Cell, plans: dict[str, AxisPlan]) -> str:
    plan = plans.get(cell.family)
    return plan.configs.get(cell.id, cell.id) if plan is not None else cell.id


def _who(cell: Cell) -> dict[str, Any]:
    return {"model": cell.axes.get("model"), "backend": cell.axes.get("backend")}


def _setting(cell: Cell, key: str) -> Any:
    return (cell.summary.get("serve") or {}).get(key)


def levels_table(cells: Sequence[Cell], plans: dict[str, AxisPlan]) -> pd.DataFrame:
    """Every level of every serve cell, with the cell's id, configuration and model."""
    frames = []
    for c in serve_cells(cells):
        assert c.levels is not None
        slo = (c.summary.get("max_rate_under_slo") or {}).get("slo_ms")
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
            row[col] = (c.summary.get(section) or {}).get(key)
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


def draw_serve_figures(data: ServeTables, out: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """The latency-vs-offered-load figure; (drawn, reason not drawn) like the figure registry."""
    if data.levels.empty:
        return {}, {}
    try:
        return {FIGURE: latency_vs_load(data.levels, out)}, {}
    except Exception as exc:  # noqa: BLE001 - one broken figure must not lose the report
        return {}, {FIGURE: f"failed: {exc.__class__.__name__}: {exc}"}


def latency_vs_load(levels: pd.DataFrame, out: Path) -> Path:
    """One panel per configuration: p50 and p99 (with intervals) against the offered rate."""
    from matplotlib.figure import Figure  # only where a figure is drawn (rlperf.report.plot)

    load = levels[(levels["loop"] == "open") & (levels["phase"] == "load")]
    configs = sorted(load["config"].astype(str).unique())
    cols = min(3, max(1, len(configs)))
    rows = math.ceil(len(configs) / cols)
    fig = Figure(figsize=(4.2 * cols, 3.2 * rows), dpi=DPI, layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for ax, config in zip(axes, configs, strict=False):
        _panel(ax, load[load["config"].astype(str) == config], config)
    for ax in axes[len(configs) :]:
        ax.set_visible(False)
    out.mkdir(parents=True, exist_ok=True)
    return save(fig, out, FIGURE)


def _counted(sub: pd.DataFrame) -> np.ndarray:
    """Levels that count: the generator kept the schedule and no replica was killed."""
    kept = sub["on_schedule"].astype(str).str.lower().isin(["true", "1", "1.0"]).to_numpy()
    if "excluded" in sub:
        kept = kept & ~sub["excluded"].map(is_excluded).to_numpy(dtype=bool)
    return kept


def _panel(ax: Any, sub: pd.DataFrame, config: str) -> None:
    sub = sub.sort_values("offered_rps")
    rate = pd.to_numeric(sub["offered_rps"]).to_numpy(dtype=float)
    kept = _counted(sub)
    for name, color in (("p50", "#0173b2"), ("p99", "#d55e00")):
        # An infinite estimate (failed requests count as infinitely late) is not drawn.
        est = pd.to_numeric(sub[f"{name}_ms"]).to_numpy(dtype=float)
        est = np.where(np.isfinite(est), est, np.nan)
        lo = pd.to_numeric(sub[f"{name}_lo_ms"]).to_numpy(dtype=float)
        hi = pd.to_numeric(sub[f"{name}_hi_ms"]).to_numpy(dtype=float)
        err = [np.nan_to_num(est - lo, nan=0.0), np.where(np.isfinite(hi), hi - est, 0.0)]
        ax.errorbar(rate, est, yerr=np.clip(err, 0, None), color=color, capsize=3, label=name)
        ax.scatter(rate[kept], est[kept], color=color, zorder=3)
        ax.scatter(rate[~kept], est[~kept], facecolors="white", edgecolors=color, zorder=3)
    slo = pd.to_numeric(sub["slo_ms"], errors="coerce").dropna() if "slo_ms" in sub else None
    if slo is not None and len(slo):
        ax.axhline(float(slo.iloc[0]), color="#949494", ls="--", label="p99 bound")
    ax.set_yscale("log")
    ax.set_xlabel("offered rate (requests/s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(config, fontsize=9)
    ax.legend(fontsize=8)


def serve_section(res: Any) -> list[render.Block]:
    """The report's "Serving" section: the max-rate table (empty without serve cells)."""
    data: ServeTables | None = getattr(res, "serve", None)
    if data is None or data.max_rate.empty:
        return []
    df = data.max_rate.copy()
    rates = [_rate(r, b) for r, b in zip(df["max_rate_rps"], df["bounded"], strict=True)]
    show = pd.DataFrame({
        "configuration": df["config"],
        "model": df["model"],
        "max rate under p99 bound (req/s)": rates,
        "p99 bound (ms)": df["slo_ms"].map(_num),
        "model busy share at that rate": df["model_busy_share_at_max"].map(_num),
        "in-process p50 (ms)": df["inprocess_p50_ms"].map(_num),
        "HTTP p50 (ms)": df["http_p50_ms"].map(_num),
        "echo HTTP p50 (ms)": df["echo_http_p50_ms"].map(_num),
        "Serve adds (ms)": df["serve_added_http_ms"].map(_num),
        "echo HTTP capacity (req/s)": df["echo_http_capacity_rps"].map(_num),
    })  # fmt: skip
    return [
        render.Heading("Serving", 2),
        render.Para(
            "The highest offered Poisson rate whose p99 latency's upper 95% bound meets the "
            "bound, searched over the open-loop levels the generator kept on schedule "
            "(MLPerf's Server scenario); latency counts from the scheduled send time. "
            "Baseline columns: one request at a time; echo HTTP capacity: what the "
            "generator and the proxy sustain without a model, so a max rate near it "
            "measures the client as much as the policy (docs/serve.md)."
        ),
        render.Table(show.sort_values("configuration")),
    ]


def serve_findings(data: ServeTables | None) -> list[str]:
    """One sentence per serve cell: its max rate under the bound and what Serve adds."""
    if data is None or data.max_rate.empty:
        return []
    out = []
    for r in data.max_rate.sort_values("config").to_dict("records"):
        rate = _rate(r["max_rate_rps"], r["bounded"])
        where = f"serve `{r['config']}` ({r['model']}, {r['backend']})"
        met = (
            f"no Poisson rate tried met the p99 bound of {_num(r['slo_ms'])} ms"
            if rate == "none met it"
            else f"the highest Poisson rate meeting the p99 bound of {_num(r['slo_ms'])} ms "
            f"is {rate} req/s"
        )
        added = f"; Serve over HTTP adds {_num(r['serve_added_http_ms'])} ms at p50 over in-process"
        out.append(f"{where}: {met}{added}.")
    return out


def _num(v: Any) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if not math.isfinite(x) else (f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}")


def _rate(rate: Any, bounded: Any) -> str:
    if rate is None or (isinstance(rate, float) and not math.isfinite(rate)):
        return "none met it"
    return f"{float(rate):g}" + ("" if bool(bounded) else " (or more: no level above failed)")
