"""Progress of a sweep: one line per cell event, a live display on a terminal, the final table.

Plain lines (CI, a log file) say when a cell starts, ends, is skipped or is
refused, with the counts so far and an ETA. On an interactive terminal a live
display below those lines shows the sweep's cells done and each running cell's
iterations (reported by its trial). The console is :mod:`rlperf.console`'s.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from rlperf.console import Console, current
from rlperf.console.progress import format_duration
from rlperf.sweep.index import CellRecord
from rlperf.vocabulary import DONE_STATUSES, RunStatus

__all__ = ["SweepProgress", "cell_label", "format_duration", "format_table", "shorten"]


def cell_label(record: CellRecord) -> str:
    """``#3 model=model1 workers=2`` (Hydra's job number and the cell's overrides); a repeat:
    ``#3 r1 model=model1 workers=2 seed=...`` (run 1 of that configuration)."""
    shown = " ".join(o for o in record.overrides if not o.startswith("hydra.")) or "(no overrides)"
    return f"#{cell_number(record)} {shown}"


def cell_number(record: CellRecord) -> str:
    """``3``, or ``3 r1`` for run 1 of cell 3's configuration."""
    return f"{record.job_num}" + (f" r{record.repeat}" if record.repeat else "")


class SweepProgress:
    """Counts, elapsed time and an estimate of the time left over the whole matrix.

    The estimate is the mean wall time of the cells that ran in this session
    times the cells still to run, divided by how many run at once.
    """

    def __init__(self, concurrency: int = 1, console: Console | None = None) -> None:
        self.concurrency = max(1, concurrency)
        self.console = console if console is not None else current()
        self.started = time.monotonic()
        self.walls: list[float] = []
        self._live: Any = None  # rich Progress while cells run on an interactive terminal
        self._tasks: dict[str, Any] = {}  # cell hash -> its row in the live display

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def eta_s(self, records: Iterable[CellRecord]) -> float | None:
        """Seconds left, or None before the first cell of this session finished."""
        if not self.walls:
            return None
        recs = list(records)
        left = sum(1 for r in recs if r.status == RunStatus.pending)
        running = sum(1 for r in recs if r.status == RunStatus.running)
        mean = sum(self.walls) / len(self.walls)
        return mean * (left + 0.5 * running) / self.concurrency

    def counts_text(self, records: Sequence[CellRecord]) -> str:
        c = Counter(r.status for r in records)
        done = sum(c[s] for s in DONE_STATUSES)
        parts = [f"{done}/{len(records)} done", f"{c[RunStatus.completed]} completed"]
        parts += [
            f"{c[s]} {s}"
            for s in (RunStatus.failed, RunStatus.invalid, RunStatus.skipped, RunStatus.interrupted)
            if c[s]
        ]
        if c[RunStatus.running]:
            parts.append(f"{c[RunStatus.running]} running")
        return ", ".join(parts)

    def line(self, event: str, record: CellRecord | None, records: Sequence[CellRecord]) -> str:
        """``[sweep 12s] finished  #3 model=... (41s) | 2/8 done, ... | ETA 1m20s``."""
        head = f"[sweep {format_duration(self.elapsed_s()):>6}] {event:<11}"
        what = ""
        if record is not None:
            what = cell_label(record)
            if (
                record.status in (RunStatus.completed, RunStatus.failed)
                and record.wall_s is not None
            ):
                what += f" ({format_duration(record.wall_s)})"
            if record.reason and record.status not in (
                RunStatus.completed,
                RunStatus.running,
                RunStatus.pending,
            ):
                what += f": {shorten(record.reason, 100)}"
        return (
            f"{head} {what} | {self.counts_text(records)} | "
            f"ETA {format_duration(self.eta_s(records))}"
        )

    def emit(self, event: str, record: CellRecord | None, records: Sequence[CellRecord]) -> None:
        self.console.say(self.line(event, record, records))
        if self._live is not None:
            self._update_live(record, records)

    def say(self, message: str) -> None:
        self.console.say(f"[sweep {format_duration(self.elapsed_s()):>6}] {message}")

    def cell_step(self, record: CellRecord, done: int, total: int, info: str) -> None:
        """A running cell's trial reported step ``done`` of ``total`` (live display only)."""
        if self._live is None:
            return
        task = self._tasks.get(record.hash)
        if task is None:
            task = self._live.add_task(f"  {cell_label(record)[:40]}", total=total, info="")
            self._tasks[record.hash] = task
        self._live.update(task, completed=done, total=total, info=info)

    def start_live(self, records: Sequence[CellRecord]) -> None:
        """The live display (interactive terminals, verbosity above quiet)."""
        if not self.console.interactive or self.console.quiet or self._live is not None:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._live = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            console=self.console.rich(),
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._tasks["sweep"] = self._live.add_task("sweep", total=len(records), info="")
        self._live.start()
        self._update_live(None, records)

    def add_live(self, records: Sequence[CellRecord]) -> None:
        """More cells to run (a round's repeats): the live display's total grows."""
        if self._live is not None and records:
            task = self._tasks["sweep"]
            total = next(t.total for t in self._live.tasks if t.id == task) or 0
            self._live.update(task, total=total + len(records))

    def stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live, self._tasks = None, {}

    def _update_live(self, record: CellRecord | None, records: Sequence[CellRecord]) -> None:
        done = sum(1 for r in records if r.status in DONE_STATUSES)
        eta = format_duration(self.eta_s(records))
        info = f"{self.counts_text(records)} | ETA {eta}"
        self._live.update(self._tasks["sweep"], completed=done, info=info)
        if record is not None and record.status != RunStatus.running and record.hash in self._tasks:
            self._live.remove_task(self._tasks.pop(record.hash))


def shorten(text: str, width: int) -> str:
    """First line of ``text``, cut to ``width`` characters."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= width else first[: width - 3] + "..."


def format_table(records: Sequence[CellRecord], reason_width: int = 90) -> str:
    """The final table, one row per cell in sweep order: number, status, wall, overrides,
    the upstream job (downstream sweeps over a sweep folder only), reason."""
    upstream = any(r.upstream for r in records)
    head = ("#", "status", "wall", "overrides", *(("upstream",) if upstream else ()), "reason")
    rows = [head]
    for r in sorted(records, key=lambda r: (r.job_num, r.repeat)):
        rows.append(
            (
                cell_number(r),
                r.status,
                format_duration(r.wall_s) if r.wall_s is not None else "-",
                " ".join(o for o in r.overrides if not o.startswith("hydra.")) or "-",
                *((r.upstream or "-",) if upstream else ()),
                shorten(r.reason, reason_width) if r.reason else "",
            )
        )
    n = len(head) - 1  # every column but the reason is padded
    widths = [max(len(row[i]) for row in rows) for i in range(n)]
    lines = []
    for row in rows:
        cells = [row[i].ljust(widths[i]) for i in range(n)]
        lines.append("  ".join([*cells, row[n]]).rstrip())
    return "\n".join(lines)
