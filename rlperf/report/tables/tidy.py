"""Tidy tables: ``runs`` (one row per cell, i.e. per run), ``configurations`` (one row
per configuration: its repeats pooled), ``iterations`` (training, one row per cell
and iteration) and ``latency`` (inference, one row per step, or per episode / run
for legacy files that only kept means).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.layout import EXCLUDED_COLUMN
from rlperf.report.compare.axes import AxisPlan
from rlperf.report.compare.findings import FamilyAnalysis
from rlperf.report.compare.study import study_way_means
from rlperf.report.read.cells import PHASES, PRIMARY_AXES, TRAIN_METRICS, Cell, included
from rlperf.report.read.energy import action_energy_summary, cpu_energy_summary, energy_summary
from rlperf.report.read.load import as_text
from rlperf.report.stats.estimates import ONE_RUN
from rlperf.report.tables.env import env_summary
from rlperf.results.columns import (
    CPU_UTIL_PCT,
    ENV_STEPS,
    ENV_STEPS_PER_S,
    ENV_WINDOW_COLUMNS,
    EPISODE_RETURN_MEAN,
    EPISODES,
    ITER_S,
    ITERATION,
    LATENCY_COLUMNS,
    RAM_UTIL_PCT,
    TIME_S,
    TRAINED_STEPS,
    TRAINED_STEPS_PER_S,
    WALL_S,
)
from rlperf.results.record import EdgeRecord, TrainRecord
from rlperf.stats.intervals import Estimate
from rlperf.vocabulary import Exclusion, Family, RunStatus

_ID_COLUMNS = ("cell", "label", "config")


@dataclass
class Tables:
    """The report's tidy tables (docs/report.md) and the files they were written to."""

    runs: pd.DataFrame
    configurations: pd.DataFrame
    iterations: pd.DataFrame
    latency: pd.DataFrame
    files: list[Path]
    targets: pd.DataFrame = field(default_factory=pd.DataFrame)
    env_windows: pd.DataFrame = field(default_factory=pd.DataFrame)  # stage=env's windows


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
    return _replaced(df, {c: _one_type(df[c]) for c in columns if c in df})


def _one_type(s: pd.Series) -> pd.Series:
    """``s`` as one dtype: nullable boolean, integer or string, or float."""
    values = [v for v in pd.unique(s.astype(object)) if v is not None and not _isnan(v)]
    if not values:
        return s.astype("string")
    if all(isinstance(v, bool | np.bool_) for v in values):
        return s.astype("boolean")
    if all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values):
        return s.astype("Int64")
    if all(isinstance(v, int | float | np.number) for v in values):
        return pd.to_numeric(s, errors="coerce").astype(float)
    return (
        s.astype(object)
        .where(s.notna(), None)
        .map(lambda v: None if v is None else str(v))
        .astype("string")
    )


def _replaced(df: pd.DataFrame, new: dict[str, pd.Series]) -> pd.DataFrame:
    """``df`` with the columns of ``new`` replaced, its columns in their order, built at once.

    Setting columns one by one (``df[c] = ...``) splits the frame into a block per column,
    and pandas warns (``PerformanceWarning: DataFrame is highly fragmented``) at the next
    column inserted into a frame of over 100 (a figure inserts one): the report's terminal
    must stay quiet. A frame built from a dict holds one block per numpy dtype.
    """
    return pd.DataFrame({c: new.get(c, df[c]) for c in df.columns}, index=df.index)


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
    return _replaced(out, {EXCLUDED_COLUMN: as_text(out[EXCLUDED_COLUMN])})


def iterations_table(
    cells: Sequence[Cell], plans: dict[str, AxisPlan], fps: dict[str, str]
) -> pd.DataFrame:
    """One row per training cell and iteration; canonical columns, then extras."""
    training = [c for c in cells if c.family != Family.env]
    return _long_table(training, "iterations", plans, fps,
                       [ITERATION, EXCLUDED_COLUMN, TIME_S, *TRAIN_METRICS])  # fmt: skip


