"""A live ``rlperf`` process for the fault and signal tests and benchmarks.

Its stderr is read as it comes (:meth:`LiveRun.wait_line` waits on a line, not a sleep),
its process tree can be searched for a Ray process to kill, and it is always killed if
still running when the block ends.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import psutil
from support.one_run import one_run


class LiveRun:
    """``python -m rlperf ARGS`` in ``cwd``; stdout discarded, stderr collected line by line.

    ``new_session``: its own session and process group (as SLURM and a terminal start a job),
    so a signal can go to the group.
    """

    def __init__(
        self,
        args: Sequence[str],
        cwd: Path,
        env: Mapping[str, str] | None = None,
        new_session: bool = False,
    ) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rlperf", *one_run(args)],
            cwd=cwd,
            env=dict(env if env is not None else os.environ, PYTHONUNBUFFERED="1"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=new_session,
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_line(self, pattern: str, timeout: float) -> re.Match[str] | None:
        """The first stderr line matching ``pattern`` (regex), waiting up to ``timeout`` s;
        None when the process ended or the time ran out first."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        with self._changed:
            while True:
                for line in self.lines[seen:]:
                    if match := regex.search(line):
                        return match
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or not self._reader.is_alive():
                    return None
                self._changed.wait(left)

    def wait_until(self, done: Callable[[], bool], timeout: float, every_s: float = 0.2) -> bool:
        """Wait until ``done()`` (a file's rows: what no line announces); False when the
        process ended or the time ran out first."""
        deadline = time.monotonic() + timeout
        while not done():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                return done()
            time.sleep(every_s)
        return True

    def tree(self) -> list[psutil.Process]:
        """The process and all its descendants (Ray's GCS, raylet, workers, actors)."""
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        return []

    def groups(self) -> dict[int, int]:
        """The process group of every process of the tree that is still there: pid -> pgid."""
        found = {}
        for p in self.tree():
            with contextlib.suppress(OSError):
                found[p.pid] = os.getpgid(p.pid)
        return found

    def send(self, signum: int, to: str = "pid") -> None:
        """Send ``signum`` to the process (``pid``: Kubernetes, ``timeout``), to its process
        group (``group``: a terminal, ``kill -TERM -PGID``) or to every process of its tree at
        once (``every``: a scheduler that signals all of a job's processes, as SLURM's
        ``scancel`` and systemd's control-group kill do)."""
        if to == "pid":
            self.proc.send_signal(signum)
        elif to == "group":
            os.killpg(self.proc.pid, signum)
        elif to == "every":
            for p in self.tree():
                with contextlib.suppress(OSError):
                    os.kill(p.pid, signum)
        else:
            raise ValueError(f"to={to!r}: pid, group or every")

    def kill(self, match: Callable[[psutil.Process], bool]) -> list[str]:
        """``kill -9`` every descendant ``match`` accepts; their command lines."""
        killed = []
        for p in self.tree()[1:]:
            with contextlib.suppress(psutil.Error):
                if match(p):
                    killed.append(" ".join(p.cmdline()))
                    os.kill(p.pid, signal.SIGKILL)
        return killed

    def finish(self, timeout: float) -> int:
        """Wait for the exit (a hang guard); its status."""
        rc = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return rc

    def __enter__(self) -> LiveRun:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._reader.join(timeout=10)


def named(name: str) -> Callable[[psutil.Process], bool]:
    """A process whose name is ``name`` (``raylet``)."""
    return lambda p: p.name() == name


def command_starts(prefix: str) -> Callable[[psutil.Process], bool]:
    """A process whose command line starts with ``prefix`` (``ray::_WrappedExecutable``: a
    remote learner actor; ``ray::SingleAgentEnvRunner``: an env runner)."""
    return lambda p: " ".join(p.cmdline()).startswith(prefix)


def csv_rows(path: Path) -> int:
    """Data rows in a CSV file so far (0 while it does not exist)."""
    with contextlib.suppress(OSError):
        return max(len(path.read_text().splitlines()) - 1, 0)
    return 0
