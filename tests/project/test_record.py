"""``summary.json`` through its typed record (:mod:`rlperf.results.record`).

- The reader holds against folders written before the record existed (the committed GPU-check
  fixtures, written by the job wrapper of their day): every declared key reads as the file has
  it, and a record writes its file back byte for byte.
- Summary keys are read and written through the record, not by string: a string-keyed access
  of a summary (``summary["x"]``, ``summary.get("x")``, ``record.data["x"]``) outside the
  record module is refused.
"""

from __future__ import annotations

import ast
import json

from rlperf.results.jsonfile import write_json
from rlperf.results.record import RunRecord, from_json, read_record, record_class
from rlperf.vocabulary import RunStatus
from tests.conftest import DATA, REPO

#: The record module: the only one that names summary keys.
RECORD_MODULE = "rlperf/results/record.py"


def _holds_a_summary(node: ast.expr) -> bool:
    """``summary``, ``ctx.summary``, ``cell.summary`` and the like, or a record's ``data`` /
    ``results``: what a string key of summary.json is read from."""
    if isinstance(node, ast.Name):
        return "summary" in node.id.lower()
    if isinstance(node, ast.Attribute):
        if node.attr in ("data", "results"):  # a record's: record.data, ctx.record.results
            inner = node.value
            name = inner.id if isinstance(inner, ast.Name) else getattr(inner, "attr", "")
            return "record" in name.lower() or "summary" in name.lower()
        return "summary" in node.attr.lower()
    return False


def keyed_accesses(source: str) -> list[tuple[int, str]]:
    """(line, key) of each string-keyed read or write of a summary in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Subscript) and _holds_a_summary(node.value):
            key = node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "setdefault", "pop")
            and _holds_a_summary(node.func.value)
            and node.args
        ):
            key = node.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.append((node.lineno, key.value))
    return sorted(found)


def _counts() -> dict[str, int]:
    out = {}
    for root in ("rlperf", "hydra_plugins"):
        for path in sorted((REPO / root).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            n = len(keyed_accesses(path.read_text(encoding="utf-8")))
            if n and rel != RECORD_MODULE:
                out[rel] = n
    return out


def test_summary_keys_go_through_the_record() -> None:
    counts = _counts()
    assert not counts, (
        "summary keys read or written by string; use the attributes of the stage's record "
        f"in rlperf.results.record (or declare the key there): {counts}"
    )


def test_the_scanner_finds_a_planted_access() -> None:
    planted = (
        'x = summary["status"]\n'
        'y = ctx.summary.get("learner")\n'
        'record.data["steps"] = 3\n'
        "z = summary[key]\n"  # a key the caller chose (a search's metric) is not a literal
        "w = record.status\n"
    )
    assert keyed_accesses(planted) == [(1, "status"), (2, "learner"), (3, "steps")]


def test_folders_written_before_the_record_read_and_write_back_unchanged(tmp_path) -> None:
    files = sorted((DATA / "gpu_check").rglob("summary.json"))
    assert len(files) >= 10
    for path in files:
        raw = json.loads(path.read_text())
        record = read_record(path.parent)
        assert record is not None
        assert (record.status, record.stage, record.error) == (
            raw["status"],
            raw.get("stage"),
            raw.get("error"),
        )
        assert record.env_protocol == raw.get("env_protocol")
        assert record.wall_s == raw.get("wall_s")
        # Every key the job wrote is declared by its stage's record: nothing left untyped.
        assert type(record) is record_class(raw["stage"]) and record.results == {}
        out = tmp_path / path.relative_to(DATA).parent
        out.mkdir(parents=True)
        record.write(out)
        write_json(tmp_path / "expected.json", raw)
        assert (out / "summary.json").read_bytes() == (tmp_path / "expected.json").read_bytes()


def test_a_record_keeps_the_order_the_job_learnt_its_keys_in() -> None:
    record = RunRecord.new("train", "rllib", RunStatus.running)
    record.env_protocol = {"env_id": "CartPole-v1"}
    record.data.update(metrics={}, iterations=2)  # as a stage sets them, in this order
    record.incidents = [*record.incidents, {"kind": "x"}]
    record.mark(RunStatus.failed, "boom", "Traceback ...")
    record.wall_s = 1.5
    assert list(record.to_json()) == [
        "status", "stage", "backend", "error", "traceback", "incidents",
        "env_protocol", "metrics", "iterations", "wall_s",
    ]  # fmt: skip
    assert (record.status, record.iterations, record.results) == ("failed", 2, {"metrics": {}})
    # A declared key the file lacks reads as its default; a default list is never shared.
    empty = from_json({})
    assert empty.status is None and empty.preflight is False and empty.incidents == []
    empty.incidents.append({"kind": "y"})
    assert from_json({}).incidents == [] and "incidents" not in empty.data


def test_a_missing_or_broken_file_has_no_record(tmp_path) -> None:
    assert read_record(tmp_path) is None
    (tmp_path / "summary.json").write_text("[1, 2]")
    assert read_record(tmp_path) is None
    (tmp_path / "summary.json").write_text("{not json")
    assert read_record(tmp_path) is None
