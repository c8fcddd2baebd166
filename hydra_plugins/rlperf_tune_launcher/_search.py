"""The work of the ``rlperf_search`` sweeper: one Tune run, one searcher, one scheduler.

Imported inside the sweeper's ``sweep()`` (Ray, Tune). Built on the launcher's
pieces (``_core``): every trial runs the same trial body as a sweep's cell
(Hydra's ``run_job`` in the cell's folder, rows reported to Tune each
iteration), is recorded in ``sweep.json`` and its folder's ``cell.json``, and is
pre-flighted like a sweep's cell. What differs:

1. the cells are not known up front: the searcher proposes each trial's
   parameters; the trial loads its config from them (fixed overrides + values);
2. a scheduler may stop a trial after any iteration; the trial's folder is then
   marked ``stopped_early`` with the scheduler's reason (the rows it wrote stay);
3. the search resumes from its folder with Tune's own experiment state
   (``Tuner.restore``: finished trials kept, the searcher's state restored);
4. ``search.json`` and the best trial's preset are written at the end
   (:mod:`rlperf.sweep.search_results`). See docs/search.md.
"""

from __future__ import annotations

import copy
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, setup_globals
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from ray import tune
from ray.tune.schedulers import AsyncHyperBandScheduler, MedianStoppingRule, TrialScheduler

from rlperf.console import TERMINAL, terminal_session
from rlperf.console.deprecations import watching
from rlperf.errors import ExitCode, SweepIncomplete
from rlperf.job import write_refused_summary
from rlperf.resources.plan import detect_machine
from rlperf.resources.ray_session import init_ray
from rlperf.runs import FINAL_STATUSES, REFUSED_STATUSES, RunStatus
from rlperf.sweep.cells import cell_hash
from rlperf.sweep.index import CellRecord, SweepIndex, mark_summary, read_summary
from rlperf.sweep.progress import SweepProgress
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
from rlperf.sweep.search_results import (
    PROXY_METRIC,
    PROXY_MODE,
    SEARCH_FILE,
    best_trial,
    per_iteration,
    trial_score,
    write_search_file,
)
from rlperf.sweep.space import SearchSpace, SearchSpaceError

from . import _core

if TYPE_CHECKING:
    from hydra_plugins.rlperf_tune_launcher.launcher import RlperfTuneLauncher

log = logging.getLogger(__name__)

#: Tune's experiment folder of a search (under the launcher's ``.tune``): fixed, so
#: that the same command resumes it.
EXPERIMENT = "search"


class TrialRefused(RuntimeError):
    """The searcher proposed a trial the pre-flight refuses (status skipped or invalid)."""


@dataclass
class _Search(_core._Sweep):
    """A search's state in the driver: the sweep's, plus the space, options and trials."""

    space: SearchSpace = field(default_factory=SearchSpace)
    opts: DictConfig = field(default_factory=lambda: OmegaConf.create({}))
    start: RayStart = field(default_factory=RayStart)
    cluster: tuple[Bundle, list[Bundle]] | None = None  # an existing cluster's resources
    trials: dict[str, dict[str, Any]] = field(default_factory=dict)  # by trial id
    stop_reasons: dict[str, str] = field(default_factory=dict)  # by trial id

    def save(self, cell: _core.Cell | None = None) -> None:
        if cell is not None:
            # Keyed by folder: two trials may propose the same configuration.
            self.index.cells[cell.record.subdir] = cell.record
            _core.write_cell_file(cell.out_dir, cell.record)
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


#: The search running in this process: Tune's callback and scheduler, unpickled by
#: ``Tuner.restore``, find it here.
_ACTIVE: list[_Search] = []


def scheduler_metric(opts: DictConfig) -> tuple[str, str]:
    """The per-iteration metric and mode the scheduler compares (docs/search.md)."""
    sched = opts.scheduler
    if sched.metric is not None:
        return str(sched.metric), str(sched.mode or opts.mode)
    if per_iteration(str(opts.metric)):
        return str(opts.metric), str(opts.mode)
    return PROXY_METRIC, PROXY_MODE


# ----------------------------------------------------------------------- run


