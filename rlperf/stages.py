"""Dispatch a composed config to its stage inside the job wrapper."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from rlperf.results.job import JobContext, run_job


def _train(cfg: DictConfig, out_dir: Path, ctx: JobContext) -> dict[str, Any]:
    from rlperf.training.job import run_training

    return run_training(cfg, out_dir, ctx)


def _rollout(cfg: DictConfig, out_dir: Path, ctx: JobContext) -> dict[str, Any]:
    from rlperf.rollout.job import run_rollout

    return run_rollout(cfg, out_dir, ctx)


def _edge(cfg: DictConfig, out_dir: Path, ctx: JobContext) -> dict[str, Any]:
    from rlperf.edge.job import run_edge

    return run_edge(cfg, out_dir)


STAGES = {"train": _train, "rollout": _rollout, "edge": _edge}


def output_dir() -> Path:
    """The Hydra job folder (``${hydra:runtime.output_dir}``); the cwd is never changed."""
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)


def run_stage(cfg: DictConfig, out_dir: Path | None = None) -> float | None:
    """Run ``cfg.stage`` in the job wrapper; returns a number for Hydra sweepers.

    Training returns the mean iteration time (s) over non-warm-up iterations.
    """
    from rlperf.config.names import log_deprecated_choices

    log_deprecated_choices()
    summary = run_job(cfg, out_dir or output_dir(), STAGES[str(cfg.stage)])
    metric = summary.get("metrics", {}).get("iter_s", {}).get("mean")
    return float(metric) if metric is not None else None
