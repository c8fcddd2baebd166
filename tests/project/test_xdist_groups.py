"""Under two pytest-xdist workers (the README's test command), what must run in one worker
does (tests/support/xdist_groups.py): the tests of an ``xdist_group``, and a module's tests
that use a module-scoped fixture of that module, which is then built once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import TESTS

MODULE = """
import os, time
import pytest

@pytest.fixture(scope="module")
def costly():
    with open(os.environ["BUILT_LOG"], "a") as log:
        log.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + "\\n")
    return 1

@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    time.sleep(0.2)

@pytest.mark.parametrize("i", range(4))
def test_reads_costly(costly, i):
    time.sleep(0.2)

@pytest.mark.parametrize("i", range(4))
def test_free(i):
    time.sleep(0.2)
"""


def test_groups_and_module_fixtures_stay_in_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_mod.py").write_text(MODULE)
    built = tmp_path / "built.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env.update(PYTHONPATH=str(TESTS), BUILT_LOG=str(built))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
         "-p", "support.xdist_groups", "-p", "no:cacheprovider", "test_mod.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = re.findall(r"\[(gw\d)\] .*PASSED test_mod\.py::(\w+)\[", proc.stdout)
    workers: dict[str, set[str]] = {}
    for worker, test in ran:
        workers.setdefault(test, set()).add(worker)
    assert len(ran) == 12, proc.stdout
    assert len(workers["test_grouped"]) == 1 and len(workers["test_reads_costly"]) == 1
    assert len(built.read_text().splitlines()) == 1  # the module fixture, built once