def env_windows_table(
    cells: Sequence[Cell], plans: dict[str, AxisPlan], fps: dict[str, str]
) -> pd.DataFrame:
    """One row per ``stage=env`` cell and window (its ``metrics.csv``)."""
    env = [c for c in cells if c.family == Family.env]
    return _long_table(env, "iterations", plans, fps, ENV_WINDOW_COLUMNS)


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
        ITER_S,
        *PHASES,
        ENV_STEPS_PER_S,
        TRAINED_STEPS_PER_S,
        CPU_UTIL_PCT,
        RAM_UTIL_PCT,
    ]:
        row[f"{col}_mean"] = float(kept[col].mean()) if col in kept else np.nan
    for col in sorted(k for k in df.columns if k.startswith("gpu") and k.endswith("_pct")):
        row[f"{col}_mean"] = float(kept[col].mean())
    # Per 1 000 trained steps where the learner trains on more (replay) or fewer steps than
    # were sampled: the time per unit of learner work (rlperf.report.stats.objectives).
    if TRAINED_STEPS in kept and kept[TRAINED_STEPS].notna().any():
        trained = float(kept[TRAINED_STEPS].sum())
        sampled = float(kept[ENV_STEPS].sum()) if ENV_STEPS in kept else np.nan
        if trained > 0 and not np.isclose(trained, sampled):
            row["s_per_1k_trained_steps"] = 1000 * float(kept[ITER_S].sum()) / trained
            row["trained_per_env_step"] = trained / sampled if sampled > 0 else np.nan
    returns = df[EPISODE_RETURN_MEAN].dropna()
    row["episode_return_last"] = float(returns.iloc[-1]) if len(returns) else np.nan
    row["total_env_steps"] = float(df[ENV_STEPS].sum())
    row[WALL_S] = float(df[TIME_S].max()) if df[TIME_S].notna().any() else np.nan
    params = c.record_of(TrainRecord).model_params
    if params is not None:
        row["model_params"] = params
    row.update(energy_summary(c))
    row.update(cpu_energy_summary(c))
    row.update(study_way_means(c))
    return row


def _inference_summary(c: Cell) -> dict[str, Any]:
    df = c.latency
    row: dict[str, Any] = action_energy_summary(c)
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
        row[EPISODES] = int(c.episodes["return"].notna().sum())
        row["return_mean"] = float(pd.to_numeric(c.episodes["return"], errors="coerce").mean())
    edge = c.record_of(EdgeRecord)
    fid = edge.fidelity or {}
    for key in ("agreement", "decisive_agreement", "max_abs_logit_err", "mean_abs_logit_err",
                "action_err_mean", "action_err_p99", "action_err_max", "tolerance",
                "return_diff", "return_diff_low", "return_diff_high", "return_tie", "saturates",
                "threshold", "flagged", "flag_reason", "verdict"):  # fmt: skip
        if key in fid:
            row[f"fidelity_{key}"] = fid[key]
    if (fid.get("reference") or {}).get("vacuous_reason"):
        row["fidelity_vacuous_reason"] = fid["reference"]["vacuous_reason"]
    if isinstance(edge.weights, dict):
        row["weight_sparsity"] = edge.weights.get("sparsity")
    built = (edge.calibration or {}).get("compression") or {}
    if "holdout_loss_kept" in built:  # a fine-tuned variant (rlperf.tflite.compress)
        row["finetune_holdout_mse"] = built["holdout_loss_kept"]
        row["finetune_lr"] = built.get("lr_chosen")
    memory = edge.memory or {}
    for key in ("peak_rss_mb", "model_rss_mb"):
        if memory.get(key) is not None:
            row[key] = memory[key]
    tensors = (edge.model_info or {}).get("tensor_bytes") or {}
    if tensors.get("variable") is not None:  # the interpreter arena's upper bound
        row["tensor_bytes_variable"] = tensors["variable"]
    recorded = {
        "variant": edge.variant,
        "model_size_bytes": edge.model_size_bytes,
        "model_gzip_bytes": edge.model_gzip_bytes,
        "delegate": edge.delegate,
    }
    for key, value in recorded.items():
        if value is not None:
            row[key] = json.dumps(value, sort_keys=True) if isinstance(value, dict) else value
    return row


