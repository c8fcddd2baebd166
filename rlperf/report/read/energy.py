"""GPU power and energy of training runs, from NVML telemetry (docs/telemetry.md).

Per iteration, ``metrics.csv`` holds every monitored GPU's mean board power
(``gpu{i}_power_w``) and the energy its driver counter counted over the
iteration (``gpu{i}_energy_j``, a difference of NVML's total-energy counter).
The report adds, per iteration (:func:`add_energy_columns`):

- ``gpu_power_w``: the monitored GPUs' power, summed;
- ``gpu_energy_j``: their energy, summed: the counter difference where the GPU
  has a counter, else (many consumer cards) its mean power × ``iter_s``;
- ``gpu_energy_source``: ``counter``, ``power × time`` or both.

Per run, over the iterations that count (:func:`energy_summary`): the energy,
the energy per sampled env step and per trained step, the mean power, and the
whole job's GPU energy from ``telemetry.csv`` (its last cumulative counter
value: setup and warm-up included). Where nothing was measured the run says
why (:func:`unavailable_reason`: the fingerprint's ``nvml_unavailable_reason``
on a machine without NVML).

CPU energy (:func:`cpu_energy_summary`): where the job read the CPU packages' RAPL
counters (``metrics.csv`` ``cpu_energy_j`` per iteration, rlperf.telemetry.rapl), the
energy over the iterations that count and per 1 000 sampled env steps; elsewhere
``cpu_energy_unavailable`` says why ("not measured here: ..."), never an estimate.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from rlperf.report.read.cells import Cell, included
from rlperf.results.columns import CPU_ENERGY_J, ENV_STEPS, ITER_S, TIME_S, TRAINED_STEPS
from rlperf.results.record import EdgeRecord
from rlperf.vocabulary import Family

COUNTER = "counter"
POWER_TIME = "power × time"


def gpu_indices(df: pd.DataFrame) -> list[int]:
    """NVML indices with a ``gpu{i}_power_w`` column."""
    found = (re.fullmatch(r"gpu(\d+)_power_w", str(c)) for c in df.columns)
    return sorted(int(m.group(1)) for m in found if m)


def add_energy_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``gpu_power_w``, ``gpu_energy_j`` and ``gpu_energy_source`` to per-iteration rows
    (nothing when no GPU was monitored)."""
    indices = gpu_indices(df)
    if not indices:
        return df
    iter_s = pd.to_numeric(df[ITER_S], errors="coerce")
    power = pd.DataFrame({i: pd.to_numeric(df[f"gpu{i}_power_w"], errors="coerce")
                          for i in indices})  # fmt: skip
    counter = pd.DataFrame({i: pd.to_numeric(df.get(f"gpu{i}_energy_j"), errors="coerce")
                            for i in indices}, index=df.index)  # fmt: skip
    estimate = power.mul(iter_s, axis=0)
    energy = counter.where(counter.notna(), estimate)
    from_counter = counter.notna().any(axis=1)
    from_power = (counter.isna() & estimate.notna()).any(axis=1)
    source = np.select(
        [from_counter & from_power, from_counter, from_power],
        [f"{COUNTER} + {POWER_TIME}", COUNTER, POWER_TIME],
        default="",
    )
    return df.assign(
        gpu_power_w=power.sum(axis=1, min_count=1),
        gpu_energy_j=energy.sum(axis=1, min_count=1),
        gpu_energy_source=source,
    )


def unavailable_reason(cell: Cell) -> str:
    """Why a run has no GPU energy (empty when it has some)."""
    df = cell.iterations
    if df is not None and "gpu_energy_j" in df and df["gpu_energy_j"].notna().any():
        return ""
    if cell.source == "legacy":
        return "not recorded: RLlib 1.x logged GPU utilisation, not power"
    if cell.nvml_unavailable_reason:
        return f"NVML unavailable: {cell.nvml_unavailable_reason}"
    if cell.gpu_count == 0:
        return "NVML sees no GPU on this machine"
    if df is None or not gpu_indices(df):
        return "no GPU monitored (telemetry disabled, or an older rlperf)"
    return "NVML gave no power or energy reading for the monitored GPUs"


def cpu_unavailable_reason(cell: Cell) -> str:
    """Why a run has no CPU energy (empty when it has some)."""
    df = cell.iterations
    if df is not None and CPU_ENERGY_J in df and _any_number(df[CPU_ENERGY_J]):
        return ""
    if cell.source == "legacy":
        return "not measured here: RLlib 1.x recorded no CPU energy"
    record = cell.record.cpu_energy
    if not isinstance(record, dict):
        return "not measured here: no record (telemetry disabled, or an older rlperf)"
    return f"not measured here: {record.get('unavailable_reason') or 'no RAPL reading'}"


def _any_number(values: pd.Series) -> bool:
    return bool(pd.to_numeric(values, errors="coerce").notna().any())


def cpu_energy_summary(cell: Cell) -> dict[str, Any]:
    """CPU energy columns of the run's row in ``runs.csv`` (over the iterations that count)."""
    reason = cpu_unavailable_reason(cell)
    df = cell.iterations
    if reason or df is None:
        return {"cpu_energy_unavailable": reason}
    kept = included(df)
    energy = float(pd.to_numeric(kept[CPU_ENERGY_J], errors="coerce").sum(min_count=1))
    env_steps = float(kept[ENV_STEPS].sum())
    record = cell.record.cpu_energy or {}
    return {
        CPU_ENERGY_J: energy,
        "cpu_energy_per_1k_env_steps_j": 1000 * energy / env_steps if env_steps > 0 else np.nan,
        "job_cpu_energy_j": record.get("job_j", np.nan) if isinstance(record, dict) else np.nan,
        "cpu_energy_unavailable": "",
    }


