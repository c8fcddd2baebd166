"""Cell events from Tune's controller (in the launcher process): status, progress, index.

:class:`SweepCallback` turns each trial's start, results, retries, end and
error into the cell's record in ``sweep.json`` and its ``cell.json``, and into
the progress display's lines; :func:`mark_interrupted` records the cells that
were running when the sweep was stopped.
"""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path
from typing import Any

from ray import tune

from rlperf.errors import interrupt_reason
from rlperf.results.record import RunRecord, read_record
from rlperf.results.storage import trial_folder
from rlperf.sweep.index import jsonable_return, mark_summary, now_iso, summary_status
from rlperf.sweep.state import Cell, Sweep
from rlperf.sweep.trial import (
    RESULT_ENTERED,
    RESULT_NODE,
    RESULT_RETURN,
    RESULT_STEP,
    loads_return,
)
from rlperf.vocabulary import RunStatus


class SweepCallback(tune.Callback):
    """Cell events from Tune's controller (runs in the launcher process)."""

    def __init__(self, sweep: Sweep, experiment: str = "") -> None:
        self.sweep = sweep
        self.experiment = experiment  # the Tune experiment's name (its folder in the storage)

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
        rec.status, rec.reason = RunStatus.running, None
        rec.runs += 1
        rec.started_at, rec.finished_at, rec.wall_s = now_iso(), None, None
        rec.ray_address = self.sweep.ray_address
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
        if result.get(RESULT_NODE):
            cell.record.node = str(result[RESULT_NODE])

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        cell = self._cell(trial)
        self._fetch(cell)
        self._complete(cell)

    def _complete(self, cell: Cell) -> None:
        """A trial's cell ended without an error (its files are here)."""
        status = summary_status(cell.out_dir) if cell.rlperf else RunStatus.completed
        reason = None
        if status == RunStatus.skipped:
            reason = (read_record(cell.out_dir) or RunRecord()).error
        elif status != RunStatus.completed:
            # The task function returned without rlperf's summary (a foreign task function).
            status = RunStatus.completed
        self._finish(cell, status, reason)

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        cell = self._cell(trial)
        cell.record.reason = _first_line(_trial_error(trial))
        self.sweep.progress.emit("retrying", cell.record, self.sweep.records)

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        cell = self._cell(trial)
        self._fetch(cell)
        self._error(cell, trial)

    def _error(self, cell: Cell, trial: Any) -> None:
        """A trial's cell ended with an error (its files, what there are, are here)."""
        job = (read_record(cell.out_dir) if cell.rlperf else None) or RunRecord()
        # The job found an input wrong (a checkpoint, a model file): invalid, not failed.
        status = RunStatus.invalid if job.status == RunStatus.invalid else RunStatus.failed
        text = _trial_error(trial)
        reason = job.error or lost_node(cell.record.node, text) or _first_line(text)
        if cell.rlperf and job.status not in (RunStatus.failed, RunStatus.invalid):
            # The job never said (its process or node died): the folder says it here.
            mark_summary(cell.out_dir, status, reason)
        self._finish(cell, status, reason)

    def _fetch(self, cell: Cell) -> None:
        """With a storage: the cell's files from there into its folder in the sweep (the
        trial uploaded them before its last result; a trial whose node died left what its
        last periodic upload held, perhaps nothing)."""
        storage = self.sweep.storage
        if storage is None:
            return
        rel = f"{self.experiment}/{trial_folder(cell.record.subdir)}"
        cell.record.storage = rel
        try:
            storage.fetch(rel, cell.out_dir)
        except OSError as exc:
            self.sweep.progress.say(
                f"cell #{cell.record.job_num}: its files could not be fetched from "
                f"{storage.describe(rel)}: {exc}"
            )

    def _finish(self, cell: Cell, status: str, reason: str | None) -> None:
        rec = cell.record
        rec.status, rec.reason = status, reason
        rec.finished_at = now_iso()
        if cell.t0 is not None:
            rec.wall_s = time.monotonic() - cell.t0
            self.sweep.progress.walls.append(rec.wall_s)
        if cell.job_blob is not None and status != RunStatus.failed:
            with contextlib.suppress(Exception):
                rec.return_value = jsonable_return(loads_return(cell.job_blob).return_value)
        self.sweep.save(cell)
        self.sweep.progress.emit(status, rec, self.sweep.records)


