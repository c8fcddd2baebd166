"""rlperf's layers (.importlinter, docs/development.md#layers) hold, and the check can fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
LAYERS = "rlperf's layers"
ACYCLIC = "no import cycles"
REPORT_LAYERS = "the report's own layers"


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over the packages found first in ``root`` (a copy, or the repo)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(REPO / ".importlinter")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_layers_hold() -> None:
    out = _lint_imports(REPO)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "4 kept, 0 broken" in out.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract", "names"),
    [
        # An upward import from the ground floor: the report above everything but plugins.
        ("errors.py", "import rlperf.report", LAYERS, "rlperf.errors -> rlperf.report"),
        # A stage importing another stage (siblings that must stay independent).
        ("training/job.py", "import rlperf.rollout.job", LAYERS, "rlperf.training.job -> "),
        # A cycle between two leaves of one layer, hidden in a function.
        (
            "resources/plan.py",
            "def _f():\n    import rlperf.algos",
            ACYCLIC,
            ".resources -> .algos",
        ),
        # Inside the report: reading must not reach up to a section.
        (
            "report/read/cells.py",
            "import rlperf.report.sections.base",
            REPORT_LAYERS,
            "rlperf.report.read.cells -> rlperf.report.sections.base",
        ),
    ],
    ids=["upward", "stage-to-stage", "cycle", "report-upward"],
)
def test_the_contract_fails_on_a_broken_copy(
    tmp_path: Path, module: str, line: str, contract: str, names: str
) -> None:
    """Copies of rlperf/ and hydra_plugins/ with one bad import: lint-imports exits 1 and
    names the contract and the import."""
    for package in ("rlperf", "hydra_plugins"):
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("*.pyc"))
    target = tmp_path / "rlperf" / module
    target.write_text(target.read_text() + f"\n\n{line}  # noqa\n")
    out = _lint_imports(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    broken = out.stdout.split("Broken contracts")[-1]
    assert contract in broken and names in broken, out.stdout
