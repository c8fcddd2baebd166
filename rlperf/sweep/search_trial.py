"""A search's trial: its config from the searcher's parameters, its own pre-flight, the job.

Unlike a sweep's cells, a search's trials are not known up front: the searcher
proposes each trial's parameters and the trial loads its config from them (the
fixed overrides plus the values), refuses itself when the pre-flight would have
(status skipped or invalid, nothing run), and otherwise runs the same trial body
as a sweep's cell (:func:`rlperf.sweep.trial.run_trial_job`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from ray import tune

from rlperf.errors import TrialRefused
from rlperf.job_wrapper import write_refused_summary
from rlperf.resources.plan import detect_machine
from rlperf.sweep.preflight import write_hydra_snapshot
from rlperf.sweep.prepare import freeze_folder, load_cell_config, task_config
from rlperf.sweep.resources import (
    Bundle,
    RayStart,
    cell_request,
    cluster_infeasibility,
    local_infeasibility,
)
from rlperf.sweep.search_results import trial_score
from rlperf.sweep.trial import TrialPayload, enter_trial, run_trial_job, storage_folder
from rlperf.validation.validate import validate_config
from rlperf.vocabulary import RunStatus


def trial_config(
    config: DictConfig, hydra_context: Any, overrides: list[str], subdir: str, job_num: int
) -> DictConfig:
    """The sweep config of one trial (Hydra's config loader), its folder frozen in it."""
    previous = HydraConfig.instance().cfg
    try:
        sweep_config = load_cell_config(config, hydra_context, overrides, job_num)
        freeze_folder(sweep_config, Path(str(config.hydra.sweep.dir)).resolve(), subdir)
    finally:
        HydraConfig.instance().cfg = previous
    return sweep_config


def refusal(
    task_cfg: DictConfig,
    start: RayStart,
    overcommit: bool,
    cluster: tuple[Bundle, list[Bundle]] | None = None,
) -> tuple[str, str] | None:
    """``(status, reason)`` when the sweep pre-flight refuses a proposed trial, else None.

    ``cluster``: the totals and nodes of the existing Ray cluster the search runs on
    (None: a local Ray started with ``start``).
    """
    try:
        validate_config(task_cfg)
        request = cell_request(task_cfg)
    except Exception as exc:
        return RunStatus.invalid, f"{type(exc).__name__}: {exc}"
    if cluster is not None:
        reason = cluster_infeasibility(request, *cluster)
        return None if reason is None else (RunStatus.skipped, f"{reason} (Ray cluster)")
    if request.ray_start != start:
        return RunStatus.skipped, (
            f"needs Ray started with {request.ray_start.describe()}; the search's Ray has "
            f"{start.describe()}"
        )
    reason = local_infeasibility(request, detect_machine(), overcommit)
    return None if reason is None else (RunStatus.skipped, reason)


@dataclass(frozen=True)
class SearchPayload(TrialPayload):
    """A search's trials: the sweep config and space each trial's config comes from, and
    the pre-flight every proposal goes through in its trial."""

    config: DictConfig  # the sweep's config (hydra's node included)
    space: Any  # rlperf.sweep.space.SearchSpace
    keys: list[str]  # the space's axes, in order
    start: Any  # the search's RayStart: every trial must share it
    overcommit: bool  # ray.overcommit_cpus
    cluster: Any  # an existing cluster's (total, nodes), else None
    metric: str  # the search's objective


def trial_resources(payload: SearchPayload, params: dict[str, Any]) -> tune.PlacementGroupFactory:
    """The trial's placement group; a refused one asks for almost nothing (it ends at once).

    Called by Tune in the driver; it holds only what the trials get (Tune pickles it).
    """
    task_cfg = task_config(payload_config(payload, params, "preflight", -1))
    if refusal(task_cfg, payload.start, payload.overcommit, payload.cluster) is not None:
        return tune.PlacementGroupFactory([{"CPU": 0.01}])
    request = cell_request(task_cfg)
    return tune.PlacementGroupFactory(request.bundles, strategy=request.strategy)


def payload_config(
    payload: SearchPayload, params: dict[str, Any], subdir: str, job_num: int
) -> DictConfig:
    """:func:`trial_config` from a trial's payload (no launcher object in a trial)."""
    overrides = payload.space.overrides(params)
    return trial_config(payload.config, payload.hydra_context, overrides, subdir, job_num)


def search_trial(config: dict[str, Any], payload: SearchPayload) -> None:
    """Body of a search's trial: its config from its parameters, pre-flight, the job."""
    entered = enter_trial(payload)
    trial_id = tune.get_context().get_trial_id()
    params = {k: config[k] for k in payload.keys}
    sweep_config = payload_config(payload, params, f"trial_{trial_id}", trial_job_num(trial_id))
    task_cfg = task_config(sweep_config)
    refused = refusal(task_cfg, payload.start, payload.overcommit, payload.cluster)
    if refused is not None:
        storage = storage_folder(sweep_config, payload)
        out_dir = Path(str(sweep_config.hydra.runtime.output_dir))
        write_hydra_snapshot(sweep_config, task_cfg, out_dir)
        write_refused_summary(out_dir, task_cfg, *refused)
        if storage is not None:
            storage.persist_artifacts(force=True)
        raise TrialRefused(f"{refused[0]}: {refused[1]}")
    metric = payload.metric

    def final(out_dir: Path) -> dict[str, Any]:
        score = trial_score(out_dir, metric)
        return {} if score is None else {metric: score}

    run_trial_job(sweep_config, payload, entered, final)


def trial_job_num(trial_id: str) -> int:
    """``hydra.job.num`` of a trial: Tune's trial counter where its id has one (random,
    grid: ``<run>_00003``), else 0 (Optuna's ids are random hex)."""
    suffix = trial_id.rsplit("_", 1)[-1]
    return int(suffix) if "_" in trial_id and suffix.isdigit() else 0
