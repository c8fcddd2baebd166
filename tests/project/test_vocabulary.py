"""Vocabulary is imported, never retyped (docs/development.md#layers, STYLE).

- Column names: a string literal in rlperf/ equal to a column of ``rlperf/results/columns.py``
  (or ``rlperf.layout.EXCLUDED_COLUMN``) is refused outside the vocabulary's modules, but for
  the few below that name another thing.
- Run statuses: a string literal equal to a :class:`rlperf.vocabulary.RunStatus` value is
  refused outside ``rlperf/vocabulary.py``, likewise.
"""

from __future__ import annotations

import ast

from rlperf import layout, vocabulary
from rlperf.results import columns
from tests.conftest import REPO

RLPERF = REPO / "rlperf"
#: The vocabulary's own modules: the only ones that write the names.
VOCABULARY = {"rlperf/results/columns.py", "rlperf/layout.py", "rlperf/vocabulary.py"}

#: Every column name: the string constants of columns.py, and the exclusion column.
COLUMN_NAMES = frozenset(
    {v for v in vars(columns).values() if isinstance(v, str) and v.isidentifier()}
    | {layout.EXCLUDED_COLUMN}
)

#: (file, name): a literal equal to a column name that is another thing of the same name.
ALLOWED: dict[tuple[str, str], str] = {
    # the progress display's unit word and the report's sample units, not the column
    ("rlperf/console/__init__.py", "iteration"): "the progress bar's default unit word",
    ("rlperf/console/progress.py", "iteration"): "the progress bar's default unit word",
    ("rlperf/job_wrapper.py", "iteration"): "the progress display's default unit word",
    ("rlperf/console/text.py", "iteration"): "the label shown for iter_s",
    ("rlperf/report/compare/returns.py", "iteration"): "the unit a return sample is drawn per",
    ("rlperf/report/stats/robust.py", "iteration"): "one of the bootstrap's resampling units",
    # config keys: train.stop.env_steps / train.stop.time_s, edge.episodes, evaluation.episodes
    ("rlperf/training/target.py", "env_steps"): "train.stop's key (STOP_KEYS, the stop reason)",
    ("rlperf/training/target.py", "time_s"): "train.stop's key (STOP_KEYS, the stop reason)",
    ("rlperf/training/target.py", "episodes"): "the evaluation config's key and RLlib's unit",
    ("rlperf/validation/stages.py", "env_steps"): "train.stop's key",
    ("rlperf/validation/stages.py", "time_s"): "train.stop's key",
    ("rlperf/edge/edge_job.py", "episodes"): "edge.episodes, and the episodes.csv summary",
    # summary.json's "episodes" block of the inference stages: episodes.csv's count and returns
    ("rlperf/edge/benchmark.py", "episodes"): "the episodes.csv summary (summary.json)",
}


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def retyped(source: str, names: frozenset[str] = COLUMN_NAMES) -> list[tuple[int, str]]:
    """(line, name) of each string literal of ``source`` equal to a column name, docstrings
    left out."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in names
        and id(node) not in docs
    )


#: Every run status word (summary.json, cell.json, sweep.json).
STATUS_WORDS = frozenset(str(s) for s in vocabulary.RunStatus)

#: (file, word): a literal equal to a status word that is another thing of the same name.
ALLOWED_STATUS: dict[tuple[str, str], str] = {
    ("rlperf/edge/edge_job.py", "partial"): "a TFLite delegate's status (some ops delegated)",
    ("rlperf/tflite/runtime.py", "partial"): "a TFLite delegate's status (some ops delegated)",
    ("rlperf/job_wrapper.py", "failed"): "summary.json's tracking.failed: the tools that failed",
    ("rlperf/report/sections/cells.py", "skipped"): "the report's list of skipped folders",
    ("rlperf/report/sections/methods.py", "skipped"): "the report's list of skipped folders",
    ("rlperf/report/sections/title.py", "skipped"): "the report's list of skipped folders",
}


def _scan(
    names: frozenset[str] = COLUMN_NAMES,
    allowed: dict[tuple[str, str], str] = ALLOWED,
    own: frozenset[str] = frozenset(VOCABULARY),
    roots: tuple[str, ...] = ("rlperf",),
) -> tuple[list[str], set[tuple[str, str]]]:
    found, seen = [], set()
    for path in sorted(p for root in roots for p in (REPO / root).rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel in own:
            continue
        for line, name in retyped(path.read_text(encoding="utf-8"), names):
            seen.add((rel, name))
            if (rel, name) not in allowed:
                found.append(f"{rel}:{line}: {name!r}")
    return found, seen


def test_column_names_are_imported_not_retyped() -> None:
    found, seen = _scan()
    assert not found, (
        "column names retyped; import them from rlperf.results.columns "
        "(EXCLUDED_COLUMN from rlperf.layout):\n" + "\n".join(found)
    )
    # The allow-list stays short: an entry whose literal is gone goes too.
    assert set(ALLOWED) <= seen, f"allow-list entries no longer needed: {set(ALLOWED) - seen}"


def test_statuses_are_imported_not_retyped() -> None:
    own = frozenset({"rlperf/vocabulary.py"})
    found, seen = _scan(STATUS_WORDS, ALLOWED_STATUS, own, ("rlperf", "hydra_plugins"))
    assert not found, (
        "run statuses retyped; name them as rlperf.vocabulary.RunStatus members:\n"
        + "\n".join(found)
    )
    assert set(ALLOWED_STATUS) <= seen, f"no longer needed: {set(ALLOWED_STATUS) - seen}"


def test_the_scanner_finds_a_planted_literal() -> None:
    planted = 'def f(row):\n    """iter_s"""\n    return row["iter_s"] + row[ENV_STEPS]\n'
    assert retyped(planted) == [(3, "iter_s")]  # the docstring's is not a literal
    assert retyped(f'x = f"{{row[{layout.EXCLUDED_COLUMN!r}]}}"\n') == [(1, "excluded")]
    assert retyped('if rec.status == "running":\n    pass\n', STATUS_WORDS) == [(1, "running")]


def test_every_column_is_a_constant_named_as_it() -> None:
    """Each column of the file-format tuples is a constant of columns.py named as the column
    in upper case (the exclusion column is layout's)."""
    tuples = (columns.TRAIN_COLUMNS, columns.ENV_WINDOW_COLUMNS, columns.LATENCY_COLUMNS)
    for name in {c for t in tuples for c in t} - {layout.EXCLUDED_COLUMN}:
        assert getattr(columns, name.upper()) == name


def test_the_vocabulary_is_standard_library_only() -> None:
    for rel in VOCABULARY:
        tree = ast.parse((REPO / rel).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module in ("__future__", "enum", "pathlib", "rlperf.layout"), rel
            elif isinstance(node, ast.Import):
                raise AssertionError(f"{rel} imports {[a.name for a in node.names]}")
