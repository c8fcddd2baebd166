"""Repeats pooling (rlperf.report.stats.repeats) on cells built in memory: which keys make a
configuration, its stable key, the grouping by fingerprint and the run labels (found by
mutation testing, docs/development.md#mutation-testing)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from rlperf.report.read.cells import Cell
from rlperf.report.stats import repeats


def _cell(cid: str, status: str = "completed", stage: str = "train", **leaves: Any) -> Cell:
    return Cell(cid, Path(cid), "rlperf", "g", status, {"stage": stage, "model": "m1"},
                leaves=leaves)  # fmt: skip


def test_what_is_part_of_a_configuration() -> None:
    for key in ("seed", "run", "checkpoint", "model_path", "edge.cache_dir", "group",
                "hydra.job.num", "ray.address"):  # fmt: skip
        assert not repeats.is_identity_key(key), key
    for key in ("algo.lr", "edge.backend", "workers", "run_name", "hydra_like"):
        assert repeats.is_identity_key(key), key


def test_the_configuration_key_is_a_digest_of_its_values() -> None:
    a = _cell("a", seed=1, **{"algo.lr": 0.1, "run": "x", "ray.address": "auto"})
    values = repeats.configuration_values(a)
    assert values == {"algo.lr": 0.1, "stage": "train", "model": "m1"}
    blob = json.dumps(values, sort_keys=True, default=str)
    assert repeats.configuration_key(a) == hashlib.sha256(blob.encode()).hexdigest()[:16]
    b = _cell("b", seed=2, **{"algo.lr": 0.1, "run": "y", "out": Path("p")})
    c = _cell("c", seed=1, **{"algo.lr": 0.2})
    assert repeats.configuration_key(_cell("b2", seed=2, **{"algo.lr": 0.1})) == (
        repeats.configuration_key(a)
    )
    assert repeats.configuration_values(b)["out"] == Path("p")
    assert len({repeats.configuration_key(x) for x in (a, b, c)}) == 3
    # An axis wins over a leaf of the same name.
    d = _cell("d", model="leaf")
    assert repeats.configuration_values(d)["model"] == "m1"


def test_repeats_group_by_family_key_and_fingerprint() -> None:
    cells = [
        _cell("c0", seed=1, lr=1),
        _cell("c1", seed=1, lr=2),
        _cell("c2", seed=2, lr=1, status="failed"),
        _cell("c3", seed=3, lr=1),
        _cell("c4", seed=4, lr=1),  # another machine
        _cell("c5", seed=1, lr=1, stage="rollout"),
    ]
    fingerprints = {"c0": "fp1", "c1": "fp1", "c2": "fp1", "c3": "fp1", "c4": "fp2"}
    confs = repeats.group_repeats(cells, fingerprints)
    assert [(c.id, [x.id for x in c.cells]) for c in confs] == [
        ("c0", ["c0", "c2", "c3"]),
        ("c1", ["c1"]),
        ("c4", ["c4"]),
        ("c5", ["c5"]),
    ]
    first = confs[0]
    assert (first.family, first.model, first.fingerprint) == ("training", "m1", "fp1")
    assert first.key == repeats.configuration_key(cells[0])
    assert [c.id for c in first.completed] == ["c0", "c3"] and first.repeats == 2
    assert (confs[3].family, confs[3].fingerprint) == ("inference", "")


def test_runs_are_told_apart_by_seed_else_by_number() -> None:
    cells = [_cell("a", seed=1), _cell("b", seed=2)]
    conf = repeats.group_repeats(cells, {})[0]
    assert repeats.run_suffixes(conf) == {"a": "seed=1", "b": "seed=2"}
    same = repeats.group_repeats([_cell("a", seed=1), _cell("b", seed=1), _cell("c")], {})[0]
    assert repeats.run_suffixes(same) == {"a": "run 1", "b": "run 2", "c": "run 3"}
    assert repeats.run_suffixes(repeats.group_repeats([_cell("a", seed=1)], {})[0]) == {}
