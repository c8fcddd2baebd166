"""A search's searcher and scheduler: Tune's, from ``hydra.sweeper.search.*`` (docs/search.md).

The schedulers are Tune's own, with a mixin that remembers why each trial was
stopped (the cell's reason in ``sweep.json`` and ``search.json``). Tune pickles
its scheduler into the experiment folder and ``Tuner.restore`` unpickles it, so a
scheduler finds the search running in this process in :data:`ACTIVE`.
"""

from __future__ import annotations

import math
from typing import Any

from omegaconf import DictConfig, OmegaConf
from ray.tune.schedulers import AsyncHyperBandScheduler, MedianStoppingRule, TrialScheduler

from rlperf.sweep.search_results import PROXY_METRIC, PROXY_MODE, per_iteration

#: The search running in this process (a :class:`rlperf.sweep.search.Search`): Tune's
#: callback and scheduler, unpickled by ``Tuner.restore``, find it here.
ACTIVE: list[Any] = []


def scheduler_metric(opts: DictConfig) -> tuple[str, str]:
    """The per-iteration metric and mode the scheduler compares (docs/search.md)."""
    sched = opts.scheduler
    if sched.metric is not None:
        return str(sched.metric), str(sched.mode or opts.mode)
    if per_iteration(str(opts.metric)):
        return str(opts.metric), str(opts.mode)
    return PROXY_METRIC, PROXY_MODE


def searcher(opts: DictConfig) -> Any:
    """Tune's searcher of ``search.algorithm`` (``grid``/``random``: its variant generator).

    ``search.max_concurrent`` is Tune's ``max_concurrent_trials``, which limits any searcher.
    """
    # Ray Tune: deferred, a search's options are checked before Ray loads.
    from ray.tune.search import BasicVariantGenerator

    seed = None if opts.seed is None else int(opts.seed)
    metric, mode = str(opts.metric), str(opts.mode)
    if str(opts.algorithm) == "optuna":
        # Optuna and Tune's wrapper of it: only for search.algorithm=optuna.
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


def scheduler(opts: DictConfig, config: DictConfig) -> TrialScheduler | None:
    """Tune's scheduler of ``search.scheduler.name`` (``opts``: ``hydra.sweeper.search``),
    recording why it stops a trial; ``config`` (the sweep's) gives a trial's length."""
    sched = opts.scheduler
    name = str(sched.name)
    if name == "none":
        return None
    metric, mode = scheduler_metric(opts)
    end = sched.max_t
    if end is None:
        end = int(OmegaConf.select(config, "train.iterations", default=100))
    time_attr = str(sched.time_attr)
    if name == "asha":
        return RecordingASHA(
            time_attr=time_attr,
            metric=metric,
            mode=mode,
            max_t=int(end),
            grace_period=int(sched.grace_period),
            reduction_factor=float(sched.reduction_factor),
        )
    return RecordingMedian(
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
        if ACTIVE:
            ACTIVE[-1].stop_reasons[trial.trial_id] = reason
        return decision

    @property
    def why(self) -> str:
        return ""


class RecordingASHA(_StopRecorder, AsyncHyperBandScheduler):
    label = "ASHA"

    @property
    def why(self) -> str:
        return f"was worse than its rung's cutoff (the best 1/{self._reduction_factor:g} go on)"


class RecordingMedian(_StopRecorder, MedianStoppingRule):
    label = "median stopping rule"

    @property
    def why(self) -> str:
        return "was worse than the median of the other trials' running means"
