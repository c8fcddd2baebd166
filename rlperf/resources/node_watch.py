"""The local Ray's node lost under a run: its raylet died (killed, out of memory, crashed).

Every worker on the node dies with its raylet, and the process that started Ray is left
with nothing to tell it so in time: Tune's next trial and RLlib's next call wait for a
node that never comes back, or Ray ends the process at its next object-store access
(exit 1, nothing said, the running cell's files saying ``running``). :func:`watch_node`
polls the raylet's process while a run uses the Ray this process started and, when it
has exited, raises :class:`NodeLost` in the main thread, wherever it is, as a signal
handler raises KeyboardInterrupt: a single run fails with one line and its rows kept, a
sweep marks the running cell failed and goes on in a fresh Ray
(:mod:`rlperf.sweep.groups`).

A stop signal sent to every process of a job at once (SLURM's ``scancel``, systemd's
control-group kill) kills the raylet too; that is an interrupt, not a lost node, so
nothing is raised once a stop signal came (:func:`rlperf.errors.stop_signal`). A signal to
rlperf's process group does not reach Ray's processes (they are started in groups of their
own: :func:`rlperf.resources.ray_session.init_ray`). Ray's own ``ray.shutdown`` stops the
raylet as well: the watch ends before it.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from rlperf.errors import RunFault, stop_signal

#: The Python-level handler slot the watch raises through (no signal is sent to the
#: process: ``_thread.interrupt_main`` only runs the handler in the main thread).
WAKE_SIGNAL = signal.SIGUSR2
#: How often the raylet's process is polled, and how long a death waits for a stop signal
#: that came with it (a scheduler's SIGTERM to every process reaches the raylet and rlperf
#: together).
POLL_S = 0.5
GRACE_S = 1.0
#: How often the exception is raised again until the watched block ends: library code
#: that catches every Exception may swallow one.
RETRY_S = 2.0


class NodeLost(RunFault):
    """The raylet of the local Ray this process started died while a run used it (exit 1)."""


def raylet_process() -> Any:
    """The ``subprocess.Popen`` of the raylet this process started; None when it started
    none (a joined cluster, inside a trial, Ray not running)."""
    import ray

    node = getattr(ray._private.worker, "_global_node", None)
    processes = getattr(node, "all_processes", None) or {}
    infos = processes.get("raylet") or []
    return infos[0].process if infos else None


def describe_exit(returncode: int) -> str:
    """``was killed by SIGKILL`` / ``exited with status 1`` for a process's return code."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


class NodeWatch:
    """The watch's state: what was lost, and whether the watched block has ended."""

    def __init__(self, process: Any, what: str) -> None:
        self.process = process
        self.what = what
        self.lost: NodeLost | None = None
        self._stop = threading.Event()  # the block ended: poll and raise no more

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            code = self.process.poll()
            if code is None:
                continue
            # A stop signal to every process of the job kills the raylet at the same moment.
            if self._stop.wait(GRACE_S) or stop_signal() is not None:
                return
            self.lost = NodeLost(
                f"Ray's node was lost {self.what}: its raylet (pid {self.process.pid}) "
                f"{describe_exit(code)}, and every Ray worker with it; the rows written "
                f"before are kept"
            )
            while not self._stop.is_set():
                _thread.interrupt_main(WAKE_SIGNAL)
                self._stop.wait(RETRY_S)
            return

    def _raise(self, signum: int, frame: Any) -> None:
        # Not again while the main thread is already unwinding or handling it.
        if self.lost is None or self._stop.is_set() or sys.exc_info()[1] is self.lost:
            return
        raise self.lost


@contextlib.contextmanager
def watch_node(what: str, process: Any = None) -> Iterator[NodeWatch | None]:
    """Raise :class:`NodeLost` in the main thread when the raylet this process started dies.

    ``what`` completes the message (``while group 0 ran``, ``during the run``). Whatever
    the block ends with after the raylet died, it leaves as :class:`NodeLost`. Yields the
    watch, or None where there is nothing to watch (no raylet of this process's, not the
    main thread). ``process``: the raylet's ``Popen`` (default: :func:`raylet_process`).
    """
    process = process if process is not None else raylet_process()
    if process is None or threading.current_thread() is not threading.main_thread():
        yield None
        return
    watch = NodeWatch(process, what)
    previous = signal.signal(WAKE_SIGNAL, watch._raise)
    thread = threading.Thread(target=watch._run, name="rlperf-node-watch", daemon=True)
    thread.start()
    try:
        yield watch
        if watch.lost is not None:  # the run ended anyway (a library swallowed the raise)
            raise watch.lost
    except BaseException as exc:
        # Raised inside a C extension, NodeLost arrives as a SystemError about "a result
        # with an exception set"; a library may wrap it: the watch knows what happened.
        if watch.lost is not None and exc is not watch.lost:
            raise watch.lost from None
        raise
    finally:
        watch._stop.set()
        thread.join(timeout=POLL_S + GRACE_S + 1)
        signal.signal(WAKE_SIGNAL, previous)
