"""Tidy tables: ``runs`` (one row per cell), ``iterations`` (training, one row per cell
and iteration) and ``latency`` (inference, one row per step, or per episode / run
for legacy files that only kept means), plus the per-model summary tables of the
report.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from rlperf.report.axes import AxisPlan
from rlperf.report.cells import PHASES, PRIMARY_AXES, TRAIN_METRICS, Cell
from rlperf.report.findings import FamilyAnalysis
from rlperf.report.load import as_text, included
from rlperf.results.columns import LATENCY_COLUMNS
from rlperf.runs import EXCLUDED_COLUMN, Exclusion

_ID_COLUMNS = ("cell", "label", "config")


def _axis_columns(plans: dict[str, AxisPlan]) -> list[str]:
    cols: list[str] = []
    for plan in plans.values():
        for a in ["model", *plan.varying]:
            if a not in cols and a != "group":
                cols.append(a)
    order = {a: i for i, a in enumerate(PRIMARY_AXES)}
    return sorted(cols, key=lambda a: (order.get(a, len(order)), cols.index(a)))


def _axis_values(cell: Cell, columns: Sequence[str]) -> dict[str, Any]:
    values = {**cell.leaves, **cell.axes}
    return {c: values.get(c) for c in columns}


def _coerce(df: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Axis columns hold one type each so that Parquet can store them.

    Types are decided on the distinct values only (cheap on long tables).
    """
    for c in columns:
        if c not in df:
            continue
        s = df[c]
        values = [v for v in pd.unique(s.astype(object)) if v is not None and not _isnan(v)]
        if not values:
            df[c] = s.astype("string")
        elif all(isinstance(v, bool | np.bool_) for v in values):
            df[c] = s.astype("boolean")
        elif all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values):
            df[c] = s.astype("Int64")
        elif all(isinstance(v, int | float | np.number) for v in values):
            df[c] = pd.to_numeric(s, errors="coerce").astype(float)
        else:
            df[c] = (
                s.astype(object)
                .where(s.notna(), None)
                .map(lambda v: None if v is None else str(v))
                .astype("string")
            )
    return df


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and np.isnan(v)


def _prefix(cell: Cell, plan: AxisPlan, axis_cols: Sequence[str], fp: str) -> dict[str, Any]:
    return {
        "cell": cell.id,
        "label": plan.labels.get(cell.id, cell.id),
        "config": plan.configs.get(cell.id, ""),
        **_axis_values(cell, axis_cols),
        "status": cell.status,
        "fingerprint": fp,
    }


def _long_table(
    cells: Sequence[Cell],
    attr: str,
    plans: dict[str, AxisPlan],
    fps: dict[str, str],
    head: Sequence[str],
) -> pd.DataFrame:
    """Stack one per-cell frame (``iterations`` or ``latency``) and join each cell's
    identity and axis columns (a join on a short per-cell table, not a copy per row)."""
    axis_cols = _axis_columns(plans)
    chosen = [c for c in cells if getattr(c, attr) is not None]
    if not chosen:
        return pd.DataFrame()
    body = pd.concat([getattr(c, attr) for c in chosen], keys=[c.id for c in chosen],
                     names=["cell", "_row"], sort=False).reset_index(level="cell")  # fmt: skip
    body = body.reset_index(drop=True)
    prefix = pd.DataFrame([_prefix(c, plans[c.family], axis_cols, fps.get(c.id, ""))
                           for c in chosen])  # fmt: skip
    prefix = _coerce(prefix, axis_cols)
    out = body.merge(prefix, on="cell", how="left", sort=False)
    first = [*_ID_COLUMNS, *axis_cols, "status", "fingerprint", *head]
    gpu = sorted(c for c in out.columns if c.startswith("gpu") and c not in first)
    rest = sorted(c for c in out.columns if c not in first and c not in gpu)
    out = out[[c for c in first if c in out] + gpu + rest]
    out[EXCLUDED_COLUMN] = as_text(out[EXCLUDED_COLUMN])
    return out


def iterations_table(
    cells: Sequence[Cell], plans: dict[str, AxisPlan], fps: dict[str, str]
) -> pd.DataFrame:
    """One row per training cell and iteration; canonical columns, then extras."""
    return _long_table(cells, "iterations", plans, fps,
                       ["iteration", EXCLUDED_COLUMN, "time_s", *TRAIN_METRICS])  # fmt: skip


def latency_table(
    cells: Sequence[Cell], plans: dict[str, AxisPlan], fps: dict[str, str]
) -> pd.DataFrame:
    """One row per inference sample: a step (rlperf), an episode mean or a run mean (legacy).

    ``granularity`` says which; ``n_steps`` how many steps a row stands for.
    """
    head = ["granularity", "episode", "step", EXCLUDED_COLUMN, "n_steps", *LATENCY_COLUMNS]
    return _long_table(cells, "latency", plans, fps, head)


