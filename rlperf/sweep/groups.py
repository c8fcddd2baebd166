"""Running a group of a sweep's cells: one Tune experiment in a Ray started for them.

Cells that share how Ray is started (visible GPUs, CPU count, affinity) form a
group; each group runs as one Tune experiment in its own local Ray, started after
the group's GPUs and affinity mask are applied to this process (Ray's raylet and
workers inherit both). On an existing cluster every cell runs in one experiment
there. :func:`tune_environment` is the environment Tune runs in (a search uses
it too).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path

import ray
from hydra.core.singleton import Singleton
from ray import tune

from rlperf.console import quiet_logger
from rlperf.resources.node_watch import NodeLost, watch_node
from rlperf.resources.ray_session import applied_placement, init_ray, joined_address
from rlperf.results.storage import stored_copy, trial_folder
from rlperf.sweep.callback import SweepCallback, mark_interrupted, mark_running
from rlperf.sweep.index import now_iso
from rlperf.sweep.resources import RayStart
from rlperf.sweep.state import TUNE_DIR, Cell, Group, Sweep
from rlperf.sweep.trial import GridPayload, cell_trial
from rlperf.vocabulary import OPEN_STATUSES, RunStatus


class LocalRay:
    """The local Ray a sweep's group runs in, kept for the next group that starts Ray the
    same way (the rounds of a one-group sweep share one Ray); ``None`` in :func:`run_group`
    is a Ray that was already there (a cluster, a notebook)."""

    def __init__(self, sweep: Sweep) -> None:
        self.sweep = sweep
        self.start: RayStart | None = None
        self.gid: int | None = None
        self._cm: contextlib.AbstractContextManager[float] | None = None

    def keeps(self, group: Group) -> bool:
        """Whether ``group`` runs in the Ray already started."""
        return self._cm is not None and self.start == group.start

    def ensure(self, group: Group) -> float | None:
        """Ray started for ``group`` (the seconds it took), or None when the one running
        already fits it."""
        if self.keeps(group):
            return None
        self.close()
        cm = _local_ray(self.sweep, group)
        seconds = cm.__enter__()
        self._cm, self.start, self.gid = cm, group.start, group.gid
        return seconds

    def close(self, exc: BaseException | None = None) -> None:
        """Shut the Ray down; with ``exc``, as :func:`_local_ray` does for that exception
        (running cells marked) before the caller raises it."""
        cm, self._cm, self.start, self.gid = self._cm, None, None, None
        if cm is None:
            return
        if exc is None:
            cm.__exit__(None, None, None)
            return
        with contextlib.suppress(type(exc)):
            cm.__exit__(type(exc), exc, exc.__traceback__)


def run_group(sweep: Sweep, group: Group, ray_: LocalRay | None, label: str = "") -> None:
    """One Tune experiment over the group's cells, in ``ray_`` (started for it, or kept from
    the group before) or, with None, in the Ray already there. ``label``: the round."""
    opts = sweep.options
    gcells = group.cells
    info = sweep.index.groups[group.gid]
    info["started_at"] = info.get("started_at") or now_iso()
    try:
        seconds = ray_.ensure(group) if ray_ is not None else None
        if seconds is not None:
            info["ray_start_s"] = seconds
            sweep.progress.say(
                f"group {group.gid}: Ray started in {seconds:.1f} s with "
                f"{group.start.describe()} for {len(gcells)} cell(s)"
            )
        elif ray_ is None and info.get("ray_start_s") is None:
            info["ray_start_s"] = 0.0  # a Ray that was there: nothing started
        sweep.ray_address = joined_address(sweep.ray_cfg)
        sweep.index.save()
        payload = GridPayload(
            task_function=sweep.setup.task_function,
            hydra_context=sweep.setup.hydra_context,
            singletons=Singleton.get_state(),
            storage=sweep.storage is not None,
            cells={c.record.hash: c.sweep_config for c in gcells},
            inputs={c.record.hash: stored_input(c) for c in gcells},
        )
        pgfs = {
            c.record.hash: tune.PlacementGroupFactory(
                c.request.bundles, strategy=c.request.strategy
            )
            for c in gcells
            if c.request is not None
        }
        trainable = tune.with_resources(
            tune.with_parameters(cell_trial, payload=payload),
            resources=lambda config: pgfs[config["cell"]],
        )
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        name = f"group{group.gid}{label}-{stamp}"
        folders = {c.record.hash: trial_folder(c.record.subdir) for c in gcells}
        tuner = tune.Tuner(
            trainable,
            param_space={"cell": tune.grid_search([c.record.hash for c in gcells])},
            tune_config=tune.TuneConfig(
                num_samples=1,
                max_concurrent_trials=int(opts.max_concurrent_trials),
                reuse_actors=False,
                # In the storage, a cell's files are at <experiment>/<its folder name>.
                trial_dirname_creator=lambda trial: folders[trial.config["cell"]],
            ),
            run_config=tune_run_config(sweep, name, SweepCallback(sweep, name)),
        )
        with tune_environment(), watch_node(f"while group {group.gid} ran"):
            tuner.fit()
        if any(c.record.status in OPEN_STATUSES for c in gcells):
            # Tune ends early only when stopped (its SIGINT handler: Ctrl-C).
            raise KeyboardInterrupt
    except BaseException as exc:
        if ray_ is not None:
            ray_.close(exc)
        raise


def tune_run_config(sweep: Sweep, name: str, callback: tune.Callback) -> tune.RunConfig:
    """Tune's ``RunConfig`` for the sweep's (or search's) experiment ``name``: Tune's state in
    the sweep's storage or, without one, in the sweep folder's ``.tune/``. With a storage
    the trials write in their own folder, which Tune uploads (at reports, at most every
    ``sync_period``; in full when the cell ends)."""
    storage = sweep.storage
    return tune.RunConfig(
        name=name,
        storage_path=storage.tune_path() if storage else str(sweep.sweep_dir / TUNE_DIR),
        sync_config=tune.SyncConfig(sync_artifacts=storage is not None),
        failure_config=tune.FailureConfig(max_failures=int(sweep.options.max_failures)),
        verbose=0,
        callbacks=[callback],
    )


def stored_input(cell: Cell) -> tuple[str, str, str] | None:
    """A downstream cell's upstream run folder (``run=``) that a storage holds a copy of:
    ``(the folder as this machine has it, storage URI, folder under it)``, which the trial
    fetches where its node lacks the folder (:func:`rlperf.sweep.trial.stage_input`)."""
    run = cell.task_cfg.get("run") if cell.rlperf else None
    if not run:
        return None
    folder = Path(str(run))
    if not folder.is_absolute():
        folder = Path(str(cell.sweep_config.hydra.runtime.cwd)) / folder
    copy = stored_copy(folder)
    return None if copy is None else (str(folder), *copy)


@contextlib.contextmanager
def _local_ray(sweep: Sweep, group: Group) -> Iterator[float]:
    """A local Ray for one group: GPUs and affinity applied to this process first, then ray.init.

    Ray's raylet and every worker it forks inherit ``CUDA_VISIBLE_DEVICES`` and
    the affinity mask of the process that starts it; both are restored after
    Ray is shut down. Yields the seconds ``ray.init`` took.
    """
    plan = next((c.request.plan for c in group.cells if c.request and c.request.plan), None)
    assert group.capacity is not None
    placement = applied_placement(plan) if plan is not None else contextlib.nullcontext()
    with placement:
        seconds = init_ray(
            sweep.ray_cfg, int(group.capacity["CPU"]), int(group.capacity.get("GPU", 0))
        )
        try:
            yield seconds
        except NodeLost as lost:  # the cells not started go on in a new Ray (launch.py)
            mark_running(sweep, RunStatus.failed, f"{lost}; the same command runs it again")
            raise
        except KeyboardInterrupt:
            mark_interrupted(sweep)  # before Ray's shutdown, which a dead Ray can slow down
            raise
        finally:
            ray.shutdown()


#: Environment for Tune while a group runs: no Tune result loggers (rlperf writes its
#: own per-cell files; Tune's progress.csv freezes its header at the first result),
#: and Tune's legacy output engine, which prints nothing at verbose=0 (the launcher
#: prints its own progress).
TUNE_ENV = {
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
    "RAY_AIR_NEW_OUTPUT": "0",
    # A search's summary-only objective (time_to_target_s) is in a trial's last result
    # only, which Tune's check that every result has the searcher's metric would refuse.
    "TUNE_DISABLE_STRICT_METRIC_CHECKING": "1",
}


@contextlib.contextmanager
def tune_environment(extra: Mapping[str, str] | None = None) -> Iterator[None]:
    """:data:`TUNE_ENV` (and ``extra``) set, Tune's analysis warnings quiet, our SIGINT
    handler back after.

    Tune installs a SIGINT handler (graceful stop on the first Ctrl-C) and never
    removes it, so a Ctrl-C after the experiment would otherwise be swallowed.
    """
    env = {**TUNE_ENV, **(extra or {})}
    saved_env = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    saved_handler = signal.getsignal(signal.SIGINT)
    # Without Tune's loggers its ExperimentAnalysis warns that it found no result files.
    try:
        with quiet_logger("ray.tune.analysis.experiment_analysis", logging.ERROR):
            yield
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        with contextlib.suppress(ValueError, TypeError):  # not the main thread
            signal.signal(signal.SIGINT, saved_handler)
