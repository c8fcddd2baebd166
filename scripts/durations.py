"""Where the test suite's time goes: the last run's per-test times (kept by the plugin
``tests/support/durations.py`` in ``.pytest_cache``) grouped by what each test pays for.

    python scripts/durations.py [--top N] [--cache DIR]     # after any full pytest run
    nox -s durations                                         # runs the suite, then this

A test's time is its setup, call and teardown. A session- or module-scoped fixture is
paid in the setup of the first test that uses it, so a group's total is what the suite
spent on it. Each test goes to the first group whose rule matches its fixtures, folder or
markers (:data:`GROUPS`); the rules are a reading of the suite, not a measurement of the
library calls inside a test.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

CACHE_FILE = Path("v", "rlperf", "durations")
#: The run's wall time and pytest-xdist workers (0: none), beside the record.
RUN_FILE = Path("v", "rlperf", "durations-run")

Rule = Callable[[str, dict[str, Any]], bool]


def _fixtures(*names: str) -> Rule:
    return lambda _node, entry: any(n in entry["fixtures"] for n in names)


def _paths(*prefixes: str) -> Rule:
    return lambda node, _entry: node.startswith(prefixes)


def _marker(name: str) -> Rule:
    return lambda _node, entry: name in entry["markers"]


#: (group, rule), first match wins: what a test mostly pays for.
GROUPS: tuple[tuple[str, Rule], ...] = (
    ("an MLflow server", _fixtures("mlflow_server")),
    ("a Serve start", _fixtures("served")),
    ("a Serve start", _paths("tests/serve/")),
    (
        "a Ray of its own (sweeps, clusters, faults, signals)",
        _paths(
            "tests/sweep/test_sweeps_on_ray.py",
            "tests/sweep/test_search_on_ray.py",
            "tests/sweep/test_downstream_sweep_on_ray.py",
            "tests/training/test_faults.py",
            "tests/cli/test_signals.py",
        ),
    ),
    (
        "a training run (shared fixture)",
        _fixtures(
            "tiny_run",
            "tiny_sweep",
            "sac_run",
            "small_policy_run",
            "cartpole_policy_run",
            "point_mass_run",
            "cartpole_run",
            "trained_run",
            "rollout_run",
            "tracked_run",
            "killed_run",
            "seeds_sweep",
            "sweep",
            "sweeps",
        ),  # fmt: skip
    ),
    ("a training run (its own)", _paths("tests/training/", "tests/algos/")),
    ("TensorFlow export, conversion, compression", _paths("tests/tflite/", "tests/edge/")),
    ("an env stepped (engines, env stage)", _paths("tests/envs/", "tests/env_bench/")),
    ("a report built", _paths("tests/report/")),
    ("sleeps and polls (timing)", _marker("timing")),
    ("other slow integration", _marker("slow")),
    ("fast tests", lambda _node, _entry: True),
)


def group_of(node: str, entry: dict[str, Any]) -> str:
    return next(name for name, rule in GROUPS if rule(node, entry))


def total_s(entry: dict[str, Any]) -> float:
    return float(entry["setup"]) + float(entry["call"]) + float(entry["teardown"])


def table(
    record: dict[str, dict[str, Any]], top: int, run: dict[str, Any] | None = None
) -> list[str]:
    """The groups (tests, seconds, share) then the ``top`` slowest tests, as markdown;
    ``run`` (wall time, workers) adds the wall time and each pytest-xdist worker's share."""
    groups: dict[str, list[float]] = {}
    for node, entry in record.items():
        groups.setdefault(group_of(node, entry), []).append(total_s(entry))
    whole = sum(sum(v) for v in groups.values()) or 1.0
    head = f"{len(record)} tests, {whole / 60:.1f} min of test time"
    if run:
        head += f", {float(run['wall_s']) / 60:.1f} min of wall time"
        if run.get("workers"):
            busy: dict[str, float] = {}
            for entry in record.values():
                worker = str(entry.get("worker", "?"))
                busy[worker] = busy.get(worker, 0.0) + total_s(entry)
            shares = ", ".join(f"{w} {busy[w] / 60:.1f}" for w in sorted(busy))
            head += f" on {run['workers']} pytest-xdist workers (busy min: {shares})"
    lines = [
        head,
        "",
        "| what the tests pay for | tests | s | share |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, times in sorted(groups.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"| {name} | {len(times)} | {sum(times):.0f} | {sum(times) / whole:.0%} |")
    lines += ["", "| s (setup + call + teardown) | test |", "| ---: | --- |"]
    slowest = sorted(record.items(), key=lambda kv: -total_s(kv[1]))[:top]
    for node, entry in slowest:
        setup = f" (setup {entry['setup']:.0f})" if entry["setup"] >= 1 else ""
        lines.append(f"| {total_s(entry):.0f}{setup} | {node} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=25, help="the slowest tests listed")
    parser.add_argument("--cache", type=Path, default=Path(".pytest_cache"), help="pytest cache")
    args = parser.parse_args(argv)
    path = args.cache / CACHE_FILE
    if not path.is_file():
        print(f"durations: no record at {path}; run the tests first (nox -s durations)")
        return 2
    run_path = args.cache / RUN_FILE
    run = json.loads(run_path.read_text()) if run_path.is_file() else None
    for line in table(json.loads(path.read_text()), args.top, run):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
