"""Stop signals through rlperf's command runner (rlperf.errors), with real signals to a child.

SIGTERM (SLURM, Kubernetes, ``timeout``) and SIGHUP (a closed terminal or ssh session) stop
a command as Ctrl-C does, with 128 + the signal as its status; a second signal during the
cleanup ends it at once. The child says when it is ready for each signal (a line on its
stdout): no sleeps decide the outcome. Real runs: tests/training/test_training.py and the
launcher's tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timing

#: A command that waits for a signal, then cleans up in its ``finally``: slowly when asked.
CHILD = textwrap.dedent(
    """
    import sys, threading
    from rlperf.errors import interrupt_reason, run_command

    def command():
        try:
            print("ready", flush=True)
            threading.Event().wait(60)
        finally:
            print("cleanup", interrupt_reason(), flush=True)
            if sys.argv[1] == "slow":
                threading.Event().wait(60)

    sys.exit(run_command(command))
    """
)


def _start(cleanup: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, cleanup],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.parametrize(
    ("signum", "code", "name"),
    [
        (signal.SIGINT, 130, "Ctrl-C"),
        (signal.SIGTERM, 143, "SIGTERM"),
        (signal.SIGHUP, 129, "SIGHUP"),
    ],
)
def test_a_stop_signal_ends_the_command_as_ctrl_c_does(signum: int, code: int, name: str) -> None:
    proc = _start("quick")
    os.killpg(proc.pid, signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert out.strip() == f"cleanup interrupted ({name})"  # the finally ran, knowing why
    assert err.strip() == f"rlperf: interrupted ({name}); completed rows and cells are kept"


def test_a_second_signal_during_the_cleanup_exits_at_once() -> None:
    proc = _start("slow")
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "cleanup interrupted (SIGTERM)"
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=30)  # not the 60 s the cleanup would take
    assert proc.returncode == 129, err
    assert err.strip() == "rlperf: SIGHUP again: exiting now"
