"""nox sessions: tests, lint, smoke (the README's main command), bench (benchmarks), gpu_check,
and the suite's own checks: random_order, timing."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.default_venv_backend = "venv"

TORCH = "torch==2.13.0"  # the CPU build; install it before the project
#: Shuffles the test order (random_order only: it stays out of `dev`, so the suite's
#: usual order is the file order).
RANDOMLY = "pytest-randomly==5.1.0"
#: The seeds random_order runs the non-slow suite under.
ORDER_SEEDS = (1, 2, 3)
#: Benchmarks that train for an hour or more: `nox -s bench` runs them only when named.
LONG_BENCHMARKS = ("benchmarks/bench_algos_targets.py", "benchmarks/bench_image_policy.py")


def _install(session: nox.Session) -> None:
    session.install(TORCH)
    session.install("-e", ".[dev]")


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """The README's test command (slow integration tests included; `-- -m 'not slow'` to skip)."""
    _install(session)
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(python="3.11")
def random_order(session: nox.Session) -> None:
    """The non-slow suite in three shuffled orders (pytest-randomly): no test may depend on
    another having run first. `-- <pytest args>` are added to each run."""
    _install(session)
    session.install(RANDOMLY)
    for seed in ORDER_SEEDS:
        session.run(
            "python", "-m", "pytest", "-m", "not slow", f"--randomly-seed={seed}", *session.posargs
        )


@nox.session(python="3.11")
def timing(session: nox.Session) -> None:
    """The tests marked `timing` (their outcome depends on the order of events between
    processes or threads), 10 times over beside a CPU hog that keeps every core busy.
    `-- N` repeats N times; `-- N slow` includes the slow ones (Ray runs, signals)."""
    _install(session)
    repeats = int(session.posargs[0]) if session.posargs else 10
    marker = "timing" if "slow" in session.posargs[1:] else "timing and not slow"
    hog = "while True: pass"
    cores = len(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(cores)]
    try:
        for _ in range(repeats):
            session.run("python", "-m", "pytest", "-q", "-m", marker, "-p", "no:randomly")
    finally:
        for proc in hogs:
            proc.kill()


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff (lint + format check) and mypy."""
    _install(session)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")


@nox.session(python="3.11")
def smoke(session: nox.Session) -> None:
    """The README's main command: a real quickstart training run."""
    _install(session)
    session.run("rlperf", *session.posargs)


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Benchmarks that print figures (all but the long ones; `nox -s bench -- <script>`: one).

    `tests/` goes on the path: the report and edge benchmarks build their inputs with the
    test kits in `tests/support/`, which are not part of the package (docs/development.md).
    The training runs of an hour and more (:data:`LONG_BENCHMARKS`) run only when named.
    """
    _install(session)
    scripts = session.posargs or [
        s for s in sorted(glob.glob("benchmarks/bench_*.py")) if s not in LONG_BENCHMARKS
    ]
    for script in scripts:
        session.run("python", script, env={"PYTHONPATH": "tests"})


@nox.session(python=False)
def gpu_check(session: nox.Session) -> None:
    """Prove the GPU paths on this machine (benchmarks/gpu_check.py), in the current environment.

    No venv and no install: a GPU machine brings its own CUDA torch and the
    wheelhouse (docs/development.md#gpu-check). Arguments pass through
    (`nox -s gpu_check -- --out DIR`).
    """
    session.run("python", "benchmarks/gpu_check.py", *session.posargs)
