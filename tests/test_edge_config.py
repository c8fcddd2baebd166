"""The edge stage's config options: backend group options and the study_edge preset."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from rlperf.config.schema import Backend, register_configs

CONF = Path(__file__).resolve().parents[1] / "conf"


@pytest.fixture()
def composer():
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_module("rlperf.conf", version_base="1.3"):
        yield compose
    GlobalHydra.instance().clear()


@pytest.mark.parametrize("backend", [b.value for b in Backend])
def test_every_backend_option_composes(composer, backend: str) -> None:
    assert (CONF / "backend" / f"{backend}.yaml").is_file()
    cfg = composer("config", overrides=["stage=edge", f"backend={backend}", "run=somewhere"])
    assert cfg.backend.name == backend


def test_study_edge_preset(composer) -> None:
    cfg = composer(
        "config",
        overrides=["experiment=study_edge", "run=outputs/study/${model.name}", "model=model4"],
        return_hydra_config=True,
    )
    assert cfg.stage == "edge"
    assert cfg.edge.episodes == 5
    params = cfg.hydra.sweeper.params
    # The policies are the run's: its jobs are the other axis (no model list here).
    assert "model" not in params
    assert params.backend.split(",") == ["rllib", "tflite_fp32", "tflite_int8", "edgetpu"]
    assert cfg.run == "outputs/study/model4"  # the run may follow each cell's model
