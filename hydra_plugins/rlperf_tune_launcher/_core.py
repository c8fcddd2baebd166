"""The work of the ``rlperf_tune`` launcher (imported inside ``launch()``: Ray, Tune, RLlib).

One ``launch`` call gets the N override lists of a Hydra multirun and returns N
JobReturns in order. In between:

1. every cell's sweep config is loaded; its identity is the hash of its
   resolved config (:mod:`rlperf.sweep.cells`); cells the sweep folder's index
   says completed (and whose ``summary.json`` agrees) are kept, not re-run;
2. pre-flight: each cell is validated, its trial's request is taken from RLlib
   and compared with what Ray will have; infeasible cells are skipped with the
   reason (``strict=true``: the sweep fails before anything runs);
3. cells are grouped by how Ray must be started (visible GPUs, CPU count,
   affinity); each group runs as one Tune experiment in its own local Ray,
   started after the group's GPUs and mask are applied to this process (on an
   existing cluster every cell runs in one experiment there);
4. in each trial Hydra's ``run_job`` runs the task function in the cell's
   folder (``.hydra/`` snapshot, job log, callbacks), exactly as Hydra's
   own launchers do; rlperf's job wrapper writes the result files;
5. progress lines go to stderr; ``sweep.json`` and each ``cell.json`` are
   updated at every event; the final table lists every cell.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import logging
import math
import os
import signal
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cloudpickle
import ray
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import (
    JobReturn,
    JobRuntime,
    JobStatus,
    configure_log,
    run_job,
    setup_globals,
)
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from ray import tune

from rlperf.config.names import log_deprecated_choices
from rlperf.console import TERMINAL, Console, terminal_session
from rlperf.console.deprecations import watching
from rlperf.errors import ExitCode, SweepIncomplete
from rlperf.job import IN_TRIAL_ENV, STEP_SINKS, TrialStopped, write_refused_summary
from rlperf.resources.plan import detect_machine, plan_resources
from rlperf.resources.ray_session import init_ray
from rlperf.results.summary import write_json
from rlperf.runs import REFUSED_STATUSES, SUMMARY_FILE, RunStatus
from rlperf.sweep.cells import CELL_FILE, cell_hash, is_rlperf_config
from rlperf.sweep.index import (
    CellRecord,
    SweepIndex,
    jsonable_return,
    mark_summary,
    now_iso,
    read_summary,
    summary_status,
    write_cell_file,
)
from rlperf.sweep.progress import SweepProgress, format_table
from rlperf.sweep.resources import (
    CellRequest,
    RayStart,
    cell_request,
    cluster_axis_error,
    cluster_capacity,
    local_capacity,
    local_infeasibility,
    ray_start_of,
    shortfall,
)
from rlperf.sweep.search_results import ENV_STEPS_TOTAL
from rlperf.sweep.upstream import upstream_label

if TYPE_CHECKING:
    from hydra_plugins.rlperf_tune_launcher.launcher import RlperfTuneLauncher

log = logging.getLogger(__name__)

#: Tune's own files (experiment state, trial error files) under the sweep folder.
TUNE_DIR = ".tune"
#: The launcher's log (everything this process and Ray's driver wrote); each cell's
#: job log is in its folder.
SWEEP_LOG = "sweep.log"
#: Keys of the trial's final result.
RESULT_RETURN = "rlperf_job_return"
RESULT_STATUS = "rlperf_job_status"
RESULT_ENTERED = "rlperf_trial_entered"
RESULT_ADDRESS = "rlperf_ray_address"
RESULT_STEP = "rlperf_step"  # [done, total, info] of the job's latest step (its progress)


class SweepError(HydraException):
    """The sweep cannot start (strict pre-flight, settings a cluster cannot honour)."""


class CellFailed(RuntimeError):
    """A cell's job failed; its folder's summary.json holds the error and traceback."""


@dataclass
class Cell:
    """One override list of the multirun, and what the launcher knows about it."""

    record: CellRecord
    sweep_config: DictConfig
    task_cfg: DictConfig
    out_dir: Path
    rlperf: bool
    request: CellRequest | None = None
    kept: bool = False  # completed in an earlier run of this sweep folder
    error: BaseException | None = None  # pre-flight failure (invalid config)
    job_blob: str | None = None  # the trial's pickled JobReturn
    t0: float | None = None  # monotonic time its trial started


@dataclass
class Group:
    """Cells that share how Ray is started: one Ray instance, one Tune experiment."""

    gid: int  # index into sweep.json "groups" (unique across resumed runs)
    start: RayStart
    cells: list[Cell]
    capacity: dict[str, float] | None = None  # what Ray has for them (local: what we start)


@dataclass
class _Sweep:
    """State shared by the launcher and the Tune callback."""

    launcher: RlperfTuneLauncher
    sweep_dir: Path
    index: SweepIndex
    cells: list[Cell]
    progress: SweepProgress
    options: DictConfig
    ray_cfg: DictConfig  # the job config's ``ray`` node (rlperf.config.schema.RayConfig)
    by_hash: dict[str, Cell] = field(default_factory=dict)

    @property
    def records(self) -> list[CellRecord]:
        return [c.record for c in self.cells]

    def save(self, cell: Cell | None = None) -> None:
        if cell is not None:
            self.index.cells[cell.record.hash] = cell.record
            write_cell_file(cell.out_dir, cell.record)
        self.index.save()


# ----------------------------------------------------------------------- launch


def launch(
    launcher: RlperfTuneLauncher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
) -> Sequence[JobReturn]:
    """Run every cell as a Tune trial; one JobReturn per override list, in order.

    An rlperf sweep in which cells failed or were invalid raises
    :class:`~rlperf.errors.SweepIncomplete` after the final table instead
    (docs/exit-codes.md); other Hydra apps get their failed JobReturns.
    """
    setup_globals()
    assert launcher.config is not None and launcher.hydra_context is not None
    assert launcher.task_function is not None
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    _check_options(launcher.options)
    sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    verbosity = str(OmegaConf.select(config, "verbosity", default="normal"))
    with terminal_session(verbosity, sweep_dir / SWEEP_LOG) as console:
        log_deprecated_choices(OmegaConf.to_container(config.hydra.runtime.choices))  # type: ignore[arg-type]
        sweep = _new_sweep(launcher, job_overrides, initial_job_idx, sweep_dir, console)
        with watching():
            _run_sweep(sweep)
        outcome = _outcome(sweep)
        if outcome is not None:
            log.error("%s", outcome, extra={TERMINAL: False})
    if outcome is not None:
        raise outcome
    return [_job_return(c) for c in sweep.cells]


def _new_sweep(
    launcher: RlperfTuneLauncher,
    job_overrides: Sequence[Sequence[str]],
    initial_job_idx: int,
    sweep_dir: Path,
    console: Console,
) -> _Sweep:
    """The sweep's index (resumed from ``sweep.json``), its cells and its progress display."""
    assert launcher.config is not None
    opts = launcher.options
    index = SweepIndex.load(sweep_dir) if opts.resume else SweepIndex(sweep_dir)
    index.options = OmegaConf.to_container(opts, resolve=True)  # type: ignore[assignment]
    progress = SweepProgress(int(opts.max_concurrent_trials), console)
    cells = _prepare_cells(launcher, job_overrides, initial_job_idx, sweep_dir, index)
    sweep = _Sweep(launcher, sweep_dir, index, cells, progress, opts, _ray_options(launcher.config))
    sweep.by_hash = {c.record.hash: c for c in cells}
    return sweep


