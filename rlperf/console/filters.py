"""Which third-party lines reach the terminal (all of them reach the job log).

Ray, RLlib, TensorFlow, the ALE and gRPC write to this process's stdout and
stderr: Python log lines, C++ log lines, banners. At the default verbosity the
terminal shows only what a person running an experiment must act on:

- errors (a Python ``ERROR``/``CRITICAL`` record, a C++ ``E``/``F`` line, a
  traceback) unless they are known to be harmless (:data:`HARMLESS`);
- the warnings in :data:`MATTERS` (the run is slower or may fail because of
  something the user can change);

each distinct line once; nothing after a stop signal (Ctrl-C, SIGTERM, SIGHUP), when
Ray's processes die with the run and RLlib logs each lost actor as an error.
``verbosity=verbose`` (``-v``) shows every line.
"""

from __future__ import annotations

import re

from rlperf.errors import stop_signal

#: Timestamps, process ids and object ids that make copies of one line look different.
_VOLATILE = re.compile(
    r"^\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d+\]?\s*"  # leading timestamp
    r"|\b(pid|PID|ID)[=:]\s*[0-9a-f]+\b"
    r"|\b[0-9a-f]{16,}\b"
    r"|\b\d{3,}\b"
)

#: A line that reports an error: Python logging (``ERROR``), glog (``[... E 123 456]``),
#: an exception's last line.
_ERROR = re.compile(
    r"\b(ERROR|CRITICAL|FATAL)\b"
    r"|^\[[^\]]* [EF] \d+ \d+\]"
    r"|^[A-Za-z_.]*(Error|Exception): "
)

#: Errors that are not: known messages that accompany normal runs (Ray 2.60).
HARMLESS: tuple[re.Pattern[str], ...] = (
    # Env runners are restartable actors (RLlib's fault tolerance); Ray notes on every
    # start that their constructor arguments live in the object store (ray#53727).
    re.compile(r"has constructor arguments in the object store and max_restarts > 0"),
    # The serve job shuts Serve down and kills its controller: the raylet then reports the
    # controller's pending calls (graceful_shutdown, listen_for_change) as failed.
    re.compile(r"Task ServeController\.\w+ failed\..*killed by `ray\.kill`"),
)

#: Warnings that matter to the person running the experiment.
MATTERS: tuple[re.Pattern[str], ...] = (
    # Ray's object store fell back to disk: every transfer is slower.
    re.compile(r"object store is using /tmp instead of /dev/shm"),
    # Memory pressure: Ray's OOM killer or the object store spilling.
    re.compile(r"(?i)out of memory|memory monitor|killing worker|spilled \d+"),
    # A request that cannot be placed: the run waits.
    re.compile(r"(?i)cannot be scheduled right now|no available node types can fulfill"),
    re.compile(r"(?i)resource request.*cannot be (satisfied|fulfilled)"),
    # An env runner or worker died (RLlib then restarts it: rlperf records the fault).
    re.compile(r"(?i)worker died|actor died|was killed|unexpectedly exited"),
)


#: RLlib's logger of "Not importing TensorFlow for test purposes" (RLLIB_TEST_NO_TF_IMPORT).
TF_IMPORT_LOGGER = "ray.rllib.utils.framework"


class OnceFilter:
    """A ``logging`` filter that lets each distinct message of its logger through once."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def filter(self, record: object) -> bool:
        message = str(getattr(record, "msg", ""))
        if message in self.seen:
            return False
        self.seen.add(message)
        return True


def normalize(line: str) -> str:
    """``line`` without what differs between copies of it (times, pids, ids, counts)."""
    return _VOLATILE.sub("", line).strip()


class TerminalFilter:
    """Decides, line by line, what of the captured output the terminal shows.

    ``verbose``: everything. Otherwise errors, tracebacks and :data:`MATTERS`,
    each distinct (normalized) line once.
    """

    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose
        self.seen: set[str] = set()
        self.in_traceback = False

    def shows(self, line: str) -> bool:
        """Whether the terminal shows ``line`` (a line of captured output, no newline)."""
        if self.verbose:
            return True
        if stop_signal() is not None:
            return False
        if self._traceback_line(line):
            return True
        text = line.strip()
        if not text:
            return False
        if any(p.search(text) for p in HARMLESS):
            return False
        if not (_ERROR.search(text) or any(p.search(text) for p in MATTERS)):
            return False
        key = normalize(text)
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    def _traceback_line(self, line: str) -> bool:
        """Within a traceback every line counts; it ends after its first unindented line."""
        if line.startswith("Traceback (most recent call last):"):
            self.in_traceback = True
            return True
        if self.in_traceback:
            if not line[:1].isspace():
                self.in_traceback = False
            return True
        return False
