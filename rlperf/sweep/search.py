"""A search: one Tune run, one searcher, one scheduler (``-m`` with
``hydra.sweeper.search.algorithm`` set; docs/search.md).

Built on the sweep's pieces: every trial runs the same trial body as a sweep's
cell (Hydra's ``run_job`` in the cell's folder, rows reported to Tune each
iteration), is recorded in ``sweep.json`` and its folder's ``cell.json``, and is
pre-flighted like a sweep's cell. What differs:

1. the cells are not known up front: the searcher proposes each trial's
   parameters (:mod:`rlperf.sweep.search_trial`);
2. a scheduler may stop a trial after any iteration (:mod:`rlperf.sweep.searchers`);
   the trial's folder is then marked ``stopped_early`` with the scheduler's reason
   (the rows it wrote stay);
3. the search resumes from its folder with Tune's own experiment state
   (``Tuner.restore``: finished trials kept, the searcher's state restored);
4. ``search.json`` and the best trial's preset are written at the end
   (:mod:`rlperf.sweep.search_results`).

The ``rlperf`` sweeper plugin (hydra_plugins/rlperf_sweeper) is a thin shell over
:func:`run_search`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn
from omegaconf import DictConfig, OmegaConf
from ray import tune

from rlperf.console import TERMINAL
from rlperf.console.deprecations import watching
from rlperf.errors import ExitCode, SearchSpaceError, SweepIncomplete
from rlperf.layout import MULTIRUN_FILE, SEARCH_FILE
from rlperf.resources.node_watch import NodeLost, watch_node
from rlperf.resources.plan import detect_machine
from rlperf.resources.ray_session import init_ray, joined_address
from rlperf.results.record import read_record
from rlperf.results.storage import parse_storage
from rlperf.sweep.callback import SweepCallback, mark_running
from rlperf.sweep.cells import cell_hash
from rlperf.sweep.groups import tune_environment, tune_run_config
from rlperf.sweep.index import CellRecord, SweepIndex, mark_summary, write_cell_file
from rlperf.sweep.lifecycle import run_lifecycle
from rlperf.sweep.prepare import task_config
from rlperf.sweep.progress import SweepProgress, format_table
from rlperf.sweep.resources import (
    Bundle,
    CellRequest,
    RayStart,
    cell_request,
    cluster_capacity,
    cluster_infeasibility,
    local_capacity,
    local_infeasibility,
)
from rlperf.sweep.search_results import best_trial, trial_score, write_search_file
from rlperf.sweep.search_trial import (
    SearchPayload,
    search_trial,
    trial_config,
    trial_job_num,
    trial_resources,
)
from rlperf.sweep.searchers import ACTIVE, scheduler, scheduler_metric, searcher
from rlperf.sweep.space import SearchSpace, tune_space
from rlperf.sweep.state import (
    TUNE_DIR,
    Cell,
    Sweep,
    SweepSetup,
    fetch_finished,
    publish_index,
    ray_options,
    sweep_session,
)
from rlperf.validation.validate import validate_config
from rlperf.vocabulary import FINAL_STATUSES, OPEN_STATUSES, REFUSED_STATUSES, RunStatus

log = logging.getLogger(__name__)

#: Tune's experiment folder of a search (under the launcher's ``.tune``): fixed, so
#: that the same command resumes it.
EXPERIMENT = "search"


@dataclass
class Search(Sweep):
    """A search's state in the driver: the sweep's, plus the space, options and trials."""

    space: SearchSpace = field(default_factory=SearchSpace)
    opts: DictConfig = field(default_factory=lambda: OmegaConf.create({}))
    start: RayStart = field(default_factory=RayStart)
    cluster: tuple[Bundle, list[Bundle]] | None = None  # an existing cluster's resources
    trials: dict[str, dict[str, Any]] = field(default_factory=dict)  # by trial id
    stop_reasons: dict[str, str] = field(default_factory=dict)  # by trial id

    def save(self, cell: Cell | None = None) -> None:
        if cell is not None:
            # Keyed by folder: two trials may propose the same configuration.
            self.index.cells[cell.record.subdir] = cell.record
            write_cell_file(cell.out_dir, cell.record)
            entry = self.trials.get(cell.record.subdir.removeprefix("trial_"))
            if entry is not None:
                entry.update(status=cell.record.status, reason=cell.record.reason)
                entry["score"] = trial_score(cell.out_dir, str(self.opts.metric))
        self.index.save()
        write_search_file(self.sweep_dir, self.header(), list(self.trials.values()))

    def header(self) -> dict[str, Any]:
        """``search.json`` apart from its trials: the options and the space."""
        return {
            **OmegaConf.to_container(self.opts, resolve=True),  # type: ignore[dict-item]
            "fixed": list(self.space.fixed),
            "space": {a.key: a.describe() for a in self.space.axes},
            "scheduler_metric": scheduler_metric(self.opts)[0],
        }


def run_search(setup: SweepSetup, space: SearchSpace, opts: DictConfig) -> list[JobReturn]:
    """Run the search; returns no JobReturns (Hydra ignores a sweeper's return value).

    Raises :class:`~rlperf.errors.SweepIncomplete` (exit 1) after the final table
    when a trial failed; skipped and invalid proposals leave the exit status 0.
    """
    with sweep_session(setup) as (sweep_dir, console):
        OmegaConf.save(setup.config, sweep_dir / MULTIRUN_FILE)
        search = _new_search(setup, space, opts, sweep_dir, console)
        ACTIVE.append(search)
        try:
            with watching():
                run_lifecycle(search, SearchStrategy(search))
        finally:
            ACTIVE.remove(search)
        failed = sum(1 for c in search.cells if c.record.status == RunStatus.failed)
        if failed:
            message = (
                f"search of {len(search.cells)} trials: {failed} failed (reasons in the table "
                f"above; each trial's summary.json has its error); search.json holds the rest"
            )
            log.error("%s", message, extra={TERMINAL: False})
            raise SweepIncomplete(message, ExitCode.failed)
    return []


def _new_search(
    setup: SweepSetup,
    space: SearchSpace,
    opts: DictConfig,
    sweep_dir: Path,
    console: Any,
) -> Search:
    index = SweepIndex.load(sweep_dir) if setup.options.resume else SweepIndex(sweep_dir)
    index.options = {
        **OmegaConf.to_container(setup.options, resolve=True),  # type: ignore[dict-item]
        "search": OmegaConf.to_container(opts, resolve=True),
    }
    progress = SweepProgress(int(opts.max_concurrent), console)
    search = Search(
        setup, sweep_dir, index, [], progress, ray_options(setup.config), space=space, opts=opts
    )
    search.storage = parse_storage(setup.options.get("storage"))
    if search.storage is not None:
        search.storage.check_writable()
        fetch_finished(index, search.storage)
    search.trials = _earlier_trials(sweep_dir) if setup.options.resume else {}
    for key, rec in index.cells.items():  # trials of an earlier run of this search
        cell = Cell(rec, OmegaConf.create(), OmegaConf.create(), sweep_dir / rec.subdir, True)
        cell.kept = rec.status in FINAL_STATUSES or rec.status in REFUSED_STATUSES
        search.cells.append(cell)
        search.by_hash[key.removeprefix("trial_")] = cell
    return search


def _earlier_trials(sweep_dir: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads((sweep_dir / SEARCH_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {str(t["trial_id"]): t for t in data.get("trials", [])}


class SearchStrategy:
    """A search's part of the lifecycle (:func:`rlperf.sweep.lifecycle.run_lifecycle`): the
    space's first point checked before Ray, one Ray for every trial, one Tune run (with
    ``ray.address``, proposals are checked against the cluster's resources);
    ``search.json`` and the table at the end."""

    kept, resumes = "finished trials", "resume the search"

    def __init__(self, search: Search) -> None:
        self.search = search
        self.machine = detect_machine()
        self.request: CellRequest | None = None

    def before_ray(self, existing: bool) -> None:
        self.request = _first_point(self.search)

    def stored(self) -> bool:
        return self.search.storage is not None

    def on_cluster(self) -> None:
        assert self.request is not None
        self.search.cluster = _cluster_preflight(self.request)

    def start_local(self) -> bool:
        assert self.request is not None
        search = self.search
        capacity = _local_preflight(search, self.request, self.machine)
        init_ray(search.ray_cfg, int(capacity["CPU"]), int(capacity.get("GPU", 0)))
        return True

    def run(self) -> None:
        search = self.search
        search.ray_address = joined_address(search.ray_cfg)
        try:
            _fit(search, self.machine)
        except NodeLost as lost:  # a searcher's state cannot move to a new Ray: resume it
            reason = f"{lost}; the same command resumes the search"
            mark_running(search, RunStatus.failed, reason)
            raise

    def close(self) -> None:
        pass  # the search's one Ray is the lifecycle's to stop

    def finish(self) -> None:
        _finish(self.search)


def _first_point(search: Search) -> CellRequest:
    """The space's first point must be a valid config (else exit 2, nothing run); its Ray
    start is the search's (every trial must share it)."""
    first = {a.key: a.values[0] if a.kind == "choice" else a.low for a in search.space.axes}
    setup, overrides = search.setup, search.space.overrides(first)
    sweep_config = trial_config(setup.config, setup.hydra_context, overrides, "preflight", -1)
    task_cfg = task_config(sweep_config)
    validate_config(task_cfg)
    request = cell_request(task_cfg)
    search.start = request.ray_start
    return request


def _local_preflight(search: Search, request: CellRequest, machine: Any) -> dict[str, float]:
    """The first point must fit a local Ray on this machine; that Ray's resources."""
    overcommit = bool(search.ray_cfg.overcommit_cpus)
    reason = local_infeasibility(request, machine, overcommit)
    if reason is not None:
        raise SearchSpaceError(f"the search's first point cannot run here: {reason}")
    return local_capacity(request.ray_start, [request], machine, overcommit)


def _cluster_preflight(request: CellRequest) -> tuple[Bundle, list[Bundle]]:
    """The first point must fit the cluster this process is connected to; its resources."""
    total, nodes = cluster_capacity()
    reason = cluster_infeasibility(request, total, nodes)
    if reason is not None:
        raise SearchSpaceError(f"the search's first point cannot run on the Ray cluster: {reason}")
    return total, nodes


def _fit(search: Search, machine: Any) -> None:
    """One Tune run (or its restore from the folder): the searcher proposes, trials run."""
    payload = SearchPayload(
        task_function=search.setup.task_function,
        hydra_context=search.setup.hydra_context,
        singletons=Singleton.get_state(),
        storage=search.storage is not None,
        config=search.setup.config,
        space=search.space,
        keys=[a.key for a in search.space.axes],
        start=search.start,
        overcommit=bool(search.ray_cfg.overcommit_cpus),
        cluster=search.cluster,
        metric=str(search.opts.metric),
    )
    cache: dict[str, tune.PlacementGroupFactory] = {}

    def resources(config: dict[str, Any]) -> tune.PlacementGroupFactory:
        params = {k: config[k] for k in payload.keys}
        key = json.dumps(params, sort_keys=True, default=str)
        if key not in cache:
            cache[key] = trial_resources(payload, params)
        return cache[key]

    trainable = tune.with_resources(
        tune.with_parameters(search_trial, payload=payload), resources=resources
    )
    path = (
        search.storage.uri_of(EXPERIMENT)
        if search.storage is not None
        else str(search.sweep_dir / TUNE_DIR / EXPERIMENT)
    )
    with tune_environment(SEARCH_TUNE_ENV):
        if search.options.resume and tune.Tuner.can_restore(path):
            shown = search.storage.describe(EXPERIMENT) if search.storage else path
            search.progress.say(f"resuming the search in {shown}")
            tuner = tune.Tuner.restore(path, trainable=trainable, resume_unfinished=True)
        else:
            tuner = _new_tuner(search, trainable)
        search.progress.say(_announcement(search))
        with watch_node("while the search ran"):
            tuner.fit()
    if any(c.record.status in OPEN_STATUSES for c in search.cells):
        raise KeyboardInterrupt  # Tune ends early only when stopped (its SIGINT handler)


#: Tune saves a search's experiment state (its trials, the searcher's state) at every step
#: of its loop instead of every 10 s or more: a SIGTERM or SIGHUP ends the search without
#: Tune's graceful stop (which waits for a Ray that a scheduler's signal may have killed),
#: and the resume then runs exactly the trials left. It costs the launcher about 3 % of a
#: core (benchmarks/bench_search_checkpoint.py).
SEARCH_TUNE_ENV = {"TUNE_GLOBAL_CHECKPOINT_S": "0"}


def _new_tuner(search: Search, trainable: Any) -> tune.Tuner:
    opts = search.opts
    return tune.Tuner(
        trainable,
        param_space=tune_space(search.space),
        tune_config=tune.TuneConfig(
            search_alg=searcher(opts),
            scheduler=scheduler(opts, search.setup.config),
            num_samples=int(opts.num_samples),
            max_concurrent_trials=int(opts.max_concurrent),
            reuse_actors=False,
            # In a storage, a trial's files are at <EXPERIMENT>/<its folder in the search>.
            trial_dirname_creator=lambda trial: f"trial_{trial.trial_id}",
        ),
        run_config=tune_run_config(search, EXPERIMENT, SearchCallback(search, EXPERIMENT)),
    )


def _announcement(search: Search) -> str:
    opts = search.opts
    sched = opts.scheduler
    metric, mode = scheduler_metric(opts)
    where = "" if sched.name == "none" else f" on {metric} ({mode}) per {sched.time_attr}"
    kept = sum(1 for c in search.cells if c.kept)
    return (
        f"search in {search.sweep_dir}: {opts.algorithm}, {opts.num_samples} trial(s), "
        f"{opts.max_concurrent} at a time; objective {opts.metric} ({opts.mode}); scheduler "
        f"{sched.name}{where}; space: "
        + "; ".join(f"{a.key} {a.describe()}" for a in search.space.axes)
        + (f"; {kept} trial(s) of an earlier run kept" if kept else "")
    )


class SearchCallback(SweepCallback):
    """The sweep's cell events, for trials the searcher proposes as it goes."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Tuner.restore unpickles the run's callbacks: bind to the search now running.
        self.sweep = ACTIVE[-1]

    def _cell(self, trial: Any) -> Cell:
        search = self.sweep
        assert isinstance(search, Search)
        cell = search.by_hash.get(trial.trial_id)
        if cell is None:
            cell = _new_trial_cell(search, trial)
        return cell

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        search = self.sweep
        assert isinstance(search, Search)
        reason = search.stop_reasons.get(trial.trial_id)
        cell = self._cell(trial)
        self._fetch(cell)
        if reason is None:
            self._complete(cell)
            return
        mark_summary(cell.out_dir, RunStatus.stopped_early, reason)
        self._finish(cell, RunStatus.stopped_early, reason)

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        cell = self._cell(trial)
        self._fetch(cell)
        job = read_record(cell.out_dir)
        if job is not None and job.preflight and job.status in REFUSED_STATUSES:
            self._finish(cell, str(job.status), job.error)
            return
        self._error(cell, trial)


def _new_trial_cell(search: Search, trial: Any) -> Cell:
    """The cell of a trial the searcher just proposed (its number: the order of starts)."""
    params = {a.key: trial.config[a.key] for a in search.space.axes}
    overrides = search.space.overrides(params)
    subdir = f"trial_{trial.trial_id}"
    setup = search.setup
    sweep_config = trial_config(
        setup.config, setup.hydra_context, overrides, subdir, trial_job_num(trial.trial_id)
    )
    task_cfg = task_config(sweep_config)
    record = CellRecord(
        hash=cell_hash(task_cfg),
        overrides=overrides,
        subdir=subdir,
        job_num=len(search.cells),
        concurrent_cells=int(search.opts.max_concurrent),
    )
    cell = Cell(record, sweep_config, task_cfg, search.sweep_dir / subdir, True)
    search.cells.append(cell)
    search.by_hash[trial.trial_id] = cell
    search.trials[trial.trial_id] = {
        "trial_id": trial.trial_id,
        "number": record.job_num,
        "subdir": subdir,
        "params": params,
        "status": RunStatus.pending,
        "reason": None,
        "score": None,
    }
    return cell


def _finish(search: Search) -> None:
    """After the run: stopped trials' folders say so (their process may have written after
    the callback), ``search.json``, the best trial, the final table."""
    for trial_id, reason in search.stop_reasons.items():
        cell = search.by_hash.get(trial_id)
        if cell is not None and cell.record.status == RunStatus.stopped_early:
            mark_summary(cell.out_dir, RunStatus.stopped_early, reason)
    search.save()
    if search.storage is not None:
        publish_index(search)
    best = best_trial(list(search.trials.values()), str(search.opts.mode))
    if search.cells:
        search.progress.say("trials:\n" + format_table(search.records))
    if best is None:
        search.progress.say(f"no completed trial has a value of {search.opts.metric}")
    else:
        search.progress.say(
            f"best: {best['subdir']} {search.opts.metric}={best['score']:.6g} with "
            + " ".join(f"{k}={v}" for k, v in best["params"].items())
            + f"; re-run: rlperf experiment={search.sweep_dir / 'experiment' / 'search_best.yaml'}"
        )