def _run_sweep(sweep: _Sweep) -> None:
    """Pre-flight, then each group of cells in its Ray; the final table in any case."""
    progress, index, cells = sweep.progress, sweep.index, sweep.cells
    # An address, or a Ray this process already runs (a notebook, a test): join, never start.
    existing = sweep.ray_cfg.address is not None or ray.is_initialized()
    joined = False
    try:
        groups = _preflight(sweep, existing)
        if existing and not ray.is_initialized():
            log.info("joining the Ray cluster at %s", sweep.ray_cfg.address)
            init_ray(sweep.ray_cfg)
            joined = True
        if existing:
            _cluster_preflight(sweep, groups)
        _strict_check(sweep)
        _register_groups(sweep, groups)
        _record_not_run(sweep)
        _announce(sweep, groups, existing)
        progress.start_live([c.record for c in cells if not c.kept])
        for group in groups:
            if group.cells:
                _run_group(sweep, group, existing)
    except KeyboardInterrupt:
        if joined:  # the cluster ends this driver's trials when it disconnects
            ray.shutdown()
            joined = False
        _mark_interrupted(sweep)
        progress.say(
            "interrupted (Ctrl-C): completed cells are kept; run the same command with "
            f"hydra.sweep.dir={sweep.sweep_dir} to resume"
        )
        raise
    finally:
        progress.stop_live()
        if joined:
            ray.shutdown()
        index.save()
        if any(c.record.status != "pending" or c.kept for c in cells):
            progress.say("cells:\n" + format_table(sweep.records))


