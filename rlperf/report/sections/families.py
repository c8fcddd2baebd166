"""The report's family sections: for each comparison family (training, inference, a new
stage's), what differs, the speedup baseline and one ranked table per model, with the
study's way side by side for legacy runs; and the number formats every table uses."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from rlperf.report.compare.axes import AxisPlan, within_set
from rlperf.report.compare.findings import level
from rlperf.report.compare.study import side_by_side
from rlperf.report.export import render
from rlperf.report.read.cells import PHASES
from rlperf.report.read.fingerprints import FingerprintGroup, differing_keys
from rlperf.report.result import ReportResult
from rlperf.report.sections.base import Inputs, Section
from rlperf.report.stats.estimates import ONE_RUN
from rlperf.results.columns import (
    ACTION_MS,
    ACTION_MS_P50,
    FORWARD_MS,
    FRAMES_PER_S,
    ITER_S,
    STEP_MS_P50,
    STEP_MS_P99,
)
from rlperf.vocabulary import Family, RunStatus

_FAMILY_TITLES: dict[str, str] = {
    Family.training: "Training",
    Family.inference: "Inference (rollout and edge)",
    Family.env: "Env throughput (stage=env)",
}


_GRANULARITY = {"step": "steps", "episode_mean": "episode means", "run_mean": "run mean"}


def family_section(res: ReportResult, fam: str, plan: AxisPlan) -> list[render.Block]:
    """What differs, the speedup baseline, and one ranked table per workload."""
    shown = [a for a in plan.axes if a != "model"]
    common = ", ".join(f"{k}={v}" for k, v in plan.constants.items() if v is not None)
    blocks: list[render.Block] = [
        render.Heading(_FAMILY_TITLES.get(fam, fam), 2),
        render.Para(
            "Configurations differ in: "
            + (", ".join(f"`{a}`" for a in shown) or "nothing")
            + (f". Common to all: {common}." if common else ".")
        ),
    ]
    a = res.analyses.get(fam)
    if a is not None and a.baselines:
        how = "`--baseline`" if a.baseline_chosen else "default: the slowest of each comparison"
        blocks.append(
            render.Para(
                f"Speedup baseline ({how}): "
                + "; ".join(f"{w}: `{plan.configs[c]}`" for w, c in sorted(a.baselines.items()))
                + "."
            )
        )
    confs = res.configurations
    if confs.empty:
        return blocks
    rows_all = confs[(confs["family"] == fam) & (confs["status"] == RunStatus.completed)]
    for workload in sorted(rows_all["workload"].dropna().astype(str).unique()):
        rows = rows_all[rows_all["workload"].astype(str) == workload]
        blocks += _workload_tables(res, fam, workload, rows)
    return blocks


_RUNS_CAPTION = (
    "One row per configuration. runs > 1: the configuration ran several times (cells differ "
    "only in seed); its value is the geometric mean of its runs' values and the interval "
    "is run to run. runs = 1: the interval is over that run's samples."
)


_LEGACY_CAPTION = (
    "Legacy RLlib 1.x runs both ways: phase times (mean s per non-warm-up iteration) as the "
    "study computed them (10-iteration window means) / as rlperf does (per iteration), and "
    "rlperf's difference from the study"
)


def _workload_tables(
    res: ReportResult, fam: str, workload: str, rows: pd.DataFrame
) -> list[render.Block]:
    """One workload's ranked table (what it holds constant and what it is ranked on in its
    caption), and for legacy runs the study's way side by side."""
    rows = rows.sort_values(["objective_value", "config"], na_position="last")
    blocks: list[render.Block] = [render.Heading(workload, 3)]
    if (fam, workload) in res.mixed:
        blocks.append(render.Warn(_mixed_text(res.mixed[(fam, workload)], res.fingerprint_groups)))
    a = res.analyses.get(fam)
    objective = a.objective_for(str(rows["configuration"].iloc[0])) if a is not None else None
    tables: dict[str, Any] = {Family.training: _training_table, Family.env: _env_table}
    table = tables[fam](rows, objective) if fam in tables else _inference_table(rows)
    caption = _ranked_on(res, fam, workload, objective)
    if (_col(rows, "repeats").fillna(1) > 1).any():
        caption += " " + _RUNS_CAPTION
    if any(_one_run(rows)):
        caption += (f" {ONE_RUN_MARK.strip()} {ONE_RUN}: the interval is over that run's own "
                    "samples, and a second run may land outside it.")  # fmt: skip
    blocks += [render.Table(table, caption), _cells_table(rows)]
    legacy = side_by_side(rows) if fam == Family.training else pd.DataFrame()
    if not legacy.empty:
        blocks.append(render.Table(legacy, _LEGACY_CAPTION))
    return blocks


