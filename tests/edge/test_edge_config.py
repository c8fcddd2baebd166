"""The edge stage's config options: backend group options and the study_edge preset."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from rlperf.config.schema import Backend, register_configs
from tests.conftest import CONF


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


def test_backend_specs_agree_with_the_schema_and_the_config_group() -> None:
    """One spec per backend (rlperf/specs/backends.py): the schema's enum and
    conf/backend/ list exactly those, and the derived tables follow the specs."""
    from rlperf.specs.backends import (
        BACKEND_SPECS,
        BACKENDS,
        COMPRESSION_BACKENDS,
        EDGETPU_SOURCES,
        POST_TRAINING_BACKENDS,
    )
    from rlperf.tflite.convert import VARIANTS

    names = [spec.name for spec in BACKEND_SPECS]
    assert names == list(BACKENDS) and len(set(names)) == len(names)
    assert set(names) == {b.value for b in Backend}
    assert set(names) == {p.stem for p in (CONF / "backend").glob("*.yaml")}
    for spec in BACKEND_SPECS:
        assert (spec.variant is None) == (spec.executor == "rllib"), spec
        assert spec.variant is None or spec.variant in VARIANTS, spec
        # The Edge TPU compiler takes full-integer files only.
        assert not spec.edgetpu_source or spec.variant in ("int8", "qat"), spec
    assert EDGETPU_SOURCES == ("tflite_int8", "tflite_qat", "tflite_prune75_int8")
    assert COMPRESSION_BACKENDS == ("tflite_qat", "tflite_prune50", "tflite_prune75",
                                    "tflite_prune90", "tflite_prune75_int8",
                                    "tflite_struct50")  # fmt: skip
    assert set(POST_TRAINING_BACKENDS) == {"tflite_fp32", "tflite_fp16", "tflite_dynamic",
                                           "tflite_int8"}  # fmt: skip


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