def _outcome(sweep: _Sweep) -> SweepIncomplete | None:
    """How the sweep ends (docs/exit-codes.md): None when every rlperf cell completed or was
    skipped; else exit 1 if a cell failed, 2 if cells were only invalid."""
    records = [c.record for c in sweep.cells if c.rlperf]
    counts = Counter(r.status for r in records)
    failed, invalid = counts[RunStatus.failed], counts[RunStatus.invalid]
    if not failed and not invalid:
        return None
    what = ", ".join(
        f"{n} {status}"
        for status, n in ((RunStatus.failed, failed), (RunStatus.invalid, invalid))
        if n
    )
    message = (
        f"sweep of {len(records)} cells: {what} (reasons in the table above; each cell's "
        f"summary.json has its error). The other cells' results stand; the same command with "
        f"hydra.sweep.dir={sweep.sweep_dir} runs only the cells not completed"
    )
    return SweepIncomplete(message, ExitCode.failed if failed else ExitCode.user_error)


def _ray_options(config: DictConfig) -> DictConfig:
    """The ``ray`` node of the sweep's config; RayConfig's defaults for other Hydra apps."""
    from rlperf.config.schema import RayConfig

    node = OmegaConf.select(config, "ray")
    return node if node is not None else OmegaConf.structured(RayConfig)


def _check_options(opts: DictConfig) -> None:
    if int(opts.max_concurrent_trials) < 1:
        raise SweepError(
            f"hydra.launcher.max_concurrent_trials={opts.max_concurrent_trials} must be >= 1"
        )
    if int(opts.max_failures) < -1:
        raise SweepError(
            f"hydra.launcher.max_failures={opts.max_failures} must be >= 0 (or -1: unlimited)"
        )


# ------------------------------------------------------------------ cells, resume


def _prepare_cells(
    launcher: RlperfTuneLauncher,
    job_overrides: Sequence[Sequence[str]],
    initial_job_idx: int,
    sweep_dir: Path,
    index: SweepIndex,
) -> list[Cell]:
    """Load each cell's sweep config, hash it, choose its folder, find the ones already done."""
    assert launcher.hydra_context is not None and launcher.config is not None
    previous_hydra = HydraConfig.instance().cfg
    cells: list[Cell] = []
    seen: dict[str, int] = {}
    taken: set[str] = set()
    try:
        for i, overrides in enumerate(job_overrides):
            job_num = initial_job_idx + i
            sweep_config = launcher.hydra_context.config_loader.load_sweep_config(
                launcher.config, list(overrides)
            )
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = job_num
                sweep_config.hydra.job.num = job_num
            HydraConfig.instance().set_config(sweep_config)
            default_subdir = str(OmegaConf.select(sweep_config, "hydra.sweep.subdir"))
            task_cfg = copy.deepcopy(sweep_config)
            with read_write(task_cfg), open_dict(task_cfg):
                del task_cfg["hydra"]
            h = cell_hash(task_cfg)
            # The same config twice in one sweep (repeats): distinct cells.
            seen[h] = seen.get(h, 0) + 1
            if seen[h] > 1:
                h = f"{h}~{seen[h]}"
            prev = index.cells.get(h)
            subdir = prev.subdir if prev is not None else default_subdir
            if prev is None and (
                _folder_owned_by_other(sweep_dir, index, subdir, h) or subdir in taken
            ):
                subdir = f"{default_subdir}-{h[:8]}"
            taken.add(subdir)
            out_dir = sweep_dir / subdir
            # Freeze the folder: the trial (in another process and cwd) must find the same one.
            with read_write(sweep_config.hydra), open_dict(sweep_config.hydra):
                sweep_config.hydra.sweep.dir = str(sweep_dir)
                sweep_config.hydra.sweep.subdir = subdir
                sweep_config.hydra.runtime.output_dir = str(out_dir)
            record = CellRecord(
                hash=h,
                overrides=[str(o) for o in overrides],
                subdir=subdir,
                job_num=job_num,
                concurrent_cells=int(launcher.options.max_concurrent_trials),
                upstream=upstream_label(task_cfg),
            )
            kept = prev is not None and index.is_done(h)
            if prev is not None:
                record.runs = prev.runs
                if kept:
                    for name in _KEPT_FIELDS:
                        setattr(record, name, getattr(prev, name))
            cells.append(
                Cell(record, sweep_config, task_cfg, out_dir, is_rlperf_config(task_cfg), kept=kept)
            )
    finally:
        HydraConfig.instance().cfg = previous_hydra
    return cells