def runs_table(
    cells: Sequence[Cell],
    plans: dict[str, AxisPlan],
    fps: dict[str, str],
    analyses: dict[str, FamilyAnalysis],
) -> pd.DataFrame:
    """One row per cell (run): identity, varying axes, status, summary metrics, the run's
    own objective estimate, and the rank and speedup of its configuration."""
    axis_cols = _axis_columns(plans)
    conf_of = {c.id: (a, conf) for a in analyses.values()
               for conf in a.configurations.values() for c in conf.cells}  # fmt: skip
    rows = []
    for c in cells:
        row = _prefix(c, plans[c.family], axis_cols, fps.get(c.id, ""))
        row.update({"source": c.source, "stage": c.stage, "family": c.family, "group": c.group,
                    "machine": c.machine})  # fmt: skip
        try:
            summary: dict[str, Any] = {Family.training: _train_summary, Family.env: env_summary}
            row.update(summary.get(c.family, _inference_summary)(c))
        except (KeyError, ValueError, IndexError, TypeError) as exc:  # never break the report
            c.notes.append(f"summary metrics not computed ({exc.__class__.__name__}: {exc})")
        if c.id in conf_of:
            a, conf = conf_of[c.id]
            row["configuration"] = conf.id
            row["repeats"] = conf.repeats
            row["workload"] = conf.workload
            row.update(_estimate_columns(a, a.run_estimates.get(c.id), conf.id))
            row.update(_throughput_columns(a.run_throughput.get(c.id)))
            row.update(_ranking_columns(a, conf.id))
        row["warmup_rule"] = c.warmup_rule
        row["notes"] = "; ".join(c.notes)
        rows.append(row)
    return _typed(_coerce(pd.DataFrame(rows), axis_cols))


def _estimate_columns(a: FamilyAnalysis, e: Estimate | None, conf_id: str) -> dict[str, Any]:
    """``objective`` (its name), ``objective_key`` (what ``--objective`` calls it),
    ``objective_unit``, ``objective_value`` and its interval (``objective_ci_low`` /
    ``_high``): the objective of the configuration's workload."""
    if e is None:
        return {}
    obj = a.objective_for(conf_id)
    return {"objective": obj.name, "objective_key": obj.key, "objective_unit": obj.unit,
            "objective_value": e.value, "objective_ci_low": e.low,
            "objective_ci_high": e.high}  # fmt: skip


def _throughput_columns(e: Estimate | None) -> dict[str, Any]:
    """``throughput`` (env steps per second over the non-excluded iterations: their total
    env steps over their total time) and its interval."""
    if e is None:
        return {}
    return {"throughput": e.value, "throughput_ci_low": e.low, "throughput_ci_high": e.high}


def _ranking_columns(a: FamilyAnalysis, conf_id: str) -> dict[str, Any]:
    """A configuration's ``rank_in_workload``, ``baseline`` and ``speedup`` with its interval."""
    if conf_id not in a.estimates:
        return {}
    row: dict[str, Any] = {"rank_in_workload": a.ranks.get(conf_id)}
    sp = a.speedups.get(conf_id)
    if sp is not None:
        row["baseline"] = a.baselines.get(a.configurations[conf_id].workload)
        row.update(speedup=sp.value, speedup_ci_low=sp.low, speedup_ci_high=sp.high)
    return row


def _typed(out: pd.DataFrame) -> pd.DataFrame:
    """Nullable integer, boolean and string dtypes for the columns Parquet needs typed."""
    dtypes = {
        **dict.fromkeys(("rank_in_workload", "repeats", "runs"), "Int64"),
        **dict.fromkeys(("fidelity_flagged", "fidelity_return_tie", "fidelity_saturates"),
                        "boolean"),
        **dict.fromkeys(("delegate", "variant", "baseline", "granularity", "objective",
                         "objective_key", "objective_unit", "workload", "fidelity_flag_reason",
                         "fidelity_verdict", "fidelity_vacuous_reason", "configuration",
                         "interval", "energy_source", "energy_unavailable", "cells"),
                        "string"),
    }  # fmt: skip
    return _replaced(out, {c: out[c].astype(t) for c, t in dtypes.items() if c in out})


