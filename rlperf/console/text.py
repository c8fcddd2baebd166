"""The header and the result summary of a run, as a person reads them on the terminal."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from rlperf.console.progress import format_duration
from rlperf.results.columns import ENV_STEPS_PER_S, ITER_S, LEARN_S, SAMPLE_S
from rlperf.results.record import EnvRecord, RunRecord, ServeRecord, TrainRecord, as_record
from rlperf.specs.stages import DEFAULT_STAGE, STAGES, stage_spec

#: A header key that some options of its group lack, and the key that names the same thing
#: there: a user's env class (``env=custom``) has an entry point, not a gymnasium id.
_OR_ELSE = {"env.id": "env.entry_point"}


def header_lines(cfg: Any, out_dir: Path, log_path: Path | None) -> list[str]:
    """``rlperf train: model=model1 env=... | results: <dir> (log: <file>)``; ``env=`` names
    the env's id, or a custom env's entry point (``env=pkg.module:Class``)."""
    stage = str(OmegaConf.select(cfg, "stage"))
    parts = []
    header = STAGES[stage].header if stage in STAGES else ()
    for label, key in header:
        value = OmegaConf.select(cfg, key)
        if value is None and key in _OR_ELSE:
            value = OmegaConf.select(cfg, _OR_ELSE[key])
        if value is not None:
            parts.append(f"{label}={value}")
    where = f"results: {out_dir}" + (f" (log: {log_path.name})" if log_path else "")
    return [f"rlperf {stage}: {' '.join(parts)}", f"  {where}"]


def summary_lines(record: RunRecord, out_dir: Path) -> list[str]:
    """The outcome and the headline figures of ``summary.json``, in two or three lines."""
    head = f"{record.status} in {format_duration(record.wall_s)}"
    spec = stage_spec(record.stage or DEFAULT_STAGE)
    counts = [  # the spec's dotted keys (episodes.count)
        f"{n} {label}" for key, label in spec.counts if isinstance(n := _at(record.data, key), int)
    ]
    if counts:
        head += ": " + ", ".join(counts)
    excluded = as_record(record, TrainRecord).excluded
    if excluded:
        head += (
            " (excluded from the figures: "
            + ", ".join(f"{n} {reason}" for reason, n in sorted(excluded.items()))
            + ")"
        )
    lines = [head]
    serve = as_record(record, ServeRecord)
    figures = _serve_figures(serve) if spec.serves else _figures(record)
    if figures:
        lines.append("  " + " | ".join(figures))
    faults = _fault_count(serve.faults if spec.serves else as_record(record, TrainRecord).faults)
    if faults:
        lines.append(f"  {faults} fault(s) recorded: see summary.json 'faults'")
    lines.append(f"  summary.json and the result files are in {out_dir}")
    return lines


def _at(summary: Mapping[str, Any], key: str) -> Any:
    """The value at dotted ``key`` of ``summary`` (``episodes.count``), else None."""
    value: Any = summary
    for part in key.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _fault_count(faults: Any) -> int:
    """Faults of ``summary.json["faults"]``: a training job's list of events, or a serve
    job's ``{"replicas_killed": [...], "levels": [...]}`` (the replicas it killed)."""
    if isinstance(faults, Mapping):
        return len(faults.get("replicas_killed") or [])
    return len(faults or [])


def _figures(record: RunRecord) -> list[str]:
    metrics = as_record(record, TrainRecord).metrics
    out = []
    for key, label, unit in (
        (ITER_S, "iteration", "s"),
        (SAMPLE_S, "sample", "s"),
        (LEARN_S, "learn", "s"),
        (ENV_STEPS_PER_S, "env steps/s", ""),
    ):
        mean = (metrics.get(key) or {}).get("mean")
        if isinstance(mean, int | float) and math.isfinite(mean):
            out.append(f"{label} {mean:.3g}{(' ' + unit) if unit else ''} (mean)")
    env = as_record(record, EnvRecord)  # stage=env's totals over its timed windows
    for value, label in ((env.env_steps_per_s, "env steps/s"), (env.frames_per_s, "frames/s")):
        if isinstance(value, int | float) and math.isfinite(value):
            out.append(f"{label} {value:.0f}")
    for key, stats in (env.latency or {}).items():
        p50 = stats.get("p50") if isinstance(stats, Mapping) else None
        if isinstance(p50, int | float) and math.isfinite(p50):
            out.append(f"{key} p50 {stats['p50']:.3g}")
    return out


def _serve_figures(record: ServeRecord) -> list[str]:
    """A serve job's headline: the policy's latency over HTTP alone, the highest offered
    rate whose p99 stayed under the SLO, and the served actions' check."""
    out = []
    http = (record.baseline or {}).get("http_p50_ms")
    if isinstance(http, int | float) and math.isfinite(http):
        out.append(f"http p50 {http:.3g} ms (1 client)")
    slo = record.max_rate_under_slo or {}
    if slo.get("levels_searched"):  # open-loop levels that counted
        rate = slo.get("max_rate_rps")
        head = f"max rate with p99 within {slo.get('slo_ms'):g} ms:"
        if not isinstance(rate, int | float):
            out.append(f"{head} none of {min(slo['levels_searched']):g}-"
                       f"{max(slo['levels_searched']):g} req/s")  # fmt: skip
        else:
            out.append(f"{head} {rate:g} req/s" + ("" if slo.get("bounded") else " or more"))
    actions = record.actions or {}
    if isinstance(actions.get("checked"), int):
        mismatches = actions.get("mismatches", 0)
        checked = f"{actions['checked']} action(s) checked, {mismatches} mismatch(es)"
        err = actions.get("max_err_of_range")
        if isinstance(err, int | float):
            checked += f" (max error {err:.2g} of the range)"
        out.append(checked)
    return out
