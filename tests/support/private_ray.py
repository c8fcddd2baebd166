"""A Ray of a test's own: a short private temp folder (``RAY_TMPDIR``, ``--temp-dir``) that
names its processes, so that the test finds and stops exactly them, never another test's
Ray (pytest-xdist runs two at once) nor a user's."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator

import psutil


@contextlib.contextmanager
def private_ray_tmp() -> Iterator[str]:
    """A short private Ray temp dir (Unix socket paths must stay short); its processes are
    stopped and the dir removed afterwards, also when the test failed."""
    path = tempfile.mkdtemp(prefix="rlt", dir="/tmp")
    try:
        yield path
    finally:
        stop_processes(path)
        shutil.rmtree(path, ignore_errors=True)


def processes_with(marker: str) -> list[psutil.Process]:
    """Processes whose command line mentions ``marker`` (a private Ray temp dir)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.pid == os.getpid():
            continue
        try:
            if any(marker in arg for arg in proc.info["cmdline"] or ()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def stop_processes(marker: str) -> None:
    """Terminate the processes of ``marker``; kill those still there after 5 s."""
    terminate(processes_with(marker), 5.0)


def terminate(procs: list[psutil.Process], timeout: float) -> None:
    """Terminate ``procs``; kill those still there after ``timeout`` seconds."""
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()


def wait_gone(marker: str, timeout: float = 20.0) -> list[psutil.Process]:
    """Ray processes of ``marker`` still alive after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        left = processes_with(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)