def action_energy_summary(cell: Cell) -> dict[str, Any]:
    """An inference run's energy per 1 000 actions (``summary.json`` ``energy``: the CPU's
    RAPL joules and the GPUs' over its timed loop), or why its CPU energy was not measured."""
    energy = cell.record_of(EdgeRecord).energy
    energy = energy if isinstance(energy, dict) else {}
    out: dict[str, Any] = {
        k: energy[k]
        for k in ("cpu_energy_per_1k_actions_j", "gpu_energy_per_1k_actions_j")
        if k in energy
    }
    if "cpu_energy_per_1k_actions_j" not in out:
        out["cpu_energy_unavailable"] = cpu_unavailable_reason(cell)
    return out  # fmt: skip


def energy_summary(cell: Cell) -> dict[str, Any]:
    """GPU energy columns of the run's row in ``runs.csv`` (over the iterations that count;
    the CPU's: :func:`cpu_energy_summary`)."""
    reason = unavailable_reason(cell)
    df = cell.iterations
    if reason or df is None:
        return {"energy_unavailable": reason}
    kept = included(df)
    energy = float(kept["gpu_energy_j"].sum(min_count=1))
    env_steps = float(kept[ENV_STEPS].sum())
    trained = float(kept[TRAINED_STEPS].sum())
    sources = sorted({s for s in kept["gpu_energy_source"] if s})
    return {
        "gpu_power_w_mean": float(kept["gpu_power_w"].mean()),
        "gpu_energy_j": energy,
        "energy_per_env_step_j": energy / env_steps if env_steps > 0 else np.nan,
        "energy_per_trained_step_j": energy / trained if trained > 0 else np.nan,
        "energy_source": " / ".join(sources),
        "job_gpu_energy_j": job_energy(cell.telemetry),
        "energy_unavailable": "",
    }


def job_energy(telemetry: pd.DataFrame | None) -> float:
    """The whole job's GPU energy: the last cumulative counter value of ``telemetry.csv``,
    summed over GPUs (NaN without a counter)."""
    if telemetry is None or telemetry.empty:
        return float("nan")
    cols = [c for c in telemetry.columns if re.fullmatch(r"gpu\d+_energy_j", str(c))]
    last = [pd.to_numeric(telemetry[c], errors="coerce").dropna() for c in cols]
    values = [float(s.iloc[-1]) for s in last if len(s)]
    return float(sum(values)) if values else float("nan")


def power_timeline(telemetry: pd.DataFrame | None) -> pd.DataFrame:
    """``time_s`` and ``gpu_power_w`` (the monitored GPUs summed) of ``telemetry.csv``."""
    if telemetry is None or telemetry.empty:
        return pd.DataFrame(columns=[TIME_S, "gpu_power_w"])
    power = telemetry[[f"gpu{i}_power_w" for i in gpu_indices(telemetry)]]
    total = power.apply(pd.to_numeric, errors="coerce").sum(axis=1, min_count=1)
    out = pd.DataFrame({TIME_S: pd.to_numeric(telemetry[TIME_S], errors="coerce"),
                        "gpu_power_w": total})  # fmt: skip
    return out.dropna()


def energy_text(cells: list[Cell], summaries: pd.DataFrame) -> str:
    """The Methods paragraph on energy: how it was measured, and where it could not be."""
    trained = [c for c in cells if c.family == Family.training and c.completed]
    if not trained:
        return ""
    rows = summaries.set_index("cell") if "cell" in summaries else summaries
    measured = [c for c in trained if not _reason(rows, c.id)]
    missing: dict[str, int] = {}
    for c in trained:
        why = _reason(rows, c.id)
        if why:
            missing[why] = missing.get(why, 0) + 1
    text = (
        "**Energy.** GPU energy per iteration is the NVML total-energy counter's difference "
        "over the iteration, or, on a GPU without that counter, its mean board power × the "
        "iteration time (`energy_source` says which); tables give it per sampled env step and "
        "per trained step over the iterations that count, summed over the monitored GPUs. "
        f"Measured for {len(measured)} of {len(trained)} completed training run(s)"
    )
    if missing:
        text += "; not measurable for " + "; ".join(f"{n} ({why})" for why, n in missing.items())
    cpu_missing: dict[str, int] = {}
    for c in trained:
        why = cpu_unavailable_reason(c)
        if why:
            cpu_missing[why] = cpu_missing.get(why, 0) + 1
    cpu = len(trained) - sum(cpu_missing.values())
    text += (". CPU energy is the CPU packages' RAPL counters (Linux powercap, top-level "
             f"zones) differenced over each iteration, never estimated: measured for {cpu} of "
             f"{len(trained)}")  # fmt: skip
    if cpu_missing:
        text += "; " + "; ".join(f"{n}: {why}" for why, n in cpu_missing.items())
    return text + "."


def _reason(rows: pd.DataFrame, cid: str) -> str:
    if "energy_unavailable" not in rows or cid not in rows.index:
        return "not summarised"
    value = rows.loc[cid, "energy_unavailable"]
    return "" if pd.isna(value) else str(value)
