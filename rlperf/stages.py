"""Dispatch a composed config to its stage inside the job wrapper.

Every stage's entry point has one signature, ``run_<stage>(cfg, out_dir, ctx) ->
dict`` (:data:`rlperf.job_wrapper.StageFunction`), is named by its spec
(:data:`rlperf.specs.stages.STAGE_SPECS`) and is imported only when its stage runs.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from rlperf.console import terminal_session
from rlperf.console.text import header_lines, summary_lines
from rlperf.job_wrapper import StageFunction, execute_stage, running_in_trial
from rlperf.results.columns import ITER_S
from rlperf.specs import load
from rlperf.specs.stages import STAGES


def stage_function(name: str) -> StageFunction:
    """The entry point of stage ``name`` (its module imported now)."""
    function: StageFunction = load(STAGES[name].entry)
    return function


def output_dir() -> Path:
    """The Hydra job folder (``${hydra:runtime.output_dir}``); the cwd is never changed."""
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)


def run_stage(cfg: DictConfig, out_dir: Path | None = None) -> float | None:
    """Run ``cfg.stage`` in the job wrapper; returns a number for Hydra sweepers.

    Training returns the mean iteration time (s) over non-warm-up iterations.
    A single run owns the terminal (header, progress, summary; the rest to the
    job log: :mod:`rlperf.console`); in a sweep's trial the launcher does.
    """
    out_dir = out_dir or output_dir()
    stage = stage_function(str(cfg.stage))
    if running_in_trial():
        record = execute_stage(cfg, out_dir, stage)
    else:
        with terminal_session(str(cfg.verbosity), None) as console:
            for line in header_lines(cfg, out_dir, console.log_path):
                console.say(line)
            record = execute_stage(cfg, out_dir, stage)
            for line in summary_lines(record, out_dir):
                console.say(line)
    metric = record.metric_mean(ITER_S)
    return float(metric) if metric is not None else None