#: What a kept cell's record carries over from the run that completed it.
_KEPT_FIELDS = (
    "status",
    "wall_s",
    "started_at",
    "finished_at",
    "return_value",
    "trial_entered_at",
    "request",
    "concurrent_cells",
    "group",
    "ray_address",
)


def _folder_owned_by_other(sweep_dir: Path, index: SweepIndex, subdir: str, h: str) -> bool:
    """Whether ``subdir`` already holds another cell (per the index or its cell.json)."""
    owner = index.subdir_owner(subdir)
    if owner is not None and owner != h:
        return True
    try:
        data = json.loads((sweep_dir / subdir / CELL_FILE).read_text())
        return bool(data.get("hash") != h)
    except (OSError, ValueError):
        return False


# --------------------------------------------------------------------- pre-flight


def _preflight(sweep: _Sweep, existing: bool) -> list[Group]:
    """Validate, take each cell's request, skip what can never run locally, group the rest.

    ``existing``: the cells run on a Ray that is already there; the settings it
    cannot honour (affinity, CPU count, named GPUs) are an error before anything
    runs, and every cell goes into one group.
    """
    from rlperf.config.validate import validate_config

    overcommit = bool(sweep.ray_cfg.overcommit_cpus)
    machine = detect_machine()
    by_start: dict[RayStart, list[Cell]] = {}
    axis_errors: list[str] = []
    for cell in sweep.cells:
        if cell.kept:
            continue
        rec = cell.record
        # Checked before validation, which would call the same cell merely invalid.
        reason = _cluster_axis_reason(cell) if existing else None
        if reason is not None:
            axis_errors.append(f"  #{rec.job_num} {' '.join(rec.overrides)}: {reason}")
            continue
        try:
            if cell.rlperf:
                validate_config(cell.task_cfg)
            cell.request = cell_request(cell.task_cfg)
        except Exception as exc:
            cell.error = exc
            rec.status, rec.reason = RunStatus.invalid, f"{type(exc).__name__}: {exc}"
            continue
        rec.request = cell.request.bundles
        if existing:
            by_start.setdefault(RayStart(), []).append(cell)
            continue
        reason = local_infeasibility(cell.request, machine, overcommit)
        if reason is not None:
            rec.status, rec.reason = "skipped", reason
            continue
        by_start.setdefault(cell.request.ray_start, []).append(cell)
    if axis_errors:
        raise SweepError(
            "these cells need Ray started in a way an existing cluster cannot honour "
            "(nothing was run):\n" + "\n".join(axis_errors)
        )
    groups = []
    for start, cells in by_start.items():
        capacity = None
        if not existing:
            requests = [c.request for c in cells if c.request is not None]
            capacity = local_capacity(start, requests, machine, overcommit)
        groups.append(Group(-1, start, cells, capacity))
    return groups


def _cluster_axis_reason(cell: Cell) -> str | None:
    """Why an existing cluster cannot run ``cell`` as configured (affinity, named GPUs)."""
    if not cell.rlperf:
        return None
    try:
        plan = plan_resources(cell.task_cfg)
    except Exception:  # an invalid config: validation reports it
        return None
    return cluster_axis_error(ray_start_of(plan))


def _cluster_preflight(sweep: _Sweep, groups: list[Group]) -> None:
    """On an existing cluster: skip cells whose request exceeds the cluster's resources."""
    total, nodes = cluster_capacity()
    for group in groups:
        group.capacity = {k: v for k, v in total.items() if k in ("CPU", "GPU")}
        keep = []
        for cell in group.cells:
            assert cell.request is not None
            reason = shortfall(cell.request.bundles, total, nodes)
            if reason is None:
                keep.append(cell)
            else:
                cell.record.status, cell.record.reason = "skipped", f"{reason} (Ray cluster)"
        group.cells = keep


def _register_groups(sweep: _Sweep, groups: list[Group]) -> None:
    """Give each group an id in sweep.json ("groups" grows over resumed runs)."""
    for group in groups:
        if not group.cells:
            continue
        group.gid = len(sweep.index.groups)
        sweep.index.groups.append(
            {
                "started_at": None,
                "ray_start": group.start.to_json(),
                "describe": group.start.describe(),
                "address": sweep.ray_cfg.address,
                "capacity": group.capacity,
                "cells": [c.record.hash for c in group.cells],
                "ray_start_s": None,
            }
        )
        for cell in group.cells:
            cell.record.group = group.gid