def _ranked_on(res: ReportResult, fam: str, workload: str, objective: Any) -> str:
    """The caption's first sentences: what the table holds constant and its objective."""
    text = f"Holds constant its workload, {workload} (in full under Workloads, at the top). "
    if objective is None:
        return text.strip()
    a = res.analyses[fam]
    why = a.objective_why.get(workload, "")
    return (
        text
        + f"Ranked on {objective.name} ({objective.unit}, lower is better)"
        + (f": {why}." if why else ".")
    )


def _mixed_text(names: list[str], groups: dict[str, FingerprintGroup]) -> str:
    desc = "; ".join(
        f"{n} = {groups[n].machine or 'unknown'} ({len(groups[n].cells)} cells)" for n in names
    )
    diff = differing_keys(groups[n].fingerprint for n in names)
    return (
        f"rows of this table were recorded on different hardware or software: {desc}. "
        f"Differing fingerprint fields: {', '.join(diff) or 'n/a'}."
    )


def fmt_value(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)) or v is pd.NA:
        return ""
    if isinstance(v, float | np.floating):
        size = abs(float(v))
        if size >= 1000:
            return f"{v:,.0f}"
        text = f"{v:.{digits}g}"
        # 99.7 with 2 digits is "1e+02" in g format: a whole number reads better.
        return f"{v:.0f}" if size >= 10**digits or "e" in text else text
    return str(v)


def fmt_ci(v: Any, lo: Any, hi: Any) -> str:
    if not fmt_value(v):
        return ""
    if not fmt_value(lo) or not fmt_value(hi):
        return fmt_value(v)
    return f"{fmt_value(v)} [{fmt_value(lo)}, {fmt_value(hi)}]"


def _rank(r: pd.Series, best_rank: int = 1) -> str:
    rank = r.get("rank_in_workload")
    if rank is None or pd.isna(rank):
        return ""
    return f"{int(rank)}"


def _col(rows: pd.DataFrame, name: str) -> pd.Series:
    """A column of the runs table, or NaN where no cell had it."""
    return rows[name] if name in rows else pd.Series(np.nan, index=rows.index, dtype=float)


def _fmt_col(rows: pd.DataFrame, name: str, digits: int = 3) -> np.ndarray:
    return _col(rows, name).map(lambda v: fmt_value(v, digits)).to_numpy()


#: After an objective or speedup resting on one run's own interval (the caption says why).
ONE_RUN_MARK = " †"


def _ci_col(rows: pd.DataFrame, prefix: str) -> list[str]:
    """``value [low, high]`` of ``speedup``, ``throughput`` or the objective; the objective
    and the speedup of a configuration measured once carry :data:`ONE_RUN_MARK`."""
    value = prefix if prefix in ("speedup", "throughput") else "objective_value"
    stem = prefix if prefix in ("speedup", "throughput") else "objective"
    lo, hi = f"{stem}_ci_low", f"{stem}_ci_high"
    once = _one_run(rows) if prefix != "throughput" else [False] * len(rows)
    return [fmt_ci(v, a, b) + (ONE_RUN_MARK if o and fmt_value(a) else "")
            for v, a, b, o in zip(_col(rows, value), _col(rows, lo), _col(rows, hi), once,
                                  strict=True)]  # fmt: skip


def _one_run(rows: pd.DataFrame) -> list[bool]:
    """Per row: its interval is within one run (``interval`` column)."""
    return [v == ONE_RUN for v in (rows["interval"] if "interval" in rows else [None] * len(rows))]


def fmt_count(v: Any) -> str:
    return f"{int(v)}" if fmt_value(v) else "0"


def _cells(rows: pd.DataFrame) -> list[str]:
    """A configuration's cells as code spans."""
    return [", ".join(f"`{c}`" for c in str(v).split("; ")) for v in rows["cells"]]


def _identity(rows: pd.DataFrame) -> dict[str, Any]:
    """rank, configuration (what varies inside the set) and runs columns of a configuration
    table; its cells are listed under it (:func:`_cells_table`)."""
    return {
        "rank": rows.apply(_rank, axis=1).to_numpy(),
        "configuration": within_set(list(rows["config"])),
        "runs": _col(rows, "repeats").map(fmt_count).to_numpy(),
    }


