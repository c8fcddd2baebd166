"""``sweep.json``: what the launcher knows about every cell of a sweep folder.

The index is rewritten (atomically) at every cell event, so a sweep killed at
any point leaves an index that a re-run can trust: a cell is kept only when the
index says ``completed`` *and* its folder's ``summary.json`` agrees.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rlperf.layout import CELL_FILE, INDEX_FILE
from rlperf.results.jsonfile import write_json
from rlperf.results.record import RunRecord, read_record
from rlperf.vocabulary import FINAL_STATUSES, RunStatus

INDEX_VERSION = 1


def now_iso() -> str:
    """Wall-clock time now, ISO 8601 in UTC."""
    return datetime.now(UTC).isoformat()


@dataclass
class CellRecord:
    """One cell of a sweep, as stored in ``sweep.json`` and in its folder's ``cell.json``."""

    hash: str
    overrides: list[str]
    subdir: str  # folder under the sweep folder
    job_num: int
    status: str = RunStatus.pending
    reason: str | None = None  # why skipped / failed / interrupted
    group: int | None = None  # index of the Ray instance (see sweep.json "groups")
    request: list[dict[str, float]] | None = None  # the trial's resource bundles
    runs: int = 0  # how many times a trial of it started (retries and resumes included)
    started_at: str | None = None
    finished_at: str | None = None
    wall_s: float | None = None  # last run: trial start -> trial end, seen by the launcher
    trial_entered_at: float | None = None  # epoch s when the trial function began (last run)
    ray_address: str | None = None  # the Ray the trial ran in (the address joined, or local)
    node: str | None = None  # the node it ran on: "<node IP> <Ray node id>"
    # With hydra.launcher.storage: the cell's folder in the storage ("<experiment>/<folder>").
    storage: str | None = None
    return_value: Any = None  # the task function's return (JSON-able or its repr)
    concurrent_cells: int = 1  # hydra.launcher.max_concurrent_trials the cell ran under
    # A downstream cell: the training job it reads, "3 (model=tiny, workers=0)"
    # (rlperf.sweep.upstream.upstream_label; its folder is the cell's `run`).
    upstream: str | None = None
    # Repeats (rlperf.sweep.rounds): this cell is run `repeat` of its configuration; a
    # repeat's `base` is the hash of its run 0 (the grid's own cell). `closed`: on run 0,
    # why the configuration got no more runs (round, why, runs, text).
    repeat: int = 0
    base: str | None = None
    closed: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellRecord:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def jsonable_return(value: Any) -> Any:
    """``value`` if JSON can hold it (finite numbers, strings, None, bools), else its repr."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return repr(value)


@dataclass
class SweepIndex:
    """The resume index of one sweep folder."""

    sweep_dir: Path
    cells: dict[str, CellRecord] = field(default_factory=dict)
    groups: list[dict[str, Any]] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    created_at: str = field(default_factory=now_iso)
    # Repeats: the design, each round's order (cell hashes) and what closed after each.
    rounds: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.sweep_dir / INDEX_FILE

    @classmethod
    def load(cls, sweep_dir: Path) -> SweepIndex:
        """The index of ``sweep_dir``, or an empty one when the folder has none yet."""
        path = sweep_dir / INDEX_FILE
        if not path.is_file():
            return cls(sweep_dir)
        data = json.loads(path.read_text())
        return cls(
            sweep_dir,
            cells={h: CellRecord.from_json(r) for h, r in data.get("cells", {}).items()},
            groups=list(data.get("groups", [])),
            options=dict(data.get("options", {})),
            created_at=str(data.get("created_at", now_iso())),
            rounds=dict(data.get("rounds", {})),
        )

    def save(self) -> None:
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        write_json(
            self.path,
            {
                "version": INDEX_VERSION,
                # The folder's name: a copy rebuilt from a storage takes it (same labels).
                "folder": self.sweep_dir.name,
                "created_at": self.created_at,
                "updated_at": now_iso(),
                "options": self.options,
                "rounds": self.rounds,
                "groups": self.groups,
                "cells": {h: r.to_json() for h, r in self.cells.items()},
            },
        )

    def subdir_owner(self, subdir: str) -> str | None:
        """Hash of the cell whose folder is ``subdir``, if any."""
        for h, rec in self.cells.items():
            if rec.subdir == subdir:
                return h
        return None

    def is_done(self, cell_hash: str) -> bool:
        """Whether the cell finished in an earlier run and its folder still says so."""
        rec = self.cells.get(cell_hash)
        if rec is None or rec.status not in FINAL_STATUSES:
            return False
        return summary_status(self.sweep_dir / rec.subdir) == rec.status


def summary_status(cell_dir: Path) -> str | None:
    """``status`` of ``cell_dir/summary.json``; None when missing or unreadable."""
    record = read_record(cell_dir)
    return None if record is None or record.status is None else str(record.status)


def write_cell_file(cell_dir: Path, record: CellRecord) -> None:
    """``cell_dir/cell.json``: the record of this cell (hash, overrides, status, ...)."""
    cell_dir.mkdir(parents=True, exist_ok=True)
    write_json(cell_dir / CELL_FILE, record.to_json())


def mark_summary(cell_dir: Path, status: str, error: str | None) -> None:
    """Set ``status`` and ``error`` in ``cell_dir/summary.json``, keeping what is there.

    For an outcome the job itself could not write: a cell interrupted while its
    trial was torn down keeps every aggregate and row it had flushed.
    """
    record = read_record(cell_dir) or RunRecord.unwritten()
    record.mark(status, error)
    cell_dir.mkdir(parents=True, exist_ok=True)
    record.write(cell_dir)
