"""Progress of a sweep on stderr: one compact line per cell event, and the final table."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TextIO

from rlperf.sweep.index import CellRecord

#: Statuses that count as "done" in the progress line.
DONE = ("completed", "failed", "skipped", "invalid", "stopped_early")


def format_duration(seconds: float | None) -> str:
    """``75.2`` -> ``'1m15s'``; None -> ``'?'``."""
    if seconds is None:
        return "?"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def cell_label(record: CellRecord) -> str:
    """``#3 model=model1 workers=2`` (Hydra's job number and the cell's overrides)."""
    shown = " ".join(o for o in record.overrides if not o.startswith("hydra.")) or "(no overrides)"
    return f"#{record.job_num} {shown}"


class SweepProgress:
    """Counts, elapsed time and an estimate of the time left over the whole matrix.

    The estimate is the mean wall time of the cells that ran in this session
    times the cells still to run, divided by how many run at once.
    """

    def __init__(self, concurrency: int = 1, stream: TextIO | None = None) -> None:
        self.concurrency = max(1, concurrency)
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.monotonic()
        self.walls: list[float] = []

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def eta_s(self, records: Iterable[CellRecord]) -> float | None:
        """Seconds left, or None before the first cell of this session finished."""
        if not self.walls:
            return None
        recs = list(records)
        left = sum(1 for r in recs if r.status == "pending")
        running = sum(1 for r in recs if r.status == "running")
        mean = sum(self.walls) / len(self.walls)
        return mean * (left + 0.5 * running) / self.concurrency

    def counts_text(self, records: Sequence[CellRecord]) -> str:
        c = Counter(r.status for r in records)
        done = sum(c[s] for s in DONE)
        parts = [f"{done}/{len(records)} done", f"{c['completed']} completed"]
        parts += [f"{c[s]} {s}" for s in ("failed", "invalid", "skipped", "interrupted") if c[s]]
        if c["running"]:
            parts.append(f"{c['running']} running")
        return ", ".join(parts)

    def line(self, event: str, record: CellRecord | None, records: Sequence[CellRecord]) -> str:
        """``[sweep 12s] finished  #3 model=... (41s) | 2/8 done, ... | ETA 1m20s``."""
        head = f"[sweep {format_duration(self.elapsed_s()):>6}] {event:<11}"
        what = ""
        if record is not None:
            what = cell_label(record)
            if record.status in ("completed", "failed") and record.wall_s is not None:
                what += f" ({format_duration(record.wall_s)})"
            if record.reason and record.status not in ("completed", "running", "pending"):
                what += f": {shorten(record.reason, 100)}"
        return (
            f"{head} {what} | {self.counts_text(records)} | "
            f"ETA {format_duration(self.eta_s(records))}"
        )

    def emit(self, event: str, record: CellRecord | None, records: Sequence[CellRecord]) -> None:
        print(self.line(event, record, records), file=self.stream, flush=True)

    def say(self, message: str) -> None:
        print(
            f"[sweep {format_duration(self.elapsed_s()):>6}] {message}",
            file=self.stream,
            flush=True,
        )


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
    for r in sorted(records, key=lambda r: r.job_num):
        rows.append(
            (
                str(r.job_num),
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
