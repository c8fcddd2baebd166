"""Inside a sweep's trial: Hydra's per-job setup, the task function in the cell's folder,
and what the trial reports to Tune; the JobReturn Hydra gets for each cell.

A trial runs in a Ray worker process inside the trial's placement group; Tune
creates that actor with ``placement_group_capture_child_tasks=True``, so the env
runners and learners RLlib starts from there land in the same group and Tune's
accounting is what runs. Hydra's ``run_job`` runs the task function exactly as
Hydra's own launchers do (``.hydra/`` snapshot, job log, callbacks); rlperf's job
wrapper writes the result files, and every step's row goes to Tune as an
intermediate result (the progress display's and a search scheduler's input).
"""

from __future__ import annotations

import base64
import contextlib
import math
import os
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle
import ray
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobRuntime, JobStatus, run_job, setup_globals
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from ray import tune

from rlperf.errors import CellFailed, TrialStopped
from rlperf.job_wrapper import IN_TRIAL_ENV, reporting_steps
from rlperf.layout import CONFIG_FILE, SUMMARY_FILE
from rlperf.results.columns import ENV_STEPS
from rlperf.results.record import RunRecord, read_record
from rlperf.results.storage import Storage
from rlperf.sweep.cells import is_rlperf_config
from rlperf.sweep.prepare import freeze_folder
from rlperf.sweep.search_results import ENV_STEPS_TOTAL
from rlperf.sweep.state import Cell
from rlperf.vocabulary import RunStatus

#: Keys of the trial's final result.
RESULT_RETURN = "rlperf_job_return"
RESULT_STATUS = "rlperf_job_status"
RESULT_ENTERED = "rlperf_trial_entered"
RESULT_NODE = "rlperf_node"
RESULT_STEP = "rlperf_step"  # [done, total, info] of the job's latest step (its progress)


def job_return(cell: Cell) -> JobReturn:
    """The JobReturn Hydra expects for ``cell`` (the trial's own where it sent one)."""
    rec = cell.record
    if cell.job_blob is not None and rec.status in (RunStatus.completed, RunStatus.skipped):
        with contextlib.suppress(Exception):
            return loads_return(cell.job_blob)
    hydra_cfg = OmegaConf.masked_copy(cell.sweep_config, "hydra")
    ret = JobReturn(
        overrides=list(rec.overrides),
        cfg=cell.task_cfg,
        hydra_cfg=hydra_cfg,
        working_dir=os.getcwd(),
        task_name=JobRuntime.instance().get("name"),
    )
    if rec.status in (RunStatus.completed, RunStatus.skipped):
        ret.status, ret.return_value = JobStatus.COMPLETED, rec.return_value
    else:
        where = cell.out_dir / SUMMARY_FILE if cell.rlperf else cell.out_dir
        error = cell.error or CellFailed(
            f"cell #{rec.job_num} ({' '.join(rec.overrides)}) {rec.status}: {rec.reason} "
            f"(see {where})"
        )
        ret.status, ret.return_value = JobStatus.FAILED, error
    return ret


def dumps_return(ret: JobReturn) -> str:
    return base64.b64encode(cloudpickle.dumps(ret)).decode()


def loads_return(blob: str) -> JobReturn:
    ret = cloudpickle.loads(base64.b64decode(blob))
    assert isinstance(ret, JobReturn)
    return ret


@dataclass(frozen=True)
class TrialPayload:
    """What every trial process gets from the launcher (Tune pickles it to the trial)."""

    task_function: Any  # Hydra's task function (rlperf's main, or another app's)
    hydra_context: Any
    singletons: Any  # Hydra's singletons' state (its config store, plugins)
    storage: bool  # the sweep writes to hydra.launcher.storage: the trial's folder is Tune's


@dataclass(frozen=True)
class GridPayload(TrialPayload):
    """A grid's group: each cell's sweep config, and where its upstream run is stored."""

    cells: dict[str, DictConfig]  # by cell hash
    inputs: dict[str, Any]  # by cell hash: the upstream run's stored copy (or None)


def cell_trial(config: dict[str, Any], payload: GridPayload) -> None:
    """Body of every sweep trial: Hydra's per-job setup, then the task function, in the
    cell's folder (``config["cell"]`` is the cell's hash, ``payload`` the group's cells)."""
    entered = enter_trial(payload)
    cell = config["cell"]
    stage_input(payload.cells[cell], payload.inputs.get(cell))
    run_trial_job(payload.cells[cell], payload, entered)


