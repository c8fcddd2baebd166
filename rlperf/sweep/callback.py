"""Cell events from Tune's controller (in the launcher process): status, progress, index.

:class:`SweepCallback` turns each trial's start, results, retries, end and
error into the cell's record in ``sweep.json`` and its ``cell.json``, and into
the progress display's lines; :func:`mark_interrupted` records the cells that
were running when the sweep was stopped.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from ray import tune

from rlperf.errors import interrupt_reason
from rlperf.layout import RunStatus
from rlperf.sweep.index import jsonable_return, mark_summary, now_iso, read_summary, summary_status
from rlperf.sweep.state import Cell, Sweep
from rlperf.sweep.trial import (
    RESULT_ADDRESS,
    RESULT_ENTERED,
    RESULT_RETURN,
    RESULT_STEP,
    loads_return,
)


class SweepCallback(tune.Callback):
    """Cell events from Tune's controller (runs in the launcher process)."""

    def __init__(self, sweep: Sweep) -> None:
        self.sweep = sweep

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its callbacks into the experiment folder for Tuner.restore,
        # which this launcher never uses (it resumes from sweep.json); the live
        # object stays in this process.
        return {}

    def _cell(self, trial: Any) -> Cell:
        return self.sweep.by_hash[trial.config["cell"]]

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        cell = self._cell(trial)
        rec = cell.record
        rec.status, rec.reason = "running", None
        rec.runs += 1
        rec.started_at, rec.finished_at, rec.wall_s = now_iso(), None, None
        cell.t0 = time.monotonic()
        self.sweep.save(cell)
        self.sweep.progress.emit("started", rec, self.sweep.records)

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        cell = self._cell(trial)
        if result.get(RESULT_STEP):
            done, total, text = result[RESULT_STEP]
            self.sweep.progress.cell_step(cell.record, int(done), int(total), str(text))
        if result.get(RESULT_RETURN):
            cell.job_blob = str(result[RESULT_RETURN])
        if result.get(RESULT_ENTERED):
            cell.record.trial_entered_at = float(result[RESULT_ENTERED])
        if result.get(RESULT_ADDRESS):
            cell.record.ray_address = str(result[RESULT_ADDRESS])

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        cell = self._cell(trial)
        status = summary_status(cell.out_dir) if cell.rlperf else "completed"
        reason = None
        if status == "skipped":
            reason = read_summary(cell.out_dir).get("error")
        elif status != "completed":
            # The task function returned without rlperf's summary (a foreign task function).
            status = "completed"
        self._finish(cell, status, reason)

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        cell = self._cell(trial)
        cell.record.reason = _first_line(_trial_error(trial))
        self.sweep.progress.emit("retrying", cell.record, self.sweep.records)

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        cell = self._cell(trial)
        summary = read_summary(cell.out_dir) if cell.rlperf else {}
        # The job found an input wrong (a checkpoint, a model file): invalid, not failed.
        status = RunStatus.invalid if summary.get("status") == RunStatus.invalid else "failed"
        self._finish(cell, status, summary.get("error") or _first_line(_trial_error(trial)))

    def _finish(self, cell: Cell, status: str, reason: str | None) -> None:
        rec = cell.record
        rec.status, rec.reason = status, reason
        rec.finished_at = now_iso()
        if cell.t0 is not None:
            rec.wall_s = time.monotonic() - cell.t0
            self.sweep.progress.walls.append(rec.wall_s)
        if cell.job_blob is not None and status != "failed":
            with contextlib.suppress(Exception):
                rec.return_value = jsonable_return(loads_return(cell.job_blob).return_value)
        self.sweep.save(cell)
        self.sweep.progress.emit(status, rec, self.sweep.records)


def _trial_error(trial: Any) -> str:
    for getter in ("get_error",):
        with contextlib.suppress(Exception):
            err = getattr(trial, getter)()
            if err is not None:
                return str(err)
    return "the trial failed (see the cell's folder and .tune/)"


def _first_line(text: str | None) -> str | None:
    if not text:
        return text
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    # Ray's error text starts with boilerplate; the cause is in its last line.
    return lines[-1].strip() if lines else None


def mark_interrupted(sweep: Sweep) -> None:
    """Cells whose trial was running when the sweep stopped: status interrupted."""
    mark_running(sweep, RunStatus.interrupted, interrupt_reason())


def mark_running(sweep: Sweep, status: str, reason: str) -> None:
    """Cells whose trial was running when the sweep stopped or lost its Ray: ``status``
    with ``reason``, in the cell's record and its summary.json (its job died with Ray)."""
    for cell in sweep.cells:
        rec = cell.record
        if rec.status != "running":
            continue
        rec.status, rec.reason = status, reason
        rec.finished_at = now_iso()
        if cell.t0 is not None:
            rec.wall_s = time.monotonic() - cell.t0
        if cell.rlperf:
            mark_summary(cell.out_dir, status, rec.reason)
        sweep.save(cell)
        sweep.progress.emit(status, rec, sweep.records)
    sweep.index.save()