def _cells_table(rows: pd.DataFrame) -> render.Collapsed:
    """Each configuration's cells (folders), folded: paths are long and rarely read."""
    table = pd.DataFrame({"configuration": within_set(list(rows["config"])),
                          "cells": _cells(rows)})  # fmt: skip
    return render.Collapsed("The cells (folders) of each configuration", [render.Table(table)])


def _training_table(rows: pd.DataFrame, objective: Any) -> pd.DataFrame:
    name = objective.label if objective is not None else "objective"
    out = pd.DataFrame(
        {
            **_identity(rows),
            "iters (warm-up)": [
                f"{fmt_count(i)} ({fmt_count(w)})"
                for i, w in zip(
                    _col(rows, "iterations"), _col(rows, "warmup_iterations"), strict=True
                )  # fmt: skip
            ],
            f"{name} [{level()} CI]": _ci_col(rows, "objective"),
            f"env steps/s [{level()} CI]": _ci_col(rows, "throughput"),
        }
    )
    if _col(rows, "s_per_1k_trained_steps").notna().any():  # replay, epochs: other work
        out["s per 1 000 trained steps"] = _fmt_col(rows, "s_per_1k_trained_steps")
        out["trained per env step"] = _fmt_col(rows, "trained_per_env_step")
    if objective is None or objective.key != ITER_S:
        out["time/iter s"] = _fmt_col(rows, "iter_s_mean")
    for p in PHASES:
        out[p.removesuffix("_s") + " s"] = _fmt_col(rows, f"{p}_mean")
    out["CPU %"] = _fmt_col(rows, "cpu_util_pct_mean", 2)
    gpu_cols = [c for c in rows.columns if re.fullmatch(r"gpu\d+_util_pct_mean", c)
                and rows[c].notna().any()]  # fmt: skip
    for c in gpu_cols:
        out[f"GPU {c.split('_')[0].removeprefix('gpu')} %"] = _fmt_col(rows, c, 2)
    if _col(rows, "gpu_energy_j").notna().any():
        out["GPU W"] = _fmt_col(rows, "gpu_power_w_mean")
        out["GPU J/env step"] = _fmt_col(rows, "energy_per_env_step_j")
        out["GPU J/trained step"] = _fmt_col(rows, "energy_per_trained_step_j")
    if "speedup" in rows:
        out[f"speedup [{level()} CI]"] = _ci_col(rows, "speedup")
    out["fp"] = rows["fingerprint"].to_numpy()
    return out


def _env_table(rows: pd.DataFrame, objective: Any) -> pd.DataFrame:
    """stage=env: rates with intervals, frames, per-call latency, CPU and memory."""
    name = objective.label if objective is not None else "objective"
    out = pd.DataFrame(
        {
            **_identity(rows),
            "engine": _col(rows, "engine").fillna("").astype(str).to_numpy(),
            "envs": _fmt_col(rows, "num_envs"),
            "threads": _fmt_col(rows, "engine_threads"),
            f"env steps/s [{level()} CI]": _ci_col(rows, "throughput"),
            f"{name} [{level()} CI]": _ci_col(rows, "objective"),
            "frames/s": _fmt_col(rows, FRAMES_PER_S),
            "step p50 ms": _fmt_col(rows, STEP_MS_P50),
            "step p99 ms": _fmt_col(rows, STEP_MS_P99),
            "CPU cores": _fmt_col(rows, "process_cores", 2),
            "busy % per core": _col(rows, "per_core_busy_pct").fillna("").astype(str).to_numpy(),
            "RSS MB": _fmt_col(rows, "rss_mb_max"),
        }
    )
    if "speedup" in rows:
        out[f"speedup [{level()} CI]"] = _ci_col(rows, "speedup")
    out["fp"] = rows["fingerprint"].to_numpy()
    return out


