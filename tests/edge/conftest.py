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


def run_edge(cfg: Any, out_dir: Path, *, job: bool = False) -> dict[str, Any]:
    """The edge stage's entry point, with the job context the job wrapper gives it.

    ``job``: through the job wrapper itself, as in a trial of a sweep (its
    ``.hydra/config.yaml``, fingerprint and ``summary.json`` make ``out_dir`` a job
    folder the report reads).
    """
    from omegaconf import OmegaConf

    from rlperf.edge.edge_job import run_edge as edge_stage
    from rlperf.job_wrapper import JobContext, execute_stage

    if not job:
        return edge_stage(cfg, out_dir, JobContext.for_job(cfg, out_dir)).data
    (out_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, out_dir / ".hydra" / "config.yaml")
    return execute_stage(cfg, out_dir, edge_stage, in_trial=True).data