def run_search(
    launcher: RlperfTuneLauncher, space: SearchSpace, opts: DictConfig
) -> list[JobReturn]:
    """Run the search; returns no JobReturns (Hydra ignores a sweeper's return value).

    Raises :class:`~rlperf.errors.SweepIncomplete` (exit 1) after the final table
    when a trial failed; skipped and invalid proposals leave the exit status 0.
    """
    setup_globals()
    assert launcher.config is not None
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    _core._check_options(launcher.options)
    sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(config, sweep_dir / "multirun.yaml")
    verbosity = str(OmegaConf.select(config, "verbosity", default="normal"))
    with terminal_session(verbosity, sweep_dir / _core.SWEEP_LOG) as console:
        search = _new_search(launcher, space, opts, sweep_dir, console)
        _ACTIVE.append(search)
        try:
            with watching():
                _run(search)
        finally:
            _ACTIVE.remove(search)
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
    launcher: RlperfTuneLauncher,
    space: SearchSpace,
    opts: DictConfig,
    sweep_dir: Path,
    console: Any,
) -> _Search:
    index = SweepIndex.load(sweep_dir) if launcher.options.resume else SweepIndex(sweep_dir)
    index.options = {
        **OmegaConf.to_container(launcher.options, resolve=True),  # type: ignore[dict-item]
        "search": OmegaConf.to_container(opts, resolve=True),
    }
    progress = SweepProgress(int(opts.max_concurrent), console)
    assert launcher.config is not None
    search = _Search(
        launcher, sweep_dir, index, [], progress, launcher.options,
        _core._ray_options(launcher.config), space=space, opts=opts,
    )  # fmt: skip
    search.trials = _earlier_trials(sweep_dir) if launcher.options.resume else {}
    for key, rec in index.cells.items():  # trials of an earlier run of this search
        cell = _core.Cell(rec, OmegaConf.create(), OmegaConf.create(), sweep_dir / rec.subdir, True)
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


def _run(search: _Search) -> None:
    """Pre-flight of the space, Ray, one Tune run; search.json and the table in any case.

    With ``ray.address`` (or a Ray this process already runs) the search joins that
    cluster, never starts or stops it, and proposals are checked against its resources.
    """
    existing = search.ray_cfg.address is not None or ray.is_initialized()
    machine = detect_machine()
    request = _first_point(search)
    joined = False
    try:
        if existing:
            if not ray.is_initialized():
                log.info("joining the Ray cluster at %s", search.ray_cfg.address)
                init_ray(search.ray_cfg)
                joined = True
            search.cluster = _cluster_preflight(request)
        else:
            capacity = _local_preflight(search, request, machine)
            init_ray(search.ray_cfg, int(capacity["CPU"]), int(capacity.get("GPU", 0)))
            joined = True
        _fit(search, machine)
    except KeyboardInterrupt:
        _core._mark_interrupted(search)
        search.progress.say(
            "interrupted (Ctrl-C): finished trials are kept; run the same command with "
            f"hydra.sweep.dir={search.sweep_dir} to resume the search"
        )
        raise
    finally:
        if joined:
            ray.shutdown()
        _finish(search)


def _first_point(search: _Search) -> CellRequest:
    """The space's first point must be a valid config (else exit 2, nothing run); its Ray
    start is the search's (every trial must share it)."""
    first = {a.key: a.values[0] if a.kind == "choice" else a.low for a in search.space.axes}
    sweep_config = trial_config(search.launcher, search.space.overrides(first), "preflight", -1)
    task_cfg = task_config(sweep_config)
    from rlperf.config.validate import validate_config

    validate_config(task_cfg)
    request = cell_request(task_cfg)
    search.start = request.ray_start
    return request


def _local_preflight(search: _Search, request: CellRequest, machine: Any) -> dict[str, float]:
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


