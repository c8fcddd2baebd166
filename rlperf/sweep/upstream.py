"""Downstream sweeps over upstream sweeps: the jobs of ``run=<sweep folder>`` become an axis.

A rollout or edge sweep whose ``run`` is a sweep folder (``multirun/<date>/<time>``)
runs one cell per training job it takes: each override list of the sweep is
replaced by one list per job, with ``run=<sweep folder>/<job>``. Which jobs a
cell takes is the run-folder contract's (:func:`rlperf.runs.jobs.pick_jobs`): those
its explicit ``model=`` and ``run_match.<key>=`` match, all of them
(``run_select=all``, the default) or the one ``run_select`` picks. The job
folder is part of each cell's config, so the cell's hash (its identity for
resume) includes the upstream job, and every cell record names it.

A cell that matches no job is left as it is: its job then fails with the
message of :func:`rlperf.runs.locate.find_run_dir`, which lists what the folder holds.

The expansion happens in rlperf's sweeper (``hydra_plugins/rlperf_sweeper``),
before the launcher sees the cells: the launcher stays an executor (N override
lists in, N results out) and Hydra numbers the added cells like any other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from rlperf.errors import CheckpointError
from rlperf.layout import CONFIG_FILE
from rlperf.runs.jobs import UpstreamJob, is_job_folder, job_query, pick_jobs
from rlperf.runs.overrides import override_keys
from rlperf.specs.stages import DEFAULT_STAGE, trains

#: Loads the job config of one override list (Hydra's ``load_sweep_config``).
ConfigLoader = Callable[[list[str]], DictConfig]

# Characters Hydra's override grammar takes in an unquoted value (besides letters,
# digits and '_'); any other character in a path needs quotes.
_UNQUOTED = re.compile(r"^[\w/\-+.:%*@?|]+$")


def expand_batch(
    batch: Sequence[Sequence[str]], load_config: ConfigLoader, base_run: str | None
) -> list[list[str]]:
    """Every override list of ``batch``, a downstream one replaced by one per upstream job.

    ``base_run``: ``run`` of the sweep's primary config (set in a preset, say);
    lists that neither set ``run`` nor inherit one are returned unchanged
    without composing them.
    """
    out: list[list[str]] = []
    for overrides in batch:
        cell = list(overrides)
        if base_run is None and "run" not in override_keys(cell):
            out.append(cell)
        else:
            out.extend(expand_cell(cell, load_config))
    return out


def expand_cell(overrides: list[str], load_config: ConfigLoader) -> list[list[str]]:
    """One override list per upstream job the cell takes (the list itself where none applies)."""
    try:
        cfg = load_config(overrides)
        run = OmegaConf.select(cfg, "run", default=None)
        stage, checkpoint = cfg.stage, OmegaConf.select(cfg, "checkpoint", default=None)
    except Exception:  # composition errors are Hydra's to report, for every cell
        return [overrides]
    if trains(stage) or run is None or checkpoint is not None:
        return [overrides]
    sweep = Path(str(run)).expanduser()
    if not sweep.is_dir() or is_job_folder(sweep):
        return [overrides]
    try:
        jobs = pick_jobs(sweep, job_query(cfg, overrides))
    except CheckpointError:
        return [overrides]  # fails when it runs, naming what the folder holds
    return [with_run(overrides, f"{str(run).rstrip('/')}/{job.path.name}") for job in jobs]


def with_run(overrides: Sequence[str], run: str) -> list[str]:
    """``overrides`` with ``run=<run>`` in place of its ``run`` override (appended if none)."""
    value = (
        run if _UNQUOTED.match(run) else "'" + run.replace("\\", "\\\\").replace("'", "\\'") + "'"
    )
    out, replaced = [], False
    for item in overrides:
        key = item.split("=", 1)[0]
        if key.lstrip("+~") == "run" and "=" in item:
            out.append(f"{key}={value}")
            replaced = True
        else:
            out.append(item)
    return out if replaced else [*out, f"run={value}"]


def upstream_label(cfg: DictConfig) -> str | None:
    """``3 (model=tiny, workers=0)``: the training job a downstream cell reads (config keys
    ``stage``, ``run``), with the identity keys its sweep set; None for other cells."""
    run = OmegaConf.select(cfg, "run", default=None)
    if trains(OmegaConf.select(cfg, "stage", default=DEFAULT_STAGE)) or run is None:
        return None
    path = Path(str(run)).expanduser()
    if not (path / CONFIG_FILE).is_file():
        return None
    try:
        return UpstreamJob(path).label()
    except (OSError, ValueError):
        return None
