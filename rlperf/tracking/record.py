"""What tracking sends: a job's names, parameters and tags, and its rows.

The same records come from a running job (:mod:`rlperf.tracking.live`) and from a folder
written earlier (``rlperf-report --to``), so a run sent live and the same folder sent
afterwards carry the same names and values, and the job's identity tag
(:data:`JOB_ID_TAG`) tells a tool that it holds the job already.

Rows are the job's own result rows reduced to their finite numbers, each placed at a step:
a training iteration at the env steps sampled so far; a rollout or edge episode
(:func:`rlperf.results.latency.window_row`) at the steps acted so far; a serve load level
at its index. Each carries ``time_s``, seconds since the job started, for wall-clock axes.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rlperf.layout import (
    CONFIG_FILE,
    EPISODES_FILE,
    FINGERPRINT_FILE,
    HYDRA_FILE,
    LEVELS_FILE,
    METRICS_FILE,
    STEPS_FILE,
    SUMMARY_FILE,
)
from rlperf.results.columns import ENV_STEPS, TIME_S, WALL_S
from rlperf.results.csvlog import read_rows
from rlperf.results.flat import flatten
from rlperf.results.latency import episode_windows
from rlperf.results.record import RunRecord, read_record
from rlperf.specs.stages import DEFAULT_STAGE, stage_spec
from rlperf.vocabulary import RunStatus

#: Tags every tracked run carries (MLflow tags; a text summary in TensorBoard).
JOB_ID_TAG = "rlperf.job_id"  # the job's identity: sending it again creates nothing new
KIND_TAG = "rlperf.kind"  # job, sweep, report
STAGE_TAG = "rlperf.stage"
SWEEP_TAG = "rlperf.sweep_id"  # the sweep (or search) a job belongs to
PARENT_TAG = "rlperf.sweep"  # a sweep's own run (MLflow's parent of its cells): its identity
FOLDER_TAG = "rlperf.folder"
#: The result files sent as artifacts at the end of a job, where the job wrote them.
ARTIFACT_FILES = (
    SUMMARY_FILE,
    FINGERPRINT_FILE,
    METRICS_FILE,
    EPISODES_FILE,
    LEVELS_FILE,
    str(CONFIG_FILE),
)


@dataclass(frozen=True)
class SweepRef:
    """The sweep (or search) a job is a cell of: one MLflow parent run, one W&B group, one
    TensorBoard folder."""

    id: str  # "<host>:<the sweep folder's absolute path>"
    name: str  # the sweep folder as given (multirun/2026-12-03/10-00-00)
    folder: Path  # where it is on this machine


@dataclass(frozen=True)
class TrackedRow:
    step: int
    time_s: float
    values: dict[str, float]

    def wall(self, started_at: float) -> float:
        """The row's wall-clock time (epoch s); now, for a row of a job whose start is
        unknown (the study's rollout files)."""
        at = started_at + self.time_s
        return at if math.isfinite(at) else time.time()


@dataclass
class TrackedJob:
    """One job as a tracked run: who it is, what it ran with, where it lives."""

    job_id: str
    name: str  # the cell's label in a sweep ("#3 model=model1 workers=2"), else its overrides
    stage: str
    folder: Path
    started_at: float  # epoch seconds
    config: dict[str, Any]  # the composed config, secrets masked
    tags: dict[str, str] = field(default_factory=dict)  # fingerprint and env protocol, flat
    sweep: SweepRef | None = None
    kind: str = "job"  # a report's own run: "report" (rlperf-report --to)

    @property
    def params(self) -> dict[str, str]:
        """The composed config flattened to Hydra's dotted keys, each value as text."""
        return {k: param_text(v) for k, v in flatten(self.config).items()}

    def identity_tags(self) -> dict[str, str]:
        tags = {
            JOB_ID_TAG: self.job_id,
            KIND_TAG: self.kind,
            STAGE_TAG: self.stage,
            FOLDER_TAG: str(self.folder),
        }
        if self.sweep is not None:
            tags[SWEEP_TAG] = self.sweep.id
        return tags

    def all_tags(self) -> dict[str, str]:
        return {**self.tags, **self.identity_tags()}


def param_text(value: Any) -> str:
    """A config leaf as a parameter value: as YAML would write a scalar (null, true)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def job_identity(fingerprint: Mapping[str, Any]) -> str:
    """``rlperf:<host>@<start time>``: a job, wherever its folder goes."""
    return f"rlperf:{fingerprint.get('hostname')}@{fingerprint.get('start_time')}"


def sweep_identity(host: str, cwd: str, sweep_dir: str) -> str:
    """``<host>:<the sweep folder as an absolute path>`` (not resolved: a link stays a link)."""
    return f"{host}:{os.path.normpath(os.path.join(cwd, sweep_dir))}"


def sweep_ref(host: str, cwd: str, sweep_dir: str) -> SweepRef:
    """The sweep of Hydra's ``hydra.sweep.dir`` (as given) run from ``cwd`` on ``host``."""
    return SweepRef(sweep_identity(host, cwd, sweep_dir), sweep_dir, Path(cwd, sweep_dir))


def start_epoch(fingerprint: Mapping[str, Any]) -> float:
    try:
        return datetime.fromisoformat(str(fingerprint["start_time"])).timestamp()
    except (KeyError, ValueError):
        return float("nan")


def short_id(text: str, length: int = 16) -> str:
    """A run id for tools that want one of [a-z0-9] (W&B), stable for the same ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def description_tags(
    fingerprint: Mapping[str, Any], protocol: Mapping[str, Any] | None
) -> dict[str, str]:
    """The fingerprint (without its copy of the config) and the env protocol as flat tags."""
    fp = {k: v for k, v in fingerprint.items() if k != "config"}
    tags = {f"fingerprint.{k}": param_text(v) for k, v in flatten(fp).items()}
    return {**tags, **protocol_tags(protocol)}


def protocol_tags(protocol: Mapping[str, Any] | None) -> dict[str, str]:
    if not protocol:
        return {}
    return {f"env_protocol.{k}": param_text(v) for k, v in flatten(dict(protocol)).items()}


def env_tags(record: RunRecord) -> dict[str, str]:
    """The env protocol of a job's ``summary.json`` as tags: a downstream job knows it only
    once it has read its upstream run, so it is sent again at the end."""
    protocol = record.env_protocol
    return protocol_tags(protocol if isinstance(protocol, Mapping) else None)


# --- rows


def numbers(row: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of a result row (text columns, empty cells and NaN left out)."""
    out = {}
    for key, value in row.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                continue
        if isinstance(value, int | float) and math.isfinite(value):
            out[str(key)] = float(value)
    return out


class StepAxis:
    """Places each row of a job at its step (see the module's docstring)."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        # metrics.csv rows (a training iteration, a window of stage=env) are placed at the
        # env steps done so far, levels.csv rows at their level, steps at their count.
        self.rows_file = stage_spec(stage).rows_file
        self.env_steps = 0.0
        self.wall_s = 0.0

    def __call__(self, row: Mapping[str, Any]) -> TrackedRow:
        values = numbers(row)
        if self.rows_file == METRICS_FILE:
            self.env_steps += values.get(ENV_STEPS, 0.0)
            return TrackedRow(int(self.env_steps), values.get(TIME_S, math.nan), values)
        if self.rows_file == LEVELS_FILE:
            self.wall_s += values.get(WALL_S, 0.0)
            return TrackedRow(int(values.get("level", 0)), self.wall_s, values)
        return TrackedRow(int(values.get("steps", 0)), values.get(TIME_S, math.nan), values)


def place(stage: str, rows: Iterable[Mapping[str, Any]]) -> list[TrackedRow]:
    axis = StepAxis(stage)
    return [axis(r) for r in rows]


def folder_rows(folder: Path, stage: str) -> list[TrackedRow]:
    """The rows a job of ``stage`` sent, or would have sent, live, read from its folder."""
    rows_file = stage_spec(stage).rows_file
    if rows_file in (METRICS_FILE, LEVELS_FILE):
        return place(stage, read_rows(folder / rows_file))
    windows = episode_windows(read_rows(folder / STEPS_FILE), read_rows(folder / EPISODES_FILE))
    return place(stage, windows)


def artifact_paths(folder: Path) -> list[Path]:
    """The job's result files to send at its end (those it wrote)."""
    return [folder / name for name in ARTIFACT_FILES if (folder / name).is_file()]


def hydra_record(folder: Path) -> dict[str, Any]:
    """What ``.hydra/hydra.yaml`` says of the job, as :func:`rlperf.tracking.live.
    hydra_runtime` reads it from a running one: multirun, number, overrides, sweep, cwd (as
    written: a multirun's sweep folder is resolved there, a single run's is not needed)."""
    path = folder / HYDRA_FILE
    if not path.is_file():
        return {}
    from omegaconf import OmegaConf  # light; only for folders that have one

    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    hydra = raw.get("hydra", {}) if isinstance(raw, dict) else {}

    def get(*keys: str) -> Any:
        node: Any = hydra
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        return node

    return {
        "multirun": get("mode") == "MULTIRUN",
        "num": get("job", "num"),
        "overrides": list(get("overrides", "task") or []),
        "sweep_dir": str(get("sweep", "dir") or ""),
        "cwd": str(get("runtime", "cwd") or ""),
    }


#: Overrides left out of a job's name.
UNNAMED = ("hydra.", "tracking")


def job_name(overrides: Iterable[str], num: Any, in_sweep: bool, folder: Path) -> str:
    """``#3 model=model1 workers=2`` in a sweep (the launcher's cell label), the overrides of
    a single run, else the folder's name; without ``hydra.*`` and ``tracking`` overrides
    (where results go is not what the job is)."""
    shown = " ".join(o for o in overrides if not o.lstrip("+~").startswith(UNNAMED))
    if in_sweep:
        return f"#{num} {shown or '(no overrides)'}"
    return shown or f"{folder.parent.name}/{folder.name}"


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def job_of(
    stage: str,
    folder: Path,
    config: dict[str, Any],
    fingerprint: Mapping[str, Any],
    protocol: Mapping[str, Any] | None,
    hydra: Mapping[str, Any],
) -> TrackedJob:
    """A job as a tracked run, from its fingerprint (identity, start, tags) and what Hydra
    says of it (``hydra``: :func:`hydra_record`'s keys; in a multirun, its sweep)."""
    in_sweep = bool(hydra.get("multirun"))
    sweep = None
    if in_sweep:
        host = str(fingerprint.get("hostname"))
        sweep = sweep_ref(host, str(hydra["cwd"]), str(hydra["sweep_dir"]))
    return TrackedJob(
        job_id=job_identity(fingerprint),
        name=job_name(hydra.get("overrides", []), hydra.get("num"), in_sweep, folder),
        stage=stage,
        folder=folder,
        started_at=start_epoch(fingerprint),
        config=config,
        tags=description_tags(fingerprint, protocol),
        sweep=sweep,
    )


def folder_job(folder: Path) -> tuple[TrackedJob, str]:
    """A job folder written earlier as the job it sent, or would have sent, live: the same
    identity, names, config (the fingerprint's resolved copy), tags; and its status."""
    fingerprint = read_json(folder / FINGERPRINT_FILE)
    record = read_record(folder) or RunRecord()
    config = fingerprint.get("config")
    config = config if isinstance(config, dict) else {}
    stage = str(record.stage or config.get("stage") or DEFAULT_STAGE)
    job = job_of(stage, folder, config, fingerprint, record.env_protocol, hydra_record(folder))
    return job, str(record.status or RunStatus.completed)
