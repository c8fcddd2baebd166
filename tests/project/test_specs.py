"""The specs are the only source of what a user picks by name (rlperf.specs): every name
has one spec, every spec's functions exist, and no code outside the specs compares a
stage, backend or engine name or keeps its own table of them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rlperf.specs.backends import BACKEND_SPECS, BACKENDS, Backend
from rlperf.specs.engines import ENGINES, EnvEngine
from rlperf.specs.stages import READ_BY, STAGE_FAMILY, STAGE_SPECS, STAGES, Stage

REPO = Path(__file__).resolve().parents[2]
#: Where the names may be written: the specs themselves.
SPEC_DIR = REPO / "rlperf" / "specs"

#: The names of each kind, and the word an expression that holds one has in its text.
NAMES = {
    "stage": {str(s) for s in Stage},
    "backend": {str(b) for b in Backend},
    "engine": {str(e) for e in EnvEngine},
}


def _constants(node: ast.expr) -> set[str]:
    """The string constants of ``node``: itself, or the items of a tuple, list or set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {c for item in node.elts for c in _constants(item)}
    return set()


def name_comparisons(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every comparison of a stage, backend or engine name with an
    expression that holds one (``cell.backend == "rllib"``, ``stage in ("train", "env")``),
    and of every dict literal keyed by two or more stage names (a table of stages)."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for a, b in zip(operands, operands[1:], strict=False):
                for const_side, other in ((a, b), (b, a)):
                    names = _constants(const_side)
                    if not names:
                        continue
                    text = (ast.get_source_segment(source, other) or "").lower()
                    # cfg.backend.name, a stage variable, or a spec's own name (spec.name)
                    held = text.endswith("name")
                    if any(names <= valid and (held or w in text) for w, valid in NAMES.items()):
                        found.append((node.lineno, ast.get_source_segment(source, node) or ""))
        elif isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]
            stage_keys = [k for k in keys if _constants(k) & NAMES["stage"]]
            if len(stage_keys) >= 2 and len(stage_keys) == len(keys):
                found.append((node.lineno, "a dict keyed by stage names"))
    return found


def test_the_scanner_finds_planted_comparisons() -> None:
    """The check can fail: each planted comparison or table is found, a look-alike is not."""
    planted = [
        'if cell.backend == "rllib": pass',
        'if "edgetpu" != cfg.backend.name: pass',
        'if cfg.stage in ("train", "rollout"): pass',
        'x = spec.name == "python" or env_engine == "ale_vector"',
        'if spec.name == "gymnasium_sync": pass',
        'TABLE = {"train": 1, "env": 2}',
    ]
    for line in planted:
        assert name_comparisons(line), line
    for line in ['if kind == "env": pass', 'if spec.executor == "tflite": pass', 'x = {"a": 1}']:
        assert not name_comparisons(line), line


def test_no_name_comparison_outside_the_specs() -> None:
    """Code asks a spec (``spec.in_rllib``, ``stage_spec(s).trains``, ``engine.vector``)
    instead of comparing ``backend == "rllib"``, ``stage == "env"`` or ``engine ==
    "python"``, and keeps no table keyed by stage names of its own."""
    offenders = []
    for root in (REPO / "rlperf", REPO / "hydra_plugins"):
        for path in sorted(root.rglob("*.py")):
            if SPEC_DIR in path.parents:
                continue
            for line, text in name_comparisons(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(REPO)}:{line}: {text}")
    assert not offenders, "compare a spec attribute instead:\n" + "\n".join(offenders)


def test_every_name_has_one_spec_and_every_option_a_name() -> None:
    """Each enum member has exactly one spec, in the enum's order, and each shipped
    ``conf/backend/*.yaml`` names a backend."""
    assert [s.name for s in STAGE_SPECS] == list(Stage)
    assert sorted(BACKENDS) == sorted(Backend) and len(BACKEND_SPECS) == len(Backend)
    assert list(ENGINES) == list(EnvEngine)
    options = {p.stem for p in (REPO / "conf" / "backend").glob("*.yaml")}
    assert options == set(BACKENDS)
    # Held as plain strings: YAML and JSON write them, messages show them.
    assert all(type(s.name) is str for s in (*STAGE_SPECS, *BACKEND_SPECS, *ENGINES.values()))


@pytest.mark.parametrize("spec", STAGE_SPECS, ids=lambda s: s.name)
def test_a_stage_spec_names_functions_that_exist(spec) -> None:  # type: ignore[no-untyped-def]
    """The entry point and validator a spec names are top-level functions of their modules
    (read from the source: importing a stage pulls Ray or TensorFlow)."""
    for path in (spec.entry, spec.validator):
        module, _, function = path.partition(":")
        source = (REPO / Path(*module.split("."))).with_suffix(".py")
        tree = ast.parse(source.read_text(encoding="utf-8"))
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert function in names, f"{spec.name}: {path} is not a function of {source}"


def test_derived_tables() -> None:
    """The tables other modules read, derived from the specs, say what they said when they
    were written by hand (cli's READ_BY, the report's STAGE_FAMILY)."""
    downstream = ("rollout", "edge", "serve", "env")
    assert {
        "train": ("train",),
        "rollout": ("rollout",),
        "edge": ("edge", "serve"),
        "serve": ("serve",),
        "env_bench": ("env",),
        "run": downstream,
        "run_match": downstream,
        "run_select": downstream,
        "checkpoint": downstream,
        "model_path": ("edge", "serve"),
    } == READ_BY
    assert STAGE_FAMILY == {
        "train": "training",
        "rollout": "inference",
        "edge": "inference",
        "serve": "serve",
        "env": "env",
    }
    assert [s.name for s in STAGE_SPECS if s.trains] == ["train"]
    assert STAGES["serve"].serves and STAGES["env"].env_only
