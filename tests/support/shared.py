"""What the suite builds once per run, also when pytest-xdist runs it in several workers.

A session-scoped fixture is built once per *process*: with ``-n 2`` each worker would
train its own copy of every shared run. :func:`build_once` builds it once in a folder
that all workers of the run share, under a file lock; the other workers wait for it and
read the same folder and value. Without xdist it is a plain ``mktemp``.

The folders are for reading: a test that writes copies first (as the report tests do).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from filelock import FileLock

T = TypeVar("T")

#: The value a build returned, next to what it built (its presence marks the build done).
VALUE_FILE = ".built.pickle"


def worker_id() -> str | None:
    """pytest-xdist's name of this worker (``gw0``, ``gw1``, ...); None outside xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER")


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this run sees: the parent of the workers' own base
    temp folders under xdist, the base temp folder otherwise."""
    base = factory.getbasetemp()
    return base.parent if worker_id() is not None else base


def build_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], T]) -> T:
    """``build(folder)`` once per test run (``folder``: ``<shared root>/<name>``, empty);
    later calls, in this worker or another, return the value it returned (pickled).

    A build that raised leaves nothing behind: the next caller builds again (and fails
    with its own error)."""
    if worker_id() is None:
        return build(factory.mktemp(name, numbered=True))
    folder = shared_root(factory) / f"shared-{name}"
    with FileLock(f"{folder}.lock"):
        done = folder / VALUE_FILE
        if done.exists():
            value: T = pickle.loads(done.read_bytes())
            return value
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        try:
            with machine_share(factory, alone=False):
                value = build(folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        done.write_bytes(pickle.dumps(value))
        return value


@contextlib.contextmanager
def machine_share(factory: pytest.TempPathFactory, alone: bool) -> Iterator[None]:
    """Hold the run's machine lock for one test: shared for most tests, exclusive for those
    that need the machine to themselves (``@pytest.mark.alone``: a memory threshold set
    from what the machine uses, a wall-clock bound), which then wait until the other
    workers' current tests end, and hold theirs back until they end.

    A reader-writer lock of two ``flock`` files: every test passes the turnstile before
    taking its share, and an exclusive taker holds the turnstile while it waits, so that
    the other workers' next tests queue behind it rather than starving it. Outside
    pytest-xdist it does nothing."""
    if worker_id() is None:
        yield
        return
    root = shared_root(factory)
    with (
        open(root / "machine.turnstile", "a") as turnstile,
        open(root / "machine.lock", "a") as lock,
    ):
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        if alone:
            fcntl.flock(lock, fcntl.LOCK_EX)
        else:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
            fcntl.flock(lock, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            if alone:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
