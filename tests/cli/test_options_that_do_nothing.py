"""Options that do nothing are refused or named (issue 28, point 5): a sweep or search
option in a single run (no ``-m``), a key only other stages read."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rlperf.cli import refuse_sweep_options, warn_other_stage_keys
from rlperf.errors import ConfigError
from rlperf.layout import SUMMARY_FILE
from tests.conftest import run_rlperf


def test_a_search_option_without_m_is_refused_before_anything_runs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = run_rlperf(["hydra.sweeper.search.algorithm=optuna", f"hydra.run.dir={run}"],
                      tmp_path, timeout=120)  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "rlperf: hydra.sweeper.search.algorithm=optuna: sweep options do nothing in a "
        "single run; add -m to sweep or search (docs/sweeps.md, docs/search.md)"
    ]
    assert not (run / SUMMARY_FILE).exists()  # nothing trained


@pytest.mark.parametrize(
    "override", ["hydra.launcher.max_concurrent_trials=2", "+hydra.sweeper.params.seed=1,2"]
)
def test_every_sweep_only_override_is_named(override: str) -> None:
    hydra_cfg = OmegaConf.create({"overrides": {"hydra": [override]}, "sweeper": {}})
    with pytest.raises(ConfigError, match="sweep options do nothing in a single run"):
        refuse_sweep_options(hydra_cfg)


def test_a_presets_sweep_axes_are_named_and_the_run_goes_on(capsys) -> None:
    """experiment=algo_compare_small without -m: its algo axis is a sweep's; one job runs."""
    hydra_cfg = OmegaConf.create({
        "overrides": {"hydra": ["hydra.run.dir=x"]},
        "sweeper": {"params": {"algo": "ppo,appo,impala,dqn"}},
    })  # fmt: skip
    refuse_sweep_options(hydra_cfg)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "rlperf: warning: hydra.sweeper.params (algo=ppo,appo,impala,dqn) has no effect "
        "without -m: this runs one job with the defaults; add -m to sweep them"
    ]
    refuse_sweep_options(OmegaConf.create({"overrides": {"hydra": []}, "sweeper": {}}))
    assert capsys.readouterr().err == ""  # a plain run: silent


@pytest.mark.parametrize(
    ("stage", "override", "readers"),
    [
        ("train", "rollout.episodes=5", "stage=rollout"),
        ("train", "run=outputs/x", "stage=rollout / stage=edge / stage=serve / stage=env"),
        ("rollout", "train.iterations=2", "stage=train"),
        ("rollout", "edge.episodes=2", "stage=edge / stage=serve"),
    ],
)
def test_a_key_only_other_stages_read_is_named(capsys, stage, override, readers) -> None:
    warn_other_stage_keys(OmegaConf.create({"overrides": {"task": [override]}}), stage)
    assert capsys.readouterr().err.strip().splitlines() == [
        f"rlperf: warning: {override} does nothing in a stage={stage} run (read by {readers})"
    ]


def test_keys_the_stage_reads_are_silent(capsys) -> None:
    task = ["train.iterations=2", "workers=0", "env=cartpole", "seed=3"]
    warn_other_stage_keys(OmegaConf.create({"overrides": {"task": task}}), "train")
    serve = ["edge.calibration.size=64", "serve.replicas=2", "run=outputs/x"]
    warn_other_stage_keys(OmegaConf.create({"overrides": {"task": serve}}), "serve")
    assert capsys.readouterr().err == ""
