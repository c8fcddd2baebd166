"""nox sessions: tests, lint, smoke (the README's main command), bench (benchmarks), gpu_check,
envpool (the EnvPool engine's tests), and the suite's own checks: random_order, timing,
durations, mutation."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.default_venv_backend = "venv"

TORCH = "torch==2.13.0"  # the CPU build; install it before the project
#: Shuffles the test order (random_order only: it stays out of `dev`, so the suite's
#: usual order is the file order).
RANDOMLY = "pytest-randomly==5.1.0"
#: Mutation testing (mutation only, not in `dev`; configured in pyproject's [tool.mutmut]).
MUTMUT = "mutmut==3.8.1"
#: How the README's test command spreads the suite: two pytest-xdist workers, the tests that
#: share a module's fixture (or an `xdist_group`) in one (docs/development.md#two-workers).
XDIST = ("-n", "2", "--dist", "loadgroup")
#: The seeds random_order runs the non-slow suite under.
ORDER_SEEDS = (1, 2, 3)
#: Benchmarks that train for an hour or more: `nox -s bench` runs them only when named.
LONG_BENCHMARKS = (
    "benchmarks/bench_algos_targets.py",
    "benchmarks/bench_image_policy.py",
    "benchmarks/bench_repeats.py",  # two sweeps of half an hour together
)


def _install(session: nox.Session) -> None:
    session.install(TORCH)
    session.install("-e", ".[dev]")


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """The README's test command (slow integration tests included; `-- -m 'not slow'` to skip,
    `-- -n 0` for one process)."""
    _install(session)
    session.run("python", "-m", "pytest", *XDIST, *session.posargs)


@nox.session(python="3.11")
def envpool(session: nox.Session) -> None:
    """env.engine=envpool's tests with EnvPool installed (the `envpool` extra, not in dev:
    its assets are ~740 MB), slow ones included: frames, RLlib's creator, a training run."""
    _install(session)
    session.install("-e", ".[envpool]")
    session.run("python", "-m", "pytest", "tests/envs/test_envpool.py", *session.posargs)


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
def durations(session: nox.Session) -> None:
    """The whole suite, then where its time went (scripts/durations.py: per group of what the
    tests pay for, and the slowest tests; docs/development.md#where-the-time-goes). After any
    other full run, `python scripts/durations.py` reads the same record from .pytest_cache."""
    _install(session)
    session.run("python", "-m", "pytest", "-q", *XDIST, *session.posargs)
    session.run("python", "scripts/durations.py")


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
def mutation(session: nox.Session) -> None:
    """mutmut over the modules whose arithmetic decides results (pyproject's [tool.mutmut]),
    against the fast tests that reach them, then the scores per module
    (docs/development.md#mutation-testing). `-- rlperf/report/stats/estimates.py ...`: those
    modules' mutants only. One mutant at a time (`MUTMUT_MAX_CHILDREN` for more); results are kept
    in `mutants/` between runs (delete it to start over)."""
    _install(session)
    session.install(MUTMUT)
    names = [_mutant_glob(module) for module in session.posargs]
    children = os.environ.get("MUTMUT_MAX_CHILDREN", "1")
    session.run("mutmut", "run", "--max-children", children, *names)
    for line in mutation_scores(session.posargs or None):
        session.log(line)


def _mutant_glob(module: str) -> str:
    """`rlperf/report/stats/estimates.py` (or `rlperf.report.stats.estimates`) as mutmut's
    name pattern."""
    return module.removesuffix(".py").replace("/", ".") + ".*"


#: Modules whose table row counts only some functions: the sampler's energy arithmetic
#: (the counter trace and the per-iteration window), not its thread and its CSV.
MUTATION_SCOPES = {
    "rlperf/telemetry/sampler.py": (
        "_CounterTrace", "window", "mark", "_read_energy_locked", "_record_energy_locked"
    ),
}  # fmt: skip
#: mutmut's exit codes (mutmut/stats.py) by what the table calls them.
_STATUS = {1: "killed", 3: "killed", 0: "survived", 36: "timeout", 24: "timeout",
           -24: "timeout", 152: "timeout", 255: "timeout"}  # fmt: skip


def mutation_scores(modules: list[str] | None = None) -> list[str]:
    """The mutation table of `mutants/`: per module (:data:`MUTATION_SCOPES`: some of its
    functions), mutants killed / survived / timeout / not checked (never run, or no test
    reaches the function: mutmut's "not checked" and "no tests"), and killed / mutants.
    Equivalent mutants are named in the docs."""
    config = tomllib.loads(Path("pyproject.toml").read_text())["tool"]["mutmut"]
    paths = [m.removesuffix(".py").replace(".", "/") + ".py" for m in modules or []]
    lines = ["module | mutants | killed | survived | timeout | not checked | killed %"]
    for path in paths or config["only_mutate"]:
        meta = Path("mutants") / f"{path}.meta"
        codes = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
        if path in MUTATION_SCOPES:
            codes = {k: v for k, v in codes.items() if _in_scope(k, MUTATION_SCOPES[path])}
        count = Counter(_STATUS.get(code, "not checked") for code in codes.values())
        total = len(codes)
        score = f"{100 * count['killed'] / total:.1f}" if total else "-"
        lines.append(
            f"{path} | {total} | {count['killed']} | {count['survived']} | "
            f"{count['timeout']} | {count['not checked']} | {score}"
        )
    return lines


def _in_scope(mutant: str, names: tuple[str, ...]) -> bool:
    """Whether a mutant (`pkg.mod.xǁClassǁmethod__mutmut_3`, `pkg.mod.x_func__mutmut_1`) is
    in a function, method or class named in `names`."""
    where = mutant.rsplit(".", 1)[-1].rsplit("__mutmut_", 1)[0]
    return bool({where.removeprefix("x_"), *where.split("ǁ")[1:]} & set(names))


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
    The runs of half an hour and more (:data:`LONG_BENCHMARKS`) run only when named.
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
