"""Capture this process's stdout and stderr at the file-descriptor level.

Ray's C++ core worker, TensorFlow, the ALE and gRPC write to file descriptors 1
and 2 directly, past Python's ``sys.stdout`` / ``logging``. While a job runs,
both descriptors are pipes read by one thread: every line goes to the job's
log file (with a time stamp and the stream's name); the terminal, which keeps
the original descriptors, gets the lines its :class:`~rlperf.console.filters.TerminalFilter`
passes. Processes started meanwhile (Ray's raylet, GCS and workers) redirect
their own output to Ray's session logs.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

#: The two descriptors captured, with the name their lines carry in the log.
STREAMS = {1: "stdout", 2: "stderr"}


class OutputCapture:
    """fd 1 and 2 → pipes → (log file, filtered terminal). Use as a context manager.

    ``terminal(fd, line)`` is called for each line the filter ``shows`` (``fd``:
    1 or 2, the stream it was written to); ``original_fd(fd)`` is the terminal's
    descriptor while the capture is active.
    """

    def __init__(
        self, log_path: Path, shows: Callable[[str], bool], terminal: Callable[[int, str], None]
    ) -> None:
        self.log_path = log_path
        self.shows = shows
        self.terminal = terminal
        self._saved: dict[int, int] = {}
        self._readers: dict[int, int] = {}
        self._thread: threading.Thread | None = None
        self._log: IO[str] | None = None
        self._lock = threading.Lock()

    def original_fd(self, fd: int) -> int:
        return self._saved.get(fd, fd)

    def __enter__(self) -> OutputCapture:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "a", buffering=1, encoding="utf-8", errors="replace")
        _flush_python_streams()
        for fd in STREAMS:
            self._saved[fd] = os.dup(fd)
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)
            os.close(write_end)
            self._readers[fd] = read_end
        self._thread = threading.Thread(target=self._pump, name="rlperf-output", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        _flush_python_streams()
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)  # closes this process's write end of the pipe
        if self._thread is not None:
            # A child that inherited the pipe may hold it open: do not wait for it forever.
            self._thread.join(timeout=2.0)
        for saved in self._saved.values():
            os.close(saved)
        self._saved.clear()
        if self._log is not None:
            with self._lock, contextlib.suppress(OSError):  # a full disk: the job says so
                self._log.close()
            self._log = None

    def _pump(self) -> None:
        sel = selectors.DefaultSelector()
        partial: dict[int, bytes] = {}
        for fd, read_end in self._readers.items():
            sel.register(read_end, selectors.EVENT_READ, fd)
        open_ends = len(self._readers)
        while open_ends:
            for key, _ in sel.select(timeout=1.0):
                fd, read_end = key.data, key.fd
                chunk = os.read(read_end, 65536)
                if not chunk:
                    sel.unregister(read_end)
                    os.close(read_end)
                    open_ends -= 1
                    chunk = b"\n" if partial.get(fd) else b""
                *lines, partial[fd] = (partial.get(fd, b"") + chunk).split(b"\n")
                for raw in lines:
                    self._line(fd, raw.decode("utf-8", errors="replace").rstrip("\r"))
        sel.close()

    def _line(self, fd: int, line: str) -> None:
        with self._lock:
            if self._log is not None:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S")
                self._log.write(f"[{stamp}][{STREAMS[fd]}] {line}\n")
        with contextlib.suppress(Exception):  # the terminal must never stop the job
            if self.shows(line):
                self.terminal(fd, line)


def _flush_python_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