def _strict_check(sweep: _Sweep) -> None:
    if not sweep.options.strict:
        return
    skipped = [c for c in sweep.cells if c.record.status == "skipped" and not c.kept]
    if skipped:
        lines = [
            f"  #{c.record.job_num} {' '.join(c.record.overrides)}: {c.record.reason}"
            for c in skipped
        ]
        raise SweepError(
            "hydra.launcher.strict=true and these cells cannot run here (nothing was run):\n"
            + "\n".join(lines)
        )


def _record_not_run(sweep: _Sweep) -> None:
    """Write every cell's record; give the cells that will not run their folder.

    A skipped or invalid cell still gets what a run would leave for it to be
    found by: the ``.hydra/`` snapshot, ``summary.json`` (status and reason) and
    ``cell.json``. Cells to run are recorded ``pending`` until their trial starts.
    """
    for cell in sweep.cells:
        if cell.kept:
            continue
        rec = cell.record
        if rec.status in REFUSED_STATUSES:
            cell.out_dir.mkdir(parents=True, exist_ok=True)
            _write_hydra_snapshot(cell)
            rec.finished_at = now_iso()
            if cell.rlperf:
                # A fresh summary: an earlier run's files in this folder are not this outcome.
                write_refused_summary(cell.out_dir, cell.task_cfg, rec.status, str(rec.reason))
        else:
            rec.status, rec.reason = RunStatus.pending, None
        sweep.save(cell)


def _write_hydra_snapshot(cell: Cell) -> None:
    write_hydra_snapshot(cell.sweep_config, cell.task_cfg, cell.out_dir)


