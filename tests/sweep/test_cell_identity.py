"""A sweep cell's identity (rlperf.sweep.cells): the exact digest, plain mappings, and
configs whose interpolations only resolve inside their job (found by mutation testing,
docs/development.md#mutation-testing)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from omegaconf import OmegaConf

from rlperf.sweep.cells import cell_hash, identity_config, is_rlperf_config


def test_the_digest_is_of_the_compact_sorted_json() -> None:
    # Resume finds a recorded sweep's cells by this digest: its form must not drift
    # (key order, separators, length), or every cell of an old sweep would run again.
    expected = hashlib.sha256(b'{"a":[1,2],"b":{"c":"x"}}').hexdigest()
    assert cell_hash({"b": {"c": "x"}, "a": [1, 2]}) == expected[:16]
    assert cell_hash({"b": {"c": "x"}, "a": [1, 2]}, length=40) == expected[:40]


def test_values_json_cannot_hold_are_hashed_as_text() -> None:
    assert cell_hash({"out": Path("runs/a")}) == cell_hash({"out": "runs/a"})


def test_a_plain_mapping_leaves_out_the_non_identity_keys() -> None:
    assert identity_config({"seed": 1, "hydra": {"job": 3}, "ray": {"address": "x"}}) == {"seed": 1}


def test_an_interpolation_outside_its_job_is_hashed_unresolved() -> None:
    cfg = OmegaConf.create({"out": "${hydra:runtime.output_dir}", "seed": 1, "n": "${seed}"})
    assert identity_config(cfg) == {"out": "${hydra:runtime.output_dir}", "seed": 1, "n": 1}
    other = OmegaConf.create({"out": "${hydra:runtime.output_dir}", "seed": 2, "n": "${seed}"})
    assert cell_hash(cfg) != cell_hash(other)


def test_an_rlperf_config_has_every_key_that_decides_its_resources() -> None:
    keys = ("stage", "workers", "gpu_layout", "cpu_affinity", "env_runner")
    full = dict.fromkeys(keys, 0)
    assert is_rlperf_config(full) and is_rlperf_config(OmegaConf.create(full))
    for key in keys:
        assert not is_rlperf_config({k: 0 for k in keys if k != key}), key
    assert not is_rlperf_config({"db": "mysql"})  # a plain Hydra app (the launcher suites)


def test_nested_nodes_are_plain_and_resolved() -> None:
    cfg = OmegaConf.create({"algo": {"lr": "${base_lr}", "name": "ppo"}, "base_lr": 0.1})
    ident = identity_config(cfg)
    assert ident == {"algo": {"lr": 0.1, "name": "ppo"}, "base_lr": 0.1}
    assert type(ident["algo"]) is dict
    assert cell_hash(cfg) == cell_hash({"algo": {"name": "ppo", "lr": 0.1}, "base_lr": 0.1})