def trial_config(launcher: Any, overrides: list[str], subdir: str, job_num: int) -> DictConfig:
    """The sweep config of one trial (Hydra's config loader), its folder frozen in it."""
    config = launcher.config
    loader = launcher.hydra_context.config_loader
    previous = HydraConfig.instance().cfg
    try:
        sweep_config = loader.load_sweep_config(config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = job_num
            sweep_config.hydra.job.num = job_num
        sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
        with read_write(sweep_config.hydra), open_dict(sweep_config.hydra):
            sweep_config.hydra.sweep.dir = str(sweep_dir)
            sweep_config.hydra.sweep.subdir = subdir
            sweep_config.hydra.runtime.output_dir = str(sweep_dir / subdir)
    finally:
        HydraConfig.instance().cfg = previous
    return sweep_config


def task_config(sweep_config: DictConfig) -> DictConfig:
    task_cfg = copy.deepcopy(sweep_config)
    with read_write(task_cfg), open_dict(task_cfg):
        del task_cfg["hydra"]
    return task_cfg


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
    from rlperf.config.validate import validate_config

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


# ----------------------------------------------------------------------- Tune


def _fit(search: _Search, machine: Any) -> None:
    """One Tune run (or its restore from the folder): the searcher proposes, trials run."""
    payload = {
        "config": search.launcher.config,
        "space": search.space,
        "keys": [a.key for a in search.space.axes],
        "start": search.start,
        "overcommit": bool(search.ray_cfg.overcommit_cpus),
        "cluster": search.cluster,
        "metric": str(search.opts.metric),
        "task_function": search.launcher.task_function,
        "hydra_context": search.launcher.hydra_context,
        "singletons": Singleton.get_state(),
    }
    cache: dict[str, tune.PlacementGroupFactory] = {}

    def resources(config: dict[str, Any]) -> tune.PlacementGroupFactory:
        params = {k: config[k] for k in payload["keys"]}
        key = json.dumps(params, sort_keys=True, default=str)
        if key not in cache:
            cache[key] = _trial_resources(payload, params)
        return cache[key]

    trainable = tune.with_resources(
        tune.with_parameters(_search_trial, payload=payload), resources=resources
    )
    path = search.sweep_dir / _core.TUNE_DIR / EXPERIMENT
    with _core._tune_environment():
        if search.launcher.options.resume and tune.Tuner.can_restore(str(path)):
            search.progress.say(f"resuming the search in {path}")
            tuner = tune.Tuner.restore(str(path), trainable=trainable, resume_unfinished=True)
        else:
            tuner = _new_tuner(search, trainable)
        search.progress.say(_announcement(search))
        tuner.fit()
    if any(c.record.status in ("pending", "running") for c in search.cells):
        raise KeyboardInterrupt  # Tune ends early only when stopped (its SIGINT handler)


def _new_tuner(search: _Search, trainable: Any) -> tune.Tuner:
    from rlperf.sweep.space import tune_space

    opts = search.opts
    return tune.Tuner(
        trainable,
        param_space=tune_space(search.space),
        tune_config=tune.TuneConfig(
            search_alg=_searcher(opts),
            scheduler=_scheduler(search),
            num_samples=int(opts.num_samples),
            max_concurrent_trials=int(opts.max_concurrent),
            reuse_actors=False,
        ),
        run_config=tune.RunConfig(
            name=EXPERIMENT,
            storage_path=str(search.sweep_dir / _core.TUNE_DIR),
            failure_config=tune.FailureConfig(max_failures=int(search.options.max_failures)),
            verbose=0,
            callbacks=[_SearchCallback(search)],
        ),
    )


def _searcher(opts: DictConfig) -> Any:
    """Tune's searcher of ``search.algorithm`` (``grid``/``random``: its variant generator).

    ``search.max_concurrent`` is Tune's ``max_concurrent_trials``, which limits any searcher.
    """
    from ray.tune.search import BasicVariantGenerator

    seed = None if opts.seed is None else int(opts.seed)
    metric, mode = str(opts.metric), str(opts.mode)
    if str(opts.algorithm) == "optuna":
        import optuna
        from ray.tune.search.optuna import OptunaSearch

        sampler = optuna.samplers.TPESampler(seed=seed)

        class _Optuna(OptunaSearch):  # type: ignore[misc]
            """OptunaSearch taking results without the objective (a summary-only one, such
            as time_to_target_s, is in a trial's last result only)."""

            def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
                if self.metric in result:
                    super().on_trial_result(trial_id, result)

        return _Optuna(metric=metric, mode=mode, sampler=sampler, seed=seed)
    return BasicVariantGenerator(random_state=seed)


def _scheduler(search: _Search) -> TrialScheduler | None:
    """Tune's scheduler of ``search.scheduler.name``, recording why it stops a trial."""
    sched = search.opts.scheduler
    name = str(sched.name)
    if name == "none":
        return None
    metric, mode = scheduler_metric(search.opts)
    end = sched.max_t
    if end is None:
        assert search.launcher.config is not None
        end = int(OmegaConf.select(search.launcher.config, "train.iterations", default=100))
    time_attr = str(sched.time_attr)
    if name == "asha":
        return _RecordingASHA(
            time_attr=time_attr,
            metric=metric,
            mode=mode,
            max_t=int(end),
            grace_period=int(sched.grace_period),
            reduction_factor=float(sched.reduction_factor),
        )
    return _RecordingMedian(
        time_attr=time_attr,
        metric=metric,
        mode=mode,
        grace_period=float(sched.grace_period),
        min_samples_required=int(sched.min_samples_required),
    )


class _StopRecorder:
    """Mixin of a Tune scheduler: remembers why it stopped a trial (the cell's reason).

    A STOP at or after the trial's own end (``max_t``: ASHA's last rung) is turned
    into CONTINUE: the trial ends by itself after that iteration, with its summary
    and checkpoint, which a stop would lose for nothing.
    """

    label = "scheduler"
    _time_attr: str

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        decision: str = super().on_trial_result(tune_controller, trial, result)  # type: ignore[misc]
        if decision != TrialScheduler.STOP:
            return decision
        t = result.get(self._time_attr)
        end = getattr(self, "_max_t", None)
        if end is not None and t is not None and t >= end:
            return TrialScheduler.CONTINUE
        metric = str(getattr(self, "_metric", ""))
        value = result.get(metric)
        shown = f"{value:.4g}" if isinstance(value, float) and math.isfinite(value) else value
        reason = f"{self.label}: {metric}={shown} at {self._time_attr}={t} {self.why}"
        if _ACTIVE:
            _ACTIVE[-1].stop_reasons[trial.trial_id] = reason
        return decision

    @property
    def why(self) -> str:
        return ""


class _RecordingASHA(_StopRecorder, AsyncHyperBandScheduler):
    label = "ASHA"

    @property
    def why(self) -> str:
        return f"was worse than its rung's cutoff (the best 1/{self._reduction_factor:g} go on)"


class _RecordingMedian(_StopRecorder, MedianStoppingRule):
    label = "median stopping rule"

    @property
    def why(self) -> str:
        return "was worse than the median of the other trials' running means"


def _trial_resources(payload: dict[str, Any], params: dict[str, Any]) -> tune.PlacementGroupFactory:
    """The trial's placement group; a refused one asks for almost nothing (it ends at once).

    Called by Tune in the driver; it holds only what the trials get (Tune pickles it).
    """
    task_cfg = task_config(_payload_config(payload, params, "preflight", -1))
    if refusal(task_cfg, payload["start"], payload["overcommit"], payload["cluster"]) is not None:
        return tune.PlacementGroupFactory([{"CPU": 0.01}])
    request = cell_request(task_cfg)
    return tune.PlacementGroupFactory(request.bundles, strategy=request.strategy)


def _payload_config(
    payload: dict[str, Any], params: dict[str, Any], subdir: str, job_num: int
) -> DictConfig:
    """:func:`trial_config` from a trial's payload (no launcher object in a trial)."""

    class _Launcher:
        hydra_context = payload["hydra_context"]
        config = payload["config"]

    return trial_config(_Launcher, payload["space"].overrides(params), subdir, job_num)


def _announcement(search: _Search) -> str:
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


# ----------------------------------------------------------------------- trial


def _search_trial(config: dict[str, Any], payload: dict[str, Any]) -> None:
    """Body of a search's trial: its config from its parameters, pre-flight, the job."""
    entered = _core.enter_trial(payload)
    trial_id = tune.get_context().get_trial_id()
    params = {k: config[k] for k in payload["keys"]}
    sweep_config = _payload_config(payload, params, f"trial_{trial_id}", _job_num(trial_id))
    task_cfg = task_config(sweep_config)
    refused = refusal(task_cfg, payload["start"], payload["overcommit"], payload["cluster"])
    if refused is not None:
        out_dir = Path(str(sweep_config.hydra.runtime.output_dir))
        _core.write_hydra_snapshot(sweep_config, task_cfg, out_dir)
        write_refused_summary(out_dir, task_cfg, *refused)
        raise TrialRefused(f"{refused[0]}: {refused[1]}")
    metric = str(payload["metric"])

    def final(out_dir: Path) -> dict[str, Any]:
        score = trial_score(out_dir, metric)
        return {} if score is None else {metric: score}

    _core.run_trial_job(sweep_config, payload, entered, final)


class _SearchCallback(_core._SweepCallback):
    """The sweep's cell events, for trials the searcher proposes as it goes."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Tuner.restore unpickles the run's callbacks: bind to the search now running.
        self.sweep = _ACTIVE[-1]

    def _cell(self, trial: Any) -> _core.Cell:
        search = self.sweep
        assert isinstance(search, _Search)
        cell = search.by_hash.get(trial.trial_id)
        if cell is None:
            cell = _new_trial_cell(search, trial)
        return cell

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        search = self.sweep
        assert isinstance(search, _Search)
        reason = search.stop_reasons.get(trial.trial_id)
        if reason is None:
            super().on_trial_complete(iteration, trials, trial, **info)
            return
        cell = self._cell(trial)
        mark_summary(cell.out_dir, RunStatus.stopped_early, reason)
        self._finish(cell, RunStatus.stopped_early, reason)

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        cell = self._cell(trial)
        summary = read_summary(cell.out_dir)
        if summary.get("preflight") and summary.get("status") in REFUSED_STATUSES:
            self._finish(cell, str(summary["status"]), summary.get("error"))
            return
        super().on_trial_error(iteration, trials, trial, **info)


def _job_num(trial_id: str) -> int:
    """``hydra.job.num`` of a trial: Tune's trial counter where its id has one (random,
    grid: ``<run>_00003``), else 0 (Optuna's ids are random hex)."""
    suffix = trial_id.rsplit("_", 1)[-1]
    return int(suffix) if "_" in trial_id and suffix.isdigit() else 0


def _new_trial_cell(search: _Search, trial: Any) -> _core.Cell:
    """The cell of a trial the searcher just proposed (its number: the order of starts)."""
    params = {a.key: trial.config[a.key] for a in search.space.axes}
    overrides = search.space.overrides(params)
    subdir = f"trial_{trial.trial_id}"
    sweep_config = trial_config(search.launcher, overrides, subdir, _job_num(trial.trial_id))
    task_cfg = task_config(sweep_config)
    record = CellRecord(
        hash=cell_hash(task_cfg),
        overrides=overrides,
        subdir=subdir,
        job_num=len(search.cells),
        concurrent_cells=int(search.opts.max_concurrent),
    )
    cell = _core.Cell(record, sweep_config, task_cfg, search.sweep_dir / subdir, True)
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


def _finish(search: _Search) -> None:
    """After the run: stopped trials' folders say so (their process may have written after
    the callback), ``search.json``, the best trial, the final table."""
    for trial_id, reason in search.stop_reasons.items():
        cell = search.by_hash.get(trial_id)
        if cell is not None and cell.record.status == RunStatus.stopped_early:
            mark_summary(cell.out_dir, RunStatus.stopped_early, reason)
    search.save()
    best = best_trial(list(search.trials.values()), str(search.opts.mode))
    if search.cells:
        search.progress.say("trials:\n" + _core.format_table(search.records))
    if best is None:
        search.progress.say(f"no completed trial has a value of {search.opts.metric}")
    else:
        search.progress.say(
            f"best: {best['subdir']} {search.opts.metric}={best['score']:.6g} with "
            + " ".join(f"{k}={v}" for k, v in best["params"].items())
            + f"; re-run: rlperf experiment={search.sweep_dir / 'experiment' / 'search_best.yaml'}"
        )
