"""rlperf's layers (.importlinter, docs/development.md#layers) hold, and the check can fail."""

from __future__ import annotations

import ast
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
        (
            "training/training_job.py",
            "import rlperf.rollout.rollout_job",
            LAYERS,
            "rlperf.training.training_job -> ",
        ),
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


def unexplained_deferred_imports(source: str) -> list[int]:
    """Lines of imports of rlperf's own modules inside a function with no comment saying
    why: on the import's line, or among the imports and comments of its block (the run of
    import statements it belongs to, back to the statement before it)."""
    lines = source.splitlines()
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for body in _bodies(fn):
            for i, stmt in enumerate(body):
                if not _imports_own_module(stmt):
                    continue
                start = i
                while start > 0 and isinstance(body[start - 1], ast.Import | ast.ImportFrom):
                    start -= 1
                end = i
                while end + 1 < len(body) and isinstance(
                    body[end + 1], ast.Import | ast.ImportFrom
                ):
                    end += 1
                first = body[start - 1].end_lineno + 1 if start > 0 else body[start].lineno - 3
                last = body[end].end_lineno or body[end].lineno
                block = lines[max(first, 1) - 1 : last]
                if not any("#" in line for line in block):
                    found.append(stmt.lineno)
    return found


def _bodies(fn: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list inside ``fn`` (its body, branches, loops, with and try blocks)."""
    out = []
    for node in ast.walk(fn):
        for name in ("body", "orelse", "finalbody", "handlers"):
            value = getattr(node, name, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                out.append(value)
    return out


def _imports_own_module(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.ImportFrom):
        names = [stmt.module or ""]
    elif isinstance(stmt, ast.Import):
        names = [a.name for a in stmt.names]
    else:
        return False
    return any(n.split(".")[0] in ("rlperf", "hydra_plugins") for n in names)


def test_every_deferred_internal_import_says_why() -> None:
    """An import of rlperf's own module inside a function defers a heavy library (torch,
    Ray, TensorFlow, an extra) and says so in a comment (docs/development.md#layers); an
    import that defers nothing belongs at the top of its module."""
    offenders = []
    for root in ("rlperf", "hydra_plugins"):
        for path in sorted((REPO / root).rglob("*.py")):
            for line in unexplained_deferred_imports(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(REPO)}:{line}")
    assert not offenders, "deferred imports without a reason:\n" + "\n".join(offenders)


def test_the_deferred_import_check_can_fail() -> None:
    bare = "def f():\n    x = 1\n    from rlperf.models import actor\n    return actor\n"
    said = (
        "def f():\n    x = 1\n    # torch: deferred\n    import torch\n"
        "    from rlperf.models import actor\n"
    )
    assert unexplained_deferred_imports(bare) == [3]
    assert unexplained_deferred_imports(said) == []