def stage_input(sweep_config: DictConfig, stored: tuple[str, str, str] | None) -> None:
    """A downstream cell whose upstream run folder this node lacks: fetched from the storage
    that holds its copy (``stored``: the folder, the storage URI, the folder under it) to the
    same path; where that path cannot be written here, beside the trial's folder (inside it,
    it would be uploaded as the cell's own), and ``run`` set to it."""
    if stored is None:
        return
    folder, uri, rel = stored
    if (Path(folder) / CONFIG_FILE).is_file():
        return
    storage = Storage(uri)
    try:
        storage.fetch(rel, Path(folder))
    except OSError:  # a path this node may not write (another user's home, read-only)
        staged = Path(os.getcwd()).parent / "upstream" / Path(folder).name
        storage.fetch(rel, staged)
        with read_write(sweep_config), open_dict(sweep_config):
            sweep_config.run = str(staged)


def storage_folder(sweep_config: DictConfig, payload: TrialPayload) -> Any:
    """With a storage (``payload.storage``): the cell's folder becomes the trial's own on
    this node, which Tune uploads to the storage (the launcher fetches it from there); Tune's
    storage context (``persist_artifacts``), else None."""
    if not payload.storage:
        return None
    storage = tune.get_context().get_storage()
    work = Path(storage.trial_working_directory)
    freeze_folder(sweep_config, work.parent, work.name)
    return storage


def enter_trial(payload: TrialPayload) -> float:
    """What a trial process needs before it loads or runs a cell (Hydra's singletons)."""
    entered = time.time()
    os.environ[IN_TRIAL_ENV] = "1"
    Singleton.set_state(payload.singletons)
    setup_globals()
    return entered


def run_trial_job(
    sweep_config: DictConfig,
    payload: TrialPayload,
    entered: float,
    final: Callable[[Path], dict[str, Any]] | None = None,
) -> None:
    """Hydra's ``run_job`` of one cell in this trial; every step's row goes to Tune.

    ``final``: more keys of the trial's last result, from the cell's folder (a
    search's objective).
    """
    storage = storage_folder(sweep_config, payload)
    # Tune changes into its trial folder; the job sees the launcher's working directory
    # (relative paths in a config mean the same as in a single run) where this node has it.
    cwd = str(sweep_config.hydra.runtime.cwd)
    if os.path.isdir(cwd):
        os.chdir(cwd)
    node = f"{ray.util.get_node_ip_address()} {ray.get_runtime_context().get_node_id()[:12]}"
    with reporting_steps(_StepReporter(node)):
        ret = run_job(
            hydra_context=payload.hydra_context,
            task_function=payload.task_function,
            config=sweep_config,
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )
    ok = ret.status == JobStatus.COMPLETED
    out_dir = Path(str(sweep_config.hydra.runtime.output_dir))
    blob = None
    if ok:
        try:
            blob = dumps_return(ret)
        except Exception:  # an unpicklable return value: the launcher builds the JobReturn
            blob = None
    else:
        _record_failure(out_dir, ret.cfg, ret._return_value)
    if storage is not None:
        storage.persist_artifacts(force=True)  # all of it, before the launcher hears the end
    tune.report(
        {
            **(final(out_dir) if final is not None else {}),
            RESULT_STATUS: ret.status.name,
            RESULT_RETURN: blob,
            RESULT_ENTERED: entered,
            RESULT_NODE: node,
        }
    )
    if not ok:
        exc = ret._return_value
        raise CellFailed(f"{type(exc).__name__}: {exc}") from None


class _StepReporter:
    """A step of the trial's job to Tune: its progress, and its row's numbers (an
    intermediate result the launcher's display and a search's scheduler read)."""

    def __init__(self, node: str) -> None:
        self.env_steps = 0
        self.node = node  # where the trial runs: known to the launcher from the first step

    def __call__(self, done: int, total: int, info: str, row: Mapping[str, Any] | None) -> None:
        numbers = {
            k: float(v)
            for k, v in (row or {}).items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        }
        if ENV_STEPS in numbers:
            self.env_steps += int(numbers[ENV_STEPS])
            numbers[ENV_STEPS_TOTAL] = self.env_steps
        try:
            tune.report({**numbers, RESULT_STEP: [done, total, info], RESULT_NODE: self.node})
        except SystemExit as exc:  # Tune stopped the trial (a search's scheduler)
            raise TrialStopped(exc.code) from None


def _record_failure(out_dir: Path, cfg: Any, exc: BaseException) -> None:
    """Make sure a failed rlperf cell's summary.json says failed, with the traceback.

    rlperf's job wrapper writes it for failures inside the job; this covers the
    rest (e.g. an error before the wrapper started).
    """
    if cfg is None or not is_rlperf_config(cfg):
        return
    record = read_record(out_dir) or RunRecord()
    if record.status in (RunStatus.failed, RunStatus.invalid) and record.traceback:
        return
    if record.stage is None:
        record.stage = str(cfg.get("stage"))
    error = f"{type(exc).__name__}: {exc}"
    record.mark(RunStatus.failed, error, "".join(traceback.format_exception(exc)))
    out_dir.mkdir(parents=True, exist_ok=True)
    record.write(out_dir)