def _train_summary(c: Cell) -> dict[str, Any]:
    df = c.iterations
    if df is None:
        return {}
    kept = included(df)
    if df.empty:
        return {"iterations": 0, "warmup_iterations": 0, "excluded_iterations": 0}
    row: dict[str, Any] = {
        "iterations": int(len(df)),
        "warmup_iterations": int(df[EXCLUDED_COLUMN].eq(Exclusion.warmup).sum()),
        "excluded_iterations": int(len(df) - len(kept)),
    }
    for col in [
        "iter_s",
        *PHASES,
        "env_steps_per_s",
        "trained_steps_per_s",
        "cpu_util_pct",
        "ram_util_pct",
    ]:
        row[f"{col}_mean"] = float(kept[col].mean()) if col in kept else np.nan
    for col in sorted(k for k in df.columns if k.startswith("gpu") and k.endswith("_pct")):
        row[f"{col}_mean"] = float(kept[col].mean())
    returns = df["episode_return_mean"].dropna()
    row["episode_return_last"] = float(returns.iloc[-1]) if len(returns) else np.nan
    row["total_env_steps"] = float(df["env_steps"].sum())
    row["wall_s"] = float(df["time_s"].max()) if df["time_s"].notna().any() else np.nan
    if c.summary.get("model_params") is not None:
        row["model_params"] = c.summary.get("model_params")
    return row


def _inference_summary(c: Cell) -> dict[str, Any]:
    df = c.latency
    row: dict[str, Any] = {}
    if df is not None and len(df):
        kept = included(df)
        row["granularity"] = str(df["granularity"].iloc[0])
        row["samples"] = int(len(kept))
        row["warmup_samples"] = int(len(df) - len(kept))
        row["steps"] = float(kept["n_steps"].sum())
        for col in LATENCY_COLUMNS:
            s = kept[col].dropna()
            if s.empty:
                continue
            row[f"{col}_mean"] = float(s.mean())
            row[f"{col}_std"] = float(s.std()) if len(s) > 1 else np.nan
            for q in (50, 90, 99):
                row[f"{col}_p{q}"] = float(s.quantile(q / 100))
            row[f"{col}_max"] = float(s.max())
    if c.episodes is not None and "return" in c.episodes:
        row["episodes"] = int(c.episodes["return"].notna().sum())
        row["return_mean"] = float(pd.to_numeric(c.episodes["return"], errors="coerce").mean())
    fid = c.summary.get("fidelity") or {}
    for key in ("agreement", "max_abs_logit_err", "mean_abs_logit_err", "return_diff",
                "threshold", "flagged", "flag_reason"):  # fmt: skip
        if key in fid:
            row[f"fidelity_{key}"] = fid[key]
    for key in ("variant", "model_size_bytes", "delegate"):
        value = c.summary.get(key)
        if value is not None:
            row[key] = json.dumps(value, sort_keys=True) if isinstance(value, dict) else value
    return row


def runs_table(
    cells: Sequence[Cell],
    plans: dict[str, AxisPlan],
    fps: dict[str, str],
    analyses: dict[str, FamilyAnalysis],
) -> pd.DataFrame:
    """One row per cell: identity, varying axes, status, summary metrics, rank and speedup."""
    axis_cols = _axis_columns(plans)
    rows = []
    for c in cells:
        row = _prefix(c, plans[c.family], axis_cols, fps.get(c.id, ""))
        row.update(
            {
                "source": c.source,
                "stage": c.stage,
                "family": c.family,
                "group": c.group,
                "machine": c.machine,
            }
        )
        try:
            row.update(_train_summary(c) if c.family == "training" else _inference_summary(c))
        except (KeyError, ValueError, IndexError, TypeError) as exc:  # never break the report
            c.notes.append(f"summary metrics not computed ({exc.__class__.__name__}: {exc})")
        a = analyses.get(c.family)
        if a is not None and c.id in a.estimates:
            e = a.estimates[c.id]
            row["objective"] = f"{a.statistic} {a.metric}"
            row["objective_value"] = e.value
            row["objective_ci_low"] = e.low
            row["objective_ci_high"] = e.high
            row["rank_in_model"] = a.ranks.get(c.id)
            sp = a.speedups.get(c.id)
            if sp is not None:
                row["baseline"] = a.baselines.get(str(c.axes.get("model")))
                row["speedup"] = sp.value
                row["speedup_ci_low"] = sp.low
                row["speedup_ci_high"] = sp.high
        row["warmup_rule"] = c.warmup_rule
        row["notes"] = "; ".join(c.notes)
        rows.append(row)
    out = pd.DataFrame(rows)
    out = _coerce(out, axis_cols)
    for col in ("rank_in_model",):
        if col in out:
            out[col] = out[col].astype("Int64")
    for col in ("fidelity_flagged",):
        if col in out:
            out[col] = out[col].astype("boolean")
    for col in (
        "delegate",
        "variant",
        "baseline",
        "granularity",
        "objective",
        "fidelity_flag_reason",
    ):
        if col in out:
            out[col] = out[col].astype("string")
    return out


def write_table(df: pd.DataFrame, out_dir: Any, name: str) -> list[Any]:
    """Write ``name``.csv and ``name``.parquet; returns the paths."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    csv = out_dir / f"{name}.csv"
    parquet = out_dir / f"{name}.parquet"
    table = pa.Table.from_pandas(df, preserve_index=False)
    pq.write_table(table, parquet)
    # pyarrow's CSV writer is several times faster than DataFrame.to_csv on long tables.
    pacsv.write_csv(table, csv)
    return [csv, parquet]