def write_hydra_snapshot(sweep_config: DictConfig, task_cfg: DictConfig, out_dir: Path) -> None:
    """What Hydra's run_job writes before a job starts (for cells that never start)."""
    if sweep_config.hydra.output_subdir is None:
        return
    out = out_dir / str(sweep_config.hydra.output_subdir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(OmegaConf.to_yaml(task_cfg))
    hydra_node = OmegaConf.masked_copy(sweep_config, "hydra")
    (out / "hydra.yaml").write_text(OmegaConf.to_yaml(hydra_node))
    (out / "overrides.yaml").write_text(OmegaConf.to_yaml(sweep_config.hydra.overrides.task))


def _announce(sweep: _Sweep, groups: list[Group], existing: bool) -> None:
    recs = sweep.records
    kept = sum(1 for c in sweep.cells if c.kept)
    skipped = sum(1 for r in recs if r.status == "skipped")
    invalid = sum(1 for r in recs if r.status == RunStatus.invalid)
    to_run = sum(len(g.cells) for g in groups)
    where = (
        f"on the Ray cluster at {sweep.ray_cfg.address or '(already connected)'}"
        if existing
        else f"in {sum(1 for g in groups if g.cells)} local Ray instance(s)"
    )
    concurrency = int(sweep.options.max_concurrent_trials)
    sweep.progress.say(
        f"{len(recs)} cells in {sweep.sweep_dir}: {to_run} to run {where}, "
        f"{kept} completed earlier (kept), {skipped} skipped, {invalid} invalid; "
        f"max_concurrent_trials={concurrency}"
        + ("" if concurrency == 1 else " (cells share the machine: measurements not isolated)")
    )
    for c in sweep.cells:
        if c.record.status in REFUSED_STATUSES and not c.kept:
            sweep.progress.emit(c.record.status, c.record, recs)


# ------------------------------------------------------------------ running groups


def _run_group(sweep: _Sweep, group: Group, existing: bool) -> None:
    """One Tune experiment over the group's cells, in a Ray started for it (or the cluster)."""
    opts = sweep.options
    gcells = group.cells
    info = sweep.index.groups[group.gid]
    info["started_at"] = now_iso()
    ray_cm = contextlib.nullcontext(0.0) if existing else _local_ray(sweep, group)
    with ray_cm as ray_start_s:
        info["ray_start_s"] = ray_start_s
        sweep.index.save()
        if not existing:
            sweep.progress.say(
                f"group {group.gid}: Ray started in {ray_start_s:.1f} s with "
                f"{group.start.describe()} for {len(gcells)} cell(s)"
            )
        payload = {
            "cells": {c.record.hash: c.sweep_config for c in gcells},
            "task_function": sweep.launcher.task_function,
            "hydra_context": sweep.launcher.hydra_context,
            "singletons": Singleton.get_state(),
        }
        pgfs = {
            c.record.hash: tune.PlacementGroupFactory(
                c.request.bundles, strategy=c.request.strategy
            )
            for c in gcells
            if c.request is not None
        }
        trainable = tune.with_resources(
            tune.with_parameters(_trial_main, payload=payload),
            resources=lambda config: pgfs[config["cell"]],
        )
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        tuner = tune.Tuner(
            trainable,
            param_space={"cell": tune.grid_search([c.record.hash for c in gcells])},
            tune_config=tune.TuneConfig(
                num_samples=1,
                max_concurrent_trials=int(opts.max_concurrent_trials),
                reuse_actors=False,
            ),
            run_config=tune.RunConfig(
                name=f"group{group.gid}-{stamp}",
                storage_path=str(sweep.sweep_dir / TUNE_DIR),
                failure_config=tune.FailureConfig(max_failures=int(opts.max_failures)),
                verbose=0,
                callbacks=[_SweepCallback(sweep)],
            ),
        )
        with _tune_environment():
            tuner.fit()
        if any(c.record.status in ("pending", "running") for c in gcells):
            # Tune ends early only when stopped (its SIGINT handler: Ctrl-C).
            raise KeyboardInterrupt


@contextlib.contextmanager
def _local_ray(sweep: _Sweep, group: Group) -> Iterator[float]:
    """A local Ray for one group: GPUs and affinity applied to this process first, then ray.init.

    Ray's raylet and every worker it forks inherit ``CUDA_VISIBLE_DEVICES`` and
    the affinity mask of the process that starts it; both are restored after
    Ray is shut down. Yields the seconds ``ray.init`` took.
    """
    from rlperf.resources.ray_session import applied_placement

    plan = next((c.request.plan for c in group.cells if c.request and c.request.plan), None)
    assert group.capacity is not None
    placement = applied_placement(plan) if plan is not None else contextlib.nullcontext()
    with placement:
        seconds = init_ray(
            sweep.ray_cfg, int(group.capacity["CPU"]), int(group.capacity.get("GPU", 0))
        )
        try:
            yield seconds
        finally:
            ray.shutdown()


#: Environment for Tune while a group runs: no Tune result loggers (rlperf writes its
#: own per-cell files; Tune's progress.csv freezes its header at the first result),
#: and Tune's legacy output engine, which prints nothing at verbose=0 (the launcher
#: prints its own progress).
_TUNE_ENV = {
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
    "RAY_AIR_NEW_OUTPUT": "0",
    # A search's summary-only objective (time_to_target_s) is in a trial's last result
    # only, which Tune's check that every result has the searcher's metric would refuse.
    "TUNE_DISABLE_STRICT_METRIC_CHECKING": "1",
}


@contextlib.contextmanager
def _tune_environment() -> Iterator[None]:
    """:data:`_TUNE_ENV` set, Tune's analysis warnings quiet, our SIGINT handler back after.

    Tune installs a SIGINT handler (graceful stop on the first Ctrl-C) and never
    removes it, so a Ctrl-C after the experiment would otherwise be swallowed.
    """
    saved_env = {k: os.environ.get(k) for k in _TUNE_ENV}
    os.environ.update(_TUNE_ENV)
    saved_handler = signal.getsignal(signal.SIGINT)
    # Without Tune's loggers its ExperimentAnalysis warns that it found no result files.
    analysis_log = logging.getLogger("ray.tune.analysis.experiment_analysis")
    saved_level = analysis_log.level
    analysis_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        analysis_log.setLevel(saved_level)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        with contextlib.suppress(ValueError, TypeError):  # not the main thread
            signal.signal(signal.SIGINT, saved_handler)


class _SweepCallback(tune.Callback):
    """Cell events from Tune's controller (runs in the launcher process)."""

    def __init__(self, sweep: _Sweep) -> None:
        self.sweep = sweep

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its callbacks into the experiment folder for Tuner.restore,
        # which this launcher never uses (it resumes from sweep.json); the live
        # object stays in this process.
        return {}

    def _cell(self, trial: Any) -> Cell:
        return self.sweep.by_hash[trial.config["cell"]]

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        cell = self._cell(trial)
        rec = cell.record
        rec.status, rec.reason = "running", None
        rec.runs += 1
        rec.started_at, rec.finished_at, rec.wall_s = now_iso(), None, None
        cell.t0 = time.monotonic()
        self.sweep.save(cell)
        self.sweep.progress.emit("started", rec, self.sweep.records)

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        cell = self._cell(trial)
        if result.get(RESULT_STEP):
            done, total, text = result[RESULT_STEP]
            self.sweep.progress.cell_step(cell.record, int(done), int(total), str(text))
        if result.get(RESULT_RETURN):
            cell.job_blob = str(result[RESULT_RETURN])
        if result.get(RESULT_ENTERED):
            cell.record.trial_entered_at = float(result[RESULT_ENTERED])
        if result.get(RESULT_ADDRESS):
            cell.record.ray_address = str(result[RESULT_ADDRESS])

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        cell = self._cell(trial)
        status = summary_status(cell.out_dir) if cell.rlperf else "completed"
        reason = None
        if status == "skipped":
            reason = read_summary(cell.out_dir).get("error")
        elif status != "completed":
            # The task function returned without rlperf's summary (a foreign task function).
            status = "completed"
        self._finish(cell, status, reason)

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        cell = self._cell(trial)
        cell.record.reason = _first_line(_trial_error(trial))
        self.sweep.progress.emit("retrying", cell.record, self.sweep.records)

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        cell = self._cell(trial)
        summary = read_summary(cell.out_dir) if cell.rlperf else {}
        # The job found an input wrong (a checkpoint, a model file): invalid, not failed.
        status = RunStatus.invalid if summary.get("status") == RunStatus.invalid else "failed"
        self._finish(cell, status, summary.get("error") or _first_line(_trial_error(trial)))

    def _finish(self, cell: Cell, status: str, reason: str | None) -> None:
        rec = cell.record
        rec.status, rec.reason = status, reason
        rec.finished_at = now_iso()
        if cell.t0 is not None:
            rec.wall_s = time.monotonic() - cell.t0
            self.sweep.progress.walls.append(rec.wall_s)
        if cell.job_blob is not None and status != "failed":
            with contextlib.suppress(Exception):
                rec.return_value = jsonable_return(_loads_return(cell.job_blob).return_value)
        self.sweep.save(cell)
        self.sweep.progress.emit(status, rec, self.sweep.records)


def _trial_error(trial: Any) -> str:
    for getter in ("get_error",):
        with contextlib.suppress(Exception):
            err = getattr(trial, getter)()
            if err is not None:
                return str(err)
    return "the trial failed (see the cell's folder and .tune/)"


def _first_line(text: str | None) -> str | None:
    if not text:
        return text
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    # Ray's error text starts with boilerplate; the cause is in its last line.
    return lines[-1].strip() if lines else None


def _mark_interrupted(sweep: _Sweep) -> None:
    """Cells whose trial was running when the sweep stopped: status interrupted."""
    for cell in sweep.cells:
        rec = cell.record
        if rec.status != "running":
            continue
        rec.status, rec.reason = "interrupted", "interrupted (Ctrl-C)"
        rec.finished_at = now_iso()
        if cell.t0 is not None:
            rec.wall_s = time.monotonic() - cell.t0
        if cell.rlperf:
            mark_summary(cell.out_dir, "interrupted", rec.reason)
        sweep.save(cell)
        sweep.progress.emit("interrupted", rec, sweep.records)
    sweep.index.save()


# ------------------------------------------------------------------ job returns


def _job_return(cell: Cell) -> JobReturn:
    """The JobReturn Hydra expects for ``cell`` (the trial's own where it sent one)."""
    rec = cell.record
    if cell.job_blob is not None and rec.status in ("completed", "skipped"):
        with contextlib.suppress(Exception):
            return _loads_return(cell.job_blob)
    hydra_cfg = OmegaConf.masked_copy(cell.sweep_config, "hydra")
    ret = JobReturn(
        overrides=list(rec.overrides),
        cfg=cell.task_cfg,
        hydra_cfg=hydra_cfg,
        working_dir=os.getcwd(),
        task_name=JobRuntime.instance().get("name"),
    )
    if rec.status in ("completed", "skipped"):
        ret.status, ret.return_value = JobStatus.COMPLETED, rec.return_value
    else:
        where = cell.out_dir / SUMMARY_FILE if cell.rlperf else cell.out_dir
        error = cell.error or CellFailed(
            f"cell #{rec.job_num} ({' '.join(rec.overrides)}) {rec.status}: {rec.reason} "
            f"(see {where})"
        )
        ret.status, ret.return_value = JobStatus.FAILED, error
    return ret


def _dumps_return(ret: JobReturn) -> str:
    return base64.b64encode(cloudpickle.dumps(ret)).decode()


def _loads_return(blob: str) -> JobReturn:
    ret = cloudpickle.loads(base64.b64decode(blob))
    assert isinstance(ret, JobReturn)
    return ret


# ------------------------------------------------------------------ in the trial


def _trial_main(config: dict[str, Any], payload: dict[str, Any]) -> None:
    """Body of every trial: Hydra's per-job setup, then the task function, in the cell's folder.

    Runs in a Ray worker process inside the trial's placement group; Tune
    creates that actor with ``placement_group_capture_child_tasks=True``, so the
    env runners and learners RLlib starts from here land in the same group and
    Tune's accounting is what runs.
    """
    entered = enter_trial(payload)
    run_trial_job(payload["cells"][config["cell"]], payload, entered)


def enter_trial(payload: dict[str, Any]) -> float:
    """What a trial process needs before it loads or runs a cell (Hydra's singletons)."""
    entered = time.time()
    os.environ[IN_TRIAL_ENV] = "1"
    Singleton.set_state(payload["singletons"])
    setup_globals()
    return entered


def run_trial_job(
    sweep_config: DictConfig,
    payload: dict[str, Any],
    entered: float,
    final: Callable[[Path], dict[str, Any]] | None = None,
) -> None:
    """Hydra's ``run_job`` of one cell in this trial; every step's row goes to Tune.

    ``final``: more keys of the trial's last result, from the cell's folder (a
    search's objective).
    """
    # Tune changes into its trial folder; the job sees the launcher's working directory
    # (relative paths in a config mean the same as in a single run).
    cwd = str(sweep_config.hydra.runtime.cwd)
    if os.path.isdir(cwd):
        os.chdir(cwd)
    reporter = _StepReporter()
    STEP_SINKS.append(reporter)
    try:
        ret = run_job(
            hydra_context=payload["hydra_context"],
            task_function=payload["task_function"],
            config=sweep_config,
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )
    finally:
        STEP_SINKS.remove(reporter)
    ok = ret.status == JobStatus.COMPLETED
    out_dir = Path(str(sweep_config.hydra.runtime.output_dir))
    blob = None
    if ok:
        try:
            blob = _dumps_return(ret)
        except Exception:  # an unpicklable return value: the launcher builds the JobReturn
            blob = None
    else:
        _record_failure(out_dir, ret.cfg, ret._return_value)
    tune.report(
        {
            **(final(out_dir) if final is not None else {}),
            RESULT_STATUS: ret.status.name,
            RESULT_RETURN: blob,
            RESULT_ENTERED: entered,
            RESULT_ADDRESS: ray.get_runtime_context().gcs_address,
        }
    )
    if not ok:
        exc = ret._return_value
        raise CellFailed(f"{type(exc).__name__}: {exc}") from None


class _StepReporter:
    """A step of the trial's job to Tune: its progress, and its row's numbers (an
    intermediate result the launcher's display and a search's scheduler read)."""

    def __init__(self) -> None:
        self.env_steps = 0

    def __call__(self, done: int, total: int, info: str, row: Mapping[str, Any] | None) -> None:
        numbers = {
            k: float(v)
            for k, v in (row or {}).items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        }
        if "env_steps" in numbers:
            self.env_steps += int(numbers["env_steps"])
            numbers[ENV_STEPS_TOTAL] = self.env_steps
        try:
            tune.report({**numbers, RESULT_STEP: [done, total, info]})
        except SystemExit as exc:  # Tune stopped the trial (a search's scheduler)
            raise TrialStopped(exc.code) from None


def _record_failure(out_dir: Path, cfg: Any, exc: BaseException) -> None:
    """Make sure a failed rlperf cell's summary.json says failed, with the traceback.

    rlperf's job wrapper writes it for failures inside the job; this covers the
    rest (e.g. an error before the wrapper started).
    """
    if cfg is None or not is_rlperf_config(cfg):
        return
    summary = read_summary(out_dir)
    if summary.get("status") in ("failed", RunStatus.invalid) and summary.get("traceback"):
        return
    summary.setdefault("stage", str(cfg.get("stage")))
    summary.update(
        status="failed",
        error=f"{type(exc).__name__}: {exc}",
        traceback="".join(traceback.format_exception(exc)),
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / SUMMARY_FILE, summary)
