"""scripts/durations.py: each test's time goes to the group of what it pays for, and the
plugin keeps the times of a real run in pytest's cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import durations  # noqa: E402 - scripts/ is no package


def _entry(fixtures: list[str], markers: list[str], setup: float, call: float) -> dict:
    return {"fixtures": fixtures, "markers": markers, "setup": setup, "call": call,
            "teardown": 0.0, "outcome": "passed"}  # fmt: skip


def test_each_test_goes_to_the_first_group_it_matches() -> None:
    record = {
        # The session fixture's 40 s are paid in the setup of the first test using it.
        "tests/rollout/test_rollout.py::a": _entry(["tiny_run"], ["slow"], 40.0, 2.0),
        "tests/rollout/test_rollout.py::b": _entry(["tiny_run"], ["slow"], 0.0, 1.0),
        "tests/tracking/test_tracking_tools.py::c": _entry(
            ["mlflow_server", "tiny_run"], [], 30, 1
        ),
        "tests/serve/test_serve.py::d": _entry([], ["slow"], 0.0, 20.0),
        "tests/config/test_config.py::e": _entry([], [], 0.0, 0.5),
    }
    groups = {node: durations.group_of(node, e) for node, e in record.items()}
    assert groups == {
        "tests/rollout/test_rollout.py::a": "a training run (shared fixture)",
        "tests/rollout/test_rollout.py::b": "a training run (shared fixture)",
        "tests/tracking/test_tracking_tools.py::c": "an MLflow server",
        "tests/serve/test_serve.py::d": "a Serve start",
        "tests/config/test_config.py::e": "fast tests",
    }
    lines = durations.table(record, top=2)
    assert lines[0] == "5 tests, 1.6 min of test time"
    assert "| a training run (shared fixture) | 2 | 43 | 46% |" in lines
    assert lines[-2:] == [
        "| 42 (setup 40) | tests/rollout/test_rollout.py::a |",
        "| 31 (setup 30) | tests/tracking/test_tracking_tools.py::c |",
    ]


def test_a_run_leaves_its_record_in_the_cache(tmp_path: Path) -> None:
    """The plugin (tests/support/durations.py, loaded by tests/conftest.py) records a real
    pytest run: every test, its phases and its outcome."""
    cache = tmp_path / "cache"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-o", f"cache_dir={cache}",
         "tests/project/test_durations.py::test_each_test_goes_to_the_first_group_it_matches"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads((cache / durations.CACHE_FILE).read_text())
    (node,) = record
    assert node.endswith("test_each_test_goes_to_the_first_group_it_matches")
    assert record[node]["outcome"] == "passed" and record[node]["call"] > 0
    out = subprocess.run(
        [sys.executable, "scripts/durations.py", "--cache", str(cache)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0 and "| fast tests | 1 |" in out.stdout
