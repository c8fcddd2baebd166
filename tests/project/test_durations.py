"""scripts/durations.py: each test's time goes to the group of what it pays for, and the
plugin keeps the times of a real run in pytest's cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import durations  # noqa: E402 - scripts/ is no package


def _entry(fixtures: list[str], markers: list[str], setup: float, call: float) -> dict:
    return {"fixtures": fixtures, "markers": markers, "setup": setup, "call": call,
            "teardown": 0.0, "outcome": "passed"}  # fmt: skip


def _record() -> dict[str, dict]:
    return {
        # The session fixture's 40 s are paid in the setup of the first test using it.
        "tests/rollout/test_rollout.py::a": _entry(["tiny_run"], ["slow"], 40.0, 2.0),
        "tests/rollout/test_rollout.py::b": _entry(["tiny_run"], ["slow"], 0.0, 1.0),
        "tests/tracking/test_tracking_tools.py::c": _entry(
            ["mlflow_server", "tiny_run"], [], 30, 1
        ),
        "tests/serve/test_serve.py::d": _entry([], ["slow"], 0.0, 20.0),
        "tests/config/test_config.py::e": _entry([], [], 0.0, 0.5),
    }


# Grouped, so that the record test below also sees the id pytest-xdist gives a grouped test.
@pytest.mark.xdist_group("durations_check")
def test_each_test_goes_to_the_first_group_it_matches() -> None:
    record = _record()
    groups = {node: durations.group_of(node, e) for node, e in record.items()}
    assert groups == {
        "tests/rollout/test_rollout.py::a": "a training run (shared fixture)",
        "tests/rollout/test_rollout.py::b": "a training run (shared fixture)",
        "tests/tracking/test_tracking_tools.py::c": "an MLflow server",
        "tests/serve/test_serve.py::d": "a Serve start",
        "tests/config/test_config.py::e": "fast tests",
    }


def test_tables_are_markdown() -> None:
    """The groups by time, the slowest tests; with the run's record, its wall time and
    what each pytest-xdist worker was busy for."""
    record = _record()
    lines = durations.table(record, top=2)
    assert lines[0] == "5 tests, 1.6 min of test time"
    assert "| a training run (shared fixture) | 2 | 43 | 46% |" in lines
    assert lines[-2:] == [
        "| 42 (setup 40) | tests/rollout/test_rollout.py::a |",
        "| 31 (setup 30) | tests/tracking/test_tracking_tools.py::c |",
    ]
    for node, entry in record.items():  # a (42 s) and c (31 s) on gw0; b, d, e (21.5 s) on gw1
        entry["worker"] = "gw0" if node.endswith(("::a", "::c")) else "gw1"
    lines = durations.table(record, top=2, run={"wall_s": 60.0, "workers": 2})
    assert lines[0] == (
        "5 tests, 1.6 min of test time, 1.0 min of wall time on 2 pytest-xdist workers "
        "(busy min: gw0 1.2, gw1 0.4)"
    )


@pytest.mark.parametrize("workers", [0, 2], ids=["serial", "xdist"])
def test_a_run_leaves_its_record_in_the_cache(tmp_path: Path, workers: int) -> None:
    """The plugin (tests/support/durations.py, loaded by tests/conftest.py) records a real
    pytest run, serial and under pytest-xdist: every test under its own id, its phases,
    its outcome and worker, and the run's wall time."""
    cache = tmp_path / "cache"
    tests = [
        f"tests/project/test_durations.py::{name}"
        for name in (
            "test_each_test_goes_to_the_first_group_it_matches",
            "test_tables_are_markdown",
        )
    ]
    xdist = ["-n", str(workers), "--dist", "loadgroup"] if workers else []
    # A worker's variables would make the run below think it is a worker too.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-o", f"cache_dir={cache}", *xdist, *tests],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads((cache / durations.CACHE_FILE).read_text())
    assert sorted(record) == sorted(tests)  # no "@durations_check" suffix
    for entry in record.values():
        assert entry["outcome"] == "passed" and entry["call"] > 0
        assert ("worker" in entry) == bool(workers)
    assert {e.get("worker") for e in record.values()} <= {None, "gw0", "gw1"}
    run = json.loads((cache / durations.RUN_FILE).read_text())
    assert run["workers"] == workers and run["wall_s"] > 0
    out = subprocess.run(
        [sys.executable, "scripts/durations.py", "--cache", str(cache)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0 and "| fast tests | 2 |" in out.stdout
    assert ("pytest-xdist workers" in out.stdout) == bool(workers), out.stdout
