"""The edge tests' shared pieces: composing an edge config, running the stage in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture()
def compose_edge(tmp_path: Path):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from rlperf.config.schema import register_configs

    register_configs()

    def _compose(*overrides: str) -> Any:
        GlobalHydra.instance().clear()
        with initialize_config_module("rlperf.conf", version_base="1.3"):
            return compose("config", overrides=["stage=edge", *overrides])

    yield _compose
    GlobalHydra.instance().clear()


def run_edge(cfg: Any, out_dir: Path) -> dict[str, Any]:
    """The edge stage's entry point, with the job context the job wrapper gives it."""
    from rlperf.edge.job import run_edge as edge_stage
    from rlperf.job import JobContext

    return edge_stage(cfg, out_dir, JobContext.for_job(cfg, out_dir))