#: Per-run columns that add up over the runs of a configuration (the others are averaged).
SUMMED = ("iterations", "warmup_iterations", "excluded_iterations", "samples", "warmup_samples",
          "steps", EPISODES, "total_env_steps", "gpu_energy_j", "job_gpu_energy_j")  # fmt: skip

#: runs.csv columns that describe one run only (not carried into configurations.csv).
_PER_RUN = ("cell", "label", "status", "group", "notes", "warmup_rule", "objective_value",
            "objective_ci_low", "objective_ci_high", "configuration", "repeats", "throughput",
            "throughput_ci_low", "throughput_ci_high")  # fmt: skip


def configurations_table(
    runs: pd.DataFrame, analyses: dict[str, FamilyAnalysis], plans: dict[str, AxisPlan]
) -> pd.DataFrame:
    """One row per configuration: its runs (cells), the objective over them with its interval
    (run to run where it ran several times), rank and speedup, and the runs' summary metrics
    (counts summed, other numbers averaged over the completed runs)."""
    rows = []
    by_cell = runs.set_index("cell", drop=False)
    keep_first = {"model", *_axis_columns(plans)}
    for fam, a in analyses.items():
        for conf in a.configurations.values():
            done = [c.id for c in conf.completed] or [c.id for c in conf.cells]
            sub = by_cell.loc[done]
            row = _aggregate(sub, keep_first)
            row["configuration"] = conf.id
            row["label"] = plans[fam].configuration_labels.get(conf.id, conf.id)
            row["status"] = RunStatus.completed if conf.completed else str(sub["status"].iloc[0])
            row["repeats"], row["runs"] = conf.repeats, len(conf.cells)
            row["cells"] = "; ".join(c.id for c in conf.cells)
            row["workload"] = conf.workload
            row.update(_throughput_columns(a.throughput.get(conf.id)))
            e = a.estimates.get(conf.id)
            if e is not None:
                row.update(_estimate_columns(a, e, conf.id))
                row["objective_n"] = e.n
                row["interval"] = "run to run" if e.across_runs else ONE_RUN
            row.update(_ranking_columns(a, conf.id))
            rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    first = [c for c in _CONFIGURATION_HEAD if c in out]
    out = out[first + [c for c in out.columns if c not in first]]
    return _typed(_coerce(out, sorted(keep_first)))


_CONFIGURATION_HEAD = ("configuration", "label", "config", "family", "workload", "model",
                       "status", "repeats", "runs", "cells", "objective", "objective_key",
                       "objective_unit", "objective_value",
                       "objective_ci_low", "objective_ci_high", "objective_n", "interval",
                       "rank_in_workload", "baseline", "speedup", "speedup_ci_low",
                       "speedup_ci_high", "throughput", "throughput_ci_low",
                       "throughput_ci_high")  # fmt: skip


def _aggregate(sub: pd.DataFrame, keep_first: set[str]) -> dict[str, Any]:
    """The runs' summary columns: counts summed, numbers averaged, axis values and text the
    first run's (columns describing one run only are left out)."""
    row: dict[str, Any] = {}
    for col in sub.columns:
        if col in _PER_RUN or col.startswith(("rank_in_workload", "speedup", "baseline")):
            continue
        s = sub[col]
        numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        if numeric and col not in keep_first:
            row[col] = s.sum(min_count=1) if col in SUMMED else s.mean()
        else:
            row[col] = s.iloc[0]
    return row


def write_table(df: pd.DataFrame, out_dir: Any, name: str) -> list[Any]:
    """Write ``name``.csv and ``name``.parquet; returns the paths."""
    # pyarrow is only needed to write, so reading cells (tests, --gate's baseline) skips it.
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
