"""The background queue between a job and its sinks: the measurement comes first.

Each sink has a thread and a queue of its own, so a slow or hung tool delays neither the
job (which only enqueues) nor another tool. A sink that fails once stops for the rest of
the run: the failure is said once on the terminal and recorded as an incident of the
job's ``summary.json`` (``tracking_failed``); the job's own files are complete whatever a
tool does. Closing waits for what is queued up to a deadline, then leaves the rest.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from rlperf.tracking.record import StepAxis, TrackedJob, TrackedRow

log = logging.getLogger("rlperf")

#: How long closing a job's tracking waits for its sinks to send what is queued. A tool
#: that has not answered by then is left (its call goes on in a daemon thread).
CLOSE_WAIT_S = 10.0
#: The same after a stop signal: the exit must stay within a scheduler's grace period.
INTERRUPTED_CLOSE_WAIT_S = 3.0

#: ``(kind, message, setting)`` of an incident (rlperf.job_wrapper.JobContext.incident).
Incident = Callable[[str, str, str | None], None]


class Sink(Protocol):
    tool: str
    where: str

    def exists(self, job: TrackedJob) -> bool: ...
    def open(self, job: TrackedJob) -> None: ...
    def log(self, rows: Sequence[TrackedRow], started_at: float) -> None: ...
    def finish(self, status: str, files: Sequence[Path], tags: Mapping[str, str]) -> None: ...


_STOP = object()


class SinkWorker:
    """One sink's thread: its calls in order, none after the first failure."""

    def __init__(self, make: Callable[[], Sink], tool: str, setting: str, incident: Incident):
        self.make, self.tool, self.setting, self.incident = make, tool, setting, incident
        self.sink: Sink | None = None
        self.failed = False
        self.calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=f"rlperf-{tool}", daemon=True)
        self.thread.start()

    def put(self, method: str, *args: Any) -> None:
        if not self.failed:
            self.calls.put((method, args))

    def _run(self) -> None:
        while True:
            item = self.calls.get()
            if item is _STOP:
                return
            if self.failed:
                continue
            method, args = item
            try:
                if self.sink is None:
                    self.sink = self.make()
                getattr(self.sink, method)(*args)
            except Exception as exc:  # noqa: BLE001 - a tool never breaks the job
                self._fail(first_line(exc))

    def _fail(self, why: str) -> None:
        self.failed = True
        where = getattr(self.sink, "where", "") if self.sink is not None else ""
        self.incident(
            "tracking_failed",
            f"tracking: {self.tool}{f' ({where})' if where else ''} failed: {why}; nothing more "
            f"goes to {self.tool} for this run (its files are complete; rlperf-report PATH "
            f"--to {self.tool} sends them later)",
            self.setting,
        )

    def close(self, deadline: float) -> bool:
        """Stop after what is queued; whether it finished before ``deadline`` (monotonic)."""
        self.calls.put(_STOP)
        self.thread.join(max(0.0, deadline - time.monotonic()))
        return not self.thread.is_alive()


#: What a tool's error says, in short, for the errors a reachable-or-not server gives.
_CAUSES = (
    (("ConnectionRefused", "Connection refused", "NewConnectionError"), "cannot connect"),
    (("ReadTimeout", "timed out", "ConnectTimeout"), "no answer within the time limit"),
    (("Name or service not known", "NameResolutionError"), "unknown host"),
)


def first_line(exc: BaseException, limit: int = 200) -> str:
    """An error in one short line: what went wrong with a server in words, else the first
    line of its message (cut at ``limit`` characters)."""
    text = str(exc).strip()
    for needles, said in _CAUSES:
        if any(n in text for n in needles):
            return said
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 1] + "…"


class Tracking:
    """A job's tracking: opened with the job, fed its rows, closed with its files."""

    def __init__(
        self,
        job: TrackedJob,
        sinks: Mapping[str, tuple[Callable[[], Sink], str]],
        incident: Incident,
    ) -> None:
        self.job = job
        self.axis = StepAxis(job.stage)
        self.workers = [
            SinkWorker(make, tool, setting, incident) for tool, (make, setting) in sinks.items()
        ]
        self.incident = incident
        for worker in self.workers:
            worker.put("open", job)

    @property
    def tools(self) -> list[str]:
        return [w.tool for w in self.workers]

    @property
    def failed(self) -> list[str]:
        """The tools that failed (each said once, and an incident)."""
        return [w.tool for w in self.workers if w.failed]

    def row(self, row: Mapping[str, Any]) -> None:
        """One result row as the job wrote it (enqueued; never waits for a tool)."""
        tracked = self.axis(row)
        for worker in self.workers:
            worker.put("log", [tracked], self.job.started_at)

    def close(
        self,
        status: str,
        files: Sequence[Path],
        tags: Mapping[str, str] | None = None,
        wait_s: float = CLOSE_WAIT_S,
    ) -> None:
        """Send the files (and ``tags`` known only now), end the runs; wait at most
        ``wait_s`` for the tools."""
        deadline = time.monotonic() + wait_s
        for worker in self.workers:
            worker.put("finish", status, list(files), dict(tags or {}))
        for worker in self.workers:
            if not worker.close(deadline) and not worker.failed:
                worker.failed = True
                self.incident(
                    "tracking_failed",
                    f"tracking: {worker.tool} had not finished {wait_s:.0f} s after the job "
                    f"ended; left unfinished (the job's files are complete)",
                    worker.setting,
                )