def _inference_table(rows: pd.DataFrame) -> pd.DataFrame:
    m = ACTION_MS if _col(rows, ACTION_MS_P50).notna().any() else FORWARD_MS
    out = pd.DataFrame(
        {
            **_identity(rows),
            "samples": [
                f"{fmt_count(n)} {_GRANULARITY.get(str(g), '')}".strip()
                for n, g in zip(_col(rows, "samples"), _col(rows, "granularity"), strict=True)
            ],
            f"p50 ms [{level()} CI]": _ci_col(rows, "objective"),
            "mean ms": _fmt_col(rows, f"{m}_mean"),
            "p90 ms": _fmt_col(rows, f"{m}_p90"),
            "p99 ms": _fmt_col(rows, f"{m}_p99"),
            "max ms": _fmt_col(rows, f"{m}_max"),
            "return": _fmt_col(rows, "return_mean"),
        }
    )
    if _col(rows, "fidelity_agreement").notna().any():
        out["agreement %"] = (_col(rows, "fidelity_agreement").astype(float) * 100).map(
            lambda v: fmt_value(v, 4)).to_numpy()  # fmt: skip
    # Box policies: no argmax to agree on; the action error relative to the range.
    for key, name in (("action_err_p99", "action err p99 %"), ("action_err_max", "max %")):
        col = pd.to_numeric(_col(rows, f"fidelity_{key}"), errors="coerce")
        if col.notna().any():
            out[name] = (col * 100).map(_fmt_small_pct).to_numpy()
    if _col(rows, "fidelity_verdict").notna().any():
        out["fidelity"] = _col(rows, "fidelity_verdict").fillna("").astype(str).to_numpy()
    if _col(rows, "model_gzip_bytes").notna().any():
        for name, values in _compression_columns(rows).items():
            out[name] = values
    if "speedup" in rows:
        out[f"speedup [{level()} CI]"] = _ci_col(rows, "speedup")
    out["fp"] = rows["fingerprint"].to_numpy()
    return out


def _fmt_small_pct(v: float) -> str:
    """A percentage that may be tiny (fp32's action error): ``<0.001`` rather than 0."""
    return "<0.001" if 0 < v < 1e-3 else fmt_value(v, 3)


def _energy_col(rows: pd.DataFrame) -> np.ndarray:
    """The CPU's RAPL joules per 1 000 actions, or "not measured here" (never estimated)."""
    joules = pd.to_numeric(_col(rows, "cpu_energy_per_1k_actions_j"), errors="coerce")
    return np.asarray(
        [fmt_value(j, 3) if np.isfinite(j) else "not measured here" for j in joules],
        dtype=object,
    )


def _compression_columns(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Return difference against the torch policy with its paired interval, sizes, sparsity,
    peak memory, what loading the model added, the variable tensors' bytes (the arena's
    upper bound) and, for a fine-tuned variant, its distillation's held-out MSE and rate."""
    num = {c: pd.to_numeric(_col(rows, f"fidelity_{c}"), errors="coerce").to_numpy(float)
           for c in ("return_diff", "return_diff_low", "return_diff_high")}  # fmt: skip
    tie = _col(rows, "fidelity_return_tie").astype("boolean").fillna(False).to_numpy(bool)
    capped = _col(rows, "fidelity_saturates").astype("boolean").fillna(False).to_numpy(bool)
    diff = []
    for i in range(len(rows)):
        d, lo, hi = (num[c][i] for c in ("return_diff", "return_diff_low", "return_diff_high"))
        text = "" if not np.isfinite(d) else f"{d:+.3g} [{fmt_value(lo)}, {fmt_value(hi)}]"
        text += " saturates" if capped[i] else (" tie" if tie[i] and text else "")
        diff.append(text)
    return {
        f"return diff [{level()} CI]": np.asarray(diff, dtype=object),
        "size B": _fmt_col(rows, "model_size_bytes", 0),
        "gzip B": _fmt_col(rows, "model_gzip_bytes", 0),
        "sparsity": _fmt_col(rows, "weight_sparsity", 2),
        "peak RSS MB": _fmt_col(rows, "peak_rss_mb", 0),
        "model RSS MB": _fmt_col(rows, "model_rss_mb", 2),
        "tensors B": _fmt_col(rows, "tensor_bytes_variable", 0),
        "CPU J / 1k actions": _energy_col(rows),
        "distil MSE (lr)": np.asarray(
            [
                f"{fmt_value(m)} ({fmt_value(lr, 1)})" if fmt_value(m) else ""
                for m, lr in zip(
                    _col(rows, "finetune_holdout_mse"), _col(rows, "finetune_lr"), strict=True
                )
            ],
            dtype=object,
        ),
    }


def families_section(inputs: Inputs) -> list[render.Block]:
    """Training, inference and the env stage first, then any other family (serve cells are
    their own section: ranked by rate, not by time)."""
    plans = inputs.plans
    first = (Family.training, Family.inference, Family.env)
    others = [f for f in plans if f not in first and f != Family.serve]
    blocks: list[render.Block] = []
    for fam in (*first, *others):
        if fam in plans:
            blocks += family_section(inputs.result, fam, plans[fam])
    return blocks


SECTION = Section(
    name="families",
    title="One section per comparison family",
    order=90,
    needs=("comparison", "plans", "analyses", "fingerprint_groups"),
    render=families_section,
)
