"""``rlperf-report PATH --to mlflow|tensorboard|wandb``: run folders written earlier, sent to
the tools users watch runs in, under the names a live job uses (docs/tracking.md#after-the-fact).

rlperf's job folders are sent as they would have been live (:func:`rlperf.tracking.record.
folder_job`: the same identity, names, parameters, tags and rows); the 2021 study's Tune
folders and rollout files as the report reads them (:mod:`rlperf.report.read.legacy`: the
canonical per-iteration rows, the run's parameters, the study's machine). Sending is
idempotent: a job a tool holds already (its identity tag, :data:`JOB_ID_TAG`; a W&B run
id or a TensorBoard folder derived from it) is left as it is. A tool that fails stops
being sent to; what was sent before stays.

Where things go when no server is named: ``mlflow.db`` (and ``mlartifacts/``),
``tensorboard/`` and ``wandb/`` in the report's output folder, never into the run folders
(the study's data may be read-only).
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rlperf.report.read.cells import Cell
from rlperf.report.read.load import read_json
from rlperf.results.columns import ACTION_MS
from rlperf.tracking.dispatch import first_line
from rlperf.tracking.record import (
    SweepRef,
    TrackedJob,
    TrackedRow,
    artifact_paths,
    description_tags,
    folder_job,
    folder_rows,
    param_text,
    place,
)
from rlperf.tracking.tools import ToolSettings, make_sink
from rlperf.vocabulary import RunStatus

Progress = Callable[[str], None]


@dataclass
class Sent:
    """What one tool got: jobs sent, jobs it held already, and a failure (if it failed)."""

    tool: str
    sent: int = 0
    existing: int = 0
    failed: str | None = None
    where: str = ""

    def line(self) -> str:
        if self.failed is not None:
            return (
                f"{self.tool} ({self.where}) failed: {self.failed}; {self.sent} job(s) sent "
                f"before it failed"
            )
        return f"{self.tool} ({self.where}): {self.sent} job(s) sent, {self.existing} held already"


@dataclass
class Export:
    """A cell as the tools get it."""

    job: TrackedJob
    rows: list[TrackedRow]
    files: list[Path]
    status: str


def export_of(cell: Cell, root: Path) -> Export:
    """An rlperf job folder as it would have been sent live; a legacy cell as the report
    read it (its group, e.g. ``volta1_def``, is its sweep)."""
    if cell.kind == "rlperf":
        job, status = folder_job(cell.path)
        return Export(job, folder_rows(cell.path, job.stage), artifact_paths(cell.path), status)
    sweep = None
    if cell.group:
        sweep = SweepRef(f"legacy:{cell.group}", cell.group, root / cell.group)
    job = TrackedJob(
        job_id=cell.run_key or f"legacy:{_digest(cell.path)}",
        name=cell.id,
        stage=cell.stage,
        folder=cell.path,
        started_at=cell.started_at if cell.started_at is not None else float("nan"),
        config=_legacy_config(cell),
        tags={
            **description_tags(cell.fingerprint, cell.env_protocol),
            "machine": param_text(cell.machine),
        },
        sweep=sweep,
    )
    files = [p for p in (cell.path / "params.json", cell.path / "progress.csv") if p.is_file()]
    return Export(job, _legacy_rows(cell), files or [cell.path], cell.status)  # a file: itself


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return hashlib.sha256(str(path).encode()).hexdigest()[:16]


def _legacy_config(cell: Cell) -> dict[str, Any]:
    """``params.json`` of a Tune folder (RLlib's own keys), else the axes the report read."""
    params = cell.path / "params.json"
    if cell.kind == "tune" and params.is_file():
        return read_json(params)
    return {**cell.axes, **cell.leaves}


def _legacy_rows(cell: Cell) -> list[TrackedRow]:
    if cell.iterations is not None:
        frame = cell.iterations.drop(columns=[c for c in cell.iterations if c.endswith("_win10")])
        return place("train", frame.to_dict("records"))
    if cell.episodes is None or cell.latency is None:
        return []
    rows = cell.episodes.reset_index(drop=True).copy()
    rows["action_ms_mean"] = pd.to_numeric(cell.latency[ACTION_MS], errors="coerce").values
    rows["steps"] = pd.to_numeric(rows["length"], errors="coerce").cumsum()
    return place(cell.stage, rows.to_dict("records"))


def send(
    cells: Sequence[Cell],
    tools: Sequence[str],
    options: ToolSettings,
    root: Path,
    report_files: Sequence[Path] = (),
    progress: Progress | None = None,
) -> list[Sent]:
    """Send every cell to every tool (those a tool holds already are left as they are),
    then the report's own files (figures, report.html) as one run named after the report."""
    exports = [export_of(c, root) for c in cells]
    results = []
    for tool in tools:
        result = Sent(tool)
        try:
            _send_tool(tool, exports, options, root, report_files, result)
        except Exception as exc:  # noqa: BLE001 - one line, the others go on
            result.failed = f"{type(exc).__name__}: {first_line(exc)}"
        results.append(result)
        if progress is not None:
            progress(result.line())
    return results


def _send_tool(
    tool: str,
    exports: Sequence[Export],
    options: ToolSettings,
    root: Path,
    report_files: Sequence[Path],
    result: Sent,
) -> None:
    opened_parents: dict[str, str] = {}
    for export in exports:
        sink = make_sink(tool, options, root, root)
        result.where = sink.where or result.where
        if sink.exists(export.job):
            result.existing += 1
            continue
        if tool == "mlflow" and export.job.sweep is not None:
            _note_parent(sink, export.job.sweep, opened_parents)
        sink.open(export.job)
        sink.log(export.rows, export.job.started_at)
        sink.finish(export.status, export.files, {})
        result.where = sink.where
        result.sent += 1
    for run_id in opened_parents.values():  # parents made here: the sweep is over
        make_sink(tool, options, root, root).end_parent(run_id, RunStatus.completed)
    if report_files and tool != "tensorboard":
        _send_report(tool, options, root, report_files)


def _note_parent(sink: Any, sweep: SweepRef, opened: dict[str, str]) -> None:
    """A sweep's MLflow parent that sending creates (none held it yet) is ended afterwards."""
    if sweep.id in opened or sink.parent(sweep, create=False) is not None:
        return
    run_id = sink.parent(sweep)
    opened[sweep.id] = str(run_id)


def _send_report(tool: str, options: ToolSettings, root: Path, files: Sequence[Path]) -> None:
    """The report's figures and pages as one run (``rlperf.kind=report``), named after its
    folder; sent again, it is a run of its own only if the report folder is another."""
    ident = f"report:{socket.gethostname()}:{root.resolve()}"
    job = TrackedJob(
        job_id=ident,
        name=f"rlperf-report {root.name}",
        stage="report",
        folder=root,
        started_at=float("nan"),
        config={},
        kind="report",
    )
    sink = make_sink(tool, options, root, root)
    if sink.exists(job):
        return
    sink.open(job)
    sink.finish(RunStatus.completed, [f for f in files if f.is_file()], {})