#: Seconds the launcher waits for Ray's GCS to declare a silent node dead (its health check:
#: 5 misses 3 s apart by default).
NODE_DEATH_S = 30.0


def lost_node(node: str | None, error: str, wait_s: float = NODE_DEATH_S) -> str | None:
    """When a trial's actor went away with its node: the reason naming that node; else None
    (the trial's own error stands).

    ``error`` is Tune's text of the trial's error; ``node`` (``"<IP> <node id>"``) is where the
    trial reported from. Ray's text names the node's IP (and often its id) when it knew the
    node died; otherwise the launcher asks the cluster, for up to ``wait_s``, whether that
    node is dead (an actor that stopped answering may be a node that did).
    """
    if not _ACTOR_GONE.search(error):
        return None
    ip, _, prefix = (node or "").partition(" ")
    if not prefix:  # the trial died before its first step reported where it ran
        ip, prefix = _actor_node(error)
    said_ip, said_id = _IP.search(error), _NODE_ID.search(error)
    ip = said_ip.group(1) if said_ip else ip
    prefix = said_id.group(1)[:12] if said_id else prefix
    if not (_NODE_DIED.search(error) or (prefix and _dead(prefix, wait_s))):
        return None
    which = f"{ip} ({prefix})" if prefix else ip or "of the trial"
    return (
        f"Ray's node {which} was lost while the cell ran (its raylet died or it left the "
        f"cluster); the same command runs it again"
    )


_IP = re.compile(r"^\s*ip: (\S+)$", re.MULTILINE)
_ACTOR_ID = re.compile(r"actor(?:_id:| ) ?([0-9a-f]{32})\b", re.IGNORECASE)
_NODE_ID = re.compile(r"node id: ([0-9a-f]{12,})", re.IGNORECASE)
_NODE_DIED = re.compile(r"node (has died|was terminated)", re.IGNORECASE)
#: Ray's texts for a trial actor that went away (not an error its code raised).
_ACTOR_GONE = re.compile(
    r"ActorDiedError|ActorUnavailableError|The actor died unexpectedly|The actor \w+ is "
    r"unavailable"
)


def _actor_node(error: str) -> tuple[str, str]:
    """``(IP, node id prefix)`` of the actor ``error`` names, from the cluster's actor table
    (it keeps a dead actor's last address); empty strings when it cannot say."""
    found = _ACTOR_ID.search(error)
    if found is None:
        return "", ""
    try:
        # Ray's private reader of the GCS actor table (fragile across Ray versions: a
        # failure only loses the node's name); deferred, as in _dead.
        from ray._private.state import actors

        address = actors(actor_id=found.group(1)).get("Address", {})
    except Exception:
        return "", ""
    node_id = str(address.get("NodeID") or "")
    return str(address.get("IPAddress") or ""), node_id[:12] if node_id.strip("0") else ""


def _dead(prefix: str, wait_s: float) -> bool:
    """Whether the node whose id starts with ``prefix`` is, or within ``wait_s`` becomes,
    dead in the cluster."""
    # Ray: only to ask the cluster about its nodes; this module already runs in Tune's loop.
    import ray

    deadline = time.monotonic() + wait_s
    while True:
        try:
            states = [n for n in ray.nodes() if str(n.get("NodeID", "")).startswith(prefix)]
        except Exception:  # a Ray that is gone itself: nothing to say
            return False
        if states and not any(n.get("Alive", False) for n in states):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)


def _trial_error(trial: Any) -> str:
    """Tune's text of the trial's error: its error file where Tune's controller just wrote it
    (this process's staging folder; with a storage it reaches the storage only later), else
    from the storage."""
    with contextlib.suppress(Exception):
        return Path(trial.error_file).read_text()
    with contextlib.suppress(Exception):
        err = trial.get_error()
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
        if rec.status != RunStatus.running:
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
