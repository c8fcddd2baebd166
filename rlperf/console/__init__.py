"""What a person sees on the terminal, kept apart from what the job log keeps.

One :class:`Console` per command: a header, progress (a bar on an interactive
terminal, one line per step otherwise), warnings that matter, a short summary.
While a job or sweep runs (:func:`terminal_session`), everything the process
writes to its stdout and stderr, and every log record, goes to the job's log
file; the terminal gets the filtered part (:mod:`rlperf.console.filters`).
``verbosity`` (``quiet`` | ``normal`` | ``verbose``; ``-v`` on the command line)
sets how much: docs/getting-started.md#what-the-terminal-shows.

Code that reports to the person calls :func:`current` (a plain stderr console
when no session is active: library use, tests, a Ray Tune trial).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from rlperf.console.capture import OutputCapture
from rlperf.console.filters import TerminalFilter
from rlperf.console.progress import RunProgress

#: ``verbosity`` values, least to most (rlperf.config.schema.Verbosity).
VERBOSITIES = ("quiet", "normal", "verbose")
#: A log record with ``extra={TERMINAL: False}`` goes to the log file only (the
#: console already showed it in its own form, e.g. a progress line).
TERMINAL = "rlperf_terminal"
#: Log lines in a log file rlperf opens itself (Hydra's job log has the same format).
LOG_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"


class Console:
    """The terminal of one command. ``interactive``: a TTY (live progress bars)."""

    def __init__(
        self,
        verbosity: str = "normal",
        stream: TextIO | None = None,
        out: TextIO | None = None,
        interactive: bool | None = None,
    ) -> None:
        self.verbosity = verbosity if verbosity in VERBOSITIES else "normal"
        self.stream = stream if stream is not None else sys.stderr
        self.out = out if out is not None else sys.stdout
        self.interactive = _isatty(self.stream) if interactive is None else interactive
        self.filter = TerminalFilter(verbose=self.verbose)
        self.log_path: Path | None = None  # the job log, while a terminal session runs
        self._rich: Any = None

    @property
    def verbose(self) -> bool:
        return self.verbosity == "verbose"

    @property
    def quiet(self) -> bool:
        return self.verbosity == "quiet"

    def rich(self) -> Any:
        """The ``rich`` console on :attr:`stream` (interactive terminals only)."""
        if self._rich is None:
            from rich.console import Console as RichConsole

            self._rich = RichConsole(file=self.stream, force_terminal=True, highlight=False)
        return self._rich

    def say(self, message: str, *, progress: bool = False) -> None:
        """A line for the person (``progress``: a progress line, not shown at ``quiet``)."""
        if progress and self.quiet:
            return
        if self.interactive:
            self.rich().print(message, markup=False, soft_wrap=True)
        else:
            self.stream.write(message + "\n")
            self.stream.flush()

    def passthrough(self, fd: int, line: str) -> None:
        """A captured line the filter passed, to the stream it was written to."""
        if fd == 1 and not self.interactive:
            self.out.write(line + "\n")
            self.out.flush()
        else:
            self.say(line)

    def run_progress(
        self, label: str, total: int, unit: str = "iteration", started: float | None = None
    ) -> Any:
        """A :class:`~rlperf.console.progress.RunProgress` over ``total`` steps."""
        return RunProgress(self, label, total, unit, started)


_active: list[Console] = []


def current() -> Console:
    """The console of the running command (a plain stderr one outside a session)."""
    return _active[-1] if _active else Console(stream=sys.stderr, interactive=False)


@contextlib.contextmanager
def activated(console: Console) -> Iterator[Console]:
    """Make ``console`` the one :func:`current` returns."""
    _active.append(console)
    try:
        yield console
    finally:
        _active.remove(console)


@contextlib.contextmanager
def terminal_session(verbosity: str, log_path: Path | None) -> Iterator[Console]:
    """A console on the real terminal; stdout/stderr and logging into ``log_path``.

    ``log_path`` None: the root logger's log file (Hydra's job log), if any.
    """
    log_path = log_path or _root_log_file()
    stream = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8", errors="replace")
    console = Console(verbosity, stream, out)
    console.log_path = log_path
    handler = TerminalHandler(console)
    capture = (
        OutputCapture(log_path, console.filter.shows, console.passthrough)
        if log_path is not None
        else contextlib.nullcontext()
    )
    try:
        with activated(console), _routed_logging(handler, log_path), capture:
            yield console
    finally:
        stream.close()
        out.close()


class TerminalHandler(logging.Handler):
    """Log records to the console: rlperf's from WARNING (INFO at ``verbose``); others filtered."""

    def __init__(self, console: Console) -> None:
        super().__init__(logging.INFO if console.verbose else logging.WARNING)
        self.console = console
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, TERMINAL, True) is False:
            return
        try:
            line = self.format(record)
            own = record.name.split(".")[0] in ("rlperf", "hydra_plugins")
            if own or self.console.filter.shows(line):
                self.console.say(line if not own else f"rlperf: {record.getMessage()}")
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def quiet_logger(name: str, level: int = logging.CRITICAL) -> Iterator[None]:
    """The ``name`` logger at ``level`` for the duration (the job log misses what it drops)."""
    logger = logging.getLogger(name)
    saved = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(saved)


@contextlib.contextmanager
def _routed_logging(handler: logging.Handler, log_path: Path | None) -> Iterator[None]:
    """Replace the root logger's console handlers by ``handler``; log to ``log_path`` too."""
    root = logging.getLogger()
    consoles: list[logging.Handler] = [h for h in root.handlers if type(h) is logging.StreamHandler]
    added: list[logging.Handler] = [handler]
    if log_path is not None and log_path != _root_log_file():
        file_handler = logging.FileHandler(log_path, encoding="utf-8")
        file_handler.setFormatter(logging.Formatter(LOG_FORMAT))
        added.append(file_handler)
    for h in consoles:
        root.removeHandler(h)
    for h in added:
        root.addHandler(h)
    saved_level = root.level
    root.setLevel(min(root.level or logging.WARNING, logging.INFO))
    try:
        yield
    finally:
        root.setLevel(saved_level)
        for h in added:
            root.removeHandler(h)
            h.close()
        for h in consoles:
            root.addHandler(h)


def _root_log_file() -> Path | None:
    for h in logging.getLogger().handlers:
        if isinstance(h, logging.FileHandler):
            return Path(h.baseFilename)
    return None


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False
