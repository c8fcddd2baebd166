"""What configurations are ranked on: one :class:`Objective` per comparison.

A comparison (one workload of one family, :mod:`rlperf.report.compare.workloads`) is ranked on
an objective that measures the same work in every cell (SPEC §5):

- training: the time per 1 000 env steps sampled (``env_steps``), the ratio of the
  non-excluded iterations' total time to their total env steps, so that iterations
  holding different work (RLlib 1.x rounding 4 000 up to 4 800 or 6 400 env steps,
  APPO/IMPALA iterations that end on time, another ``train_batch_size``) are weighed
  by their work; ``trained_steps`` per 1 000 trained steps where the learner trains on
  more (or fewer) steps than were sampled (replay, epochs); ``iter_s`` only where every
  iteration of every cell sampled the same env steps (:func:`check_requested` refuses it
  elsewhere); ``time_to_target`` where the runs have a target return (the default then);
- inference (rollout, edge): the median time per action (``action_ms``, or
  ``forward_ms`` where a cell only has that); latency distributions have long tails.

:func:`choose` applies the rule; ``rlperf-report --objective`` overrides it. Every
objective here is time-like (lower is better), so speedups and the gate's verdicts
(ratios baseline / configuration) read as "faster".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rlperf.errors import ObjectiveError
from rlperf.report.read.cells import Cell, included
from rlperf.report.stats.repeats import Configuration
from rlperf.results.columns import (
    ACTION_MS,
    ENV_STEPS,
    FORWARD_MS,
    ITER_S,
    S_PER_1K_ENV_STEPS,
    TIME_TO_TARGET,
    TRAIN_TIME_S,
    TRAINED_STEPS,
    TRAINING_OBJECTIVES,
)
from rlperf.results.record import TrainRecord
from rlperf.specs.stages import FAMILY_OBJECTIVE  # each family's default (its stages' specs)
from rlperf.stats import intervals
from rlperf.stats.intervals import Estimate
from rlperf.stats.race import MODERATED, Rule
from rlperf.stats.stopping import PER_1K, design_confidence
from rlperf.vocabulary import Family

#: Work units of the per-work objectives (per 1 000 of them).
PER = PER_1K


def _included(cell: Cell) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-excluded iterations' times, env steps and trained steps."""
    df = cell.iterations
    if df is None or df.empty:
        empty = np.array([])
        return empty, empty, empty
    kept = included(df)

    def col(name: str) -> np.ndarray:
        if name not in kept:
            return np.full(len(kept), np.nan)
        return kept[name].to_numpy(dtype=float)

    return col(ITER_S), col(ENV_STEPS), col(TRAINED_STEPS)


def training_samples(cell: Cell) -> np.ndarray:
    """The non-excluded iteration times of a training run."""
    return _included(cell)[0]


def env_step_pairs(cell: Cell) -> tuple[np.ndarray, np.ndarray]:
    """(iteration time, env steps sampled) of every non-excluded iteration."""
    t, env, _ = _included(cell)
    return t, env


def trained_step_pairs(cell: Cell) -> tuple[np.ndarray, np.ndarray]:
    """(iteration time, steps trained on) of every non-excluded iteration."""
    t, _, trained = _included(cell)
    return t, trained


def time_to_target_samples(cell: Cell) -> np.ndarray:
    """The run's time to its target: reached, its ``time_to_target_s``; missed, its
    training time when it stopped (a lower bound, as :mod:`rlperf.report.stats.targets` counts
    it)."""
    run = cell.record_of(TrainRecord)
    if run.reached and run.time_to_target_s is not None:
        return np.array([float(run.time_to_target_s)])
    df = cell.iterations
    if df is not None and TRAIN_TIME_S in df and df[TRAIN_TIME_S].notna().any():
        return np.array([float(df[TRAIN_TIME_S].max())])
    return np.array([])


def latency_samples(cell: Cell) -> np.ndarray:
    """The non-excluded action latencies (forward latencies where only those exist)."""
    df = cell.latency
    if df is None:
        return np.array([])
    kept = included(df)
    col = ACTION_MS if kept[ACTION_MS].notna().any() else FORWARD_MS
    return kept[col].to_numpy(dtype=float)


def latency_sample_word(cell: Cell) -> str:
    """What one latency sample of the cell is (a step, or a legacy episode / run mean)."""
    if cell.latency is not None and len(cell.latency):
        granularity = str(cell.latency["granularity"].iloc[0])
        return {"step": "steps", "episode_mean": "episode means", "run_mean": "run means"}.get(
            granularity, "samples"
        )
    return "samples"


@dataclass(frozen=True)
class Objective:
    """A metric a comparison's configurations are estimated, ranked and compared on.

    ``key`` is what ``--objective`` names; ``metric`` the column-like name written into
    the tables (``objective`` column: ``name``); ``statistic`` reduces one run's samples:
    ``mean`` or ``median`` of ``samples``, or ``ratio`` (:data:`PER` x total time / total
    work over ``pairs``, :func:`rlperf.stats.intervals.within_run_ratio`).
    """

    key: str
    metric: str
    statistic: str
    unit: str
    name: str  # how headings, axes and findings name it
    sample_word: Callable[[Cell], str]
    samples: Callable[[Cell], np.ndarray] | None = None
    pairs: Callable[[Cell], tuple[np.ndarray, np.ndarray]] | None = None
    lower_is_better: bool = True

    @property
    def what(self) -> str:
        """The objective as findings name it."""
        return self.name

    @property
    def label(self) -> str:
        """``time per 1 000 env steps (s)``: a table heading's or an axis's name."""
        return f"{self.name} ({self.unit})"

    def within_run(self, cell: Cell) -> Estimate:
        """One run's estimate with its within-run interval (batch means over the run's
        samples, :mod:`rlperf.stats.intervals`); where the run stopped on its own
        precision target for this objective, the interval it stopped on. A time to target
        that was not reached is a lower bound (``bound``)."""
        stopped = _stopped_on(cell, self.metric)
        if stopped is not None:
            return stopped
        if self.statistic == "ratio" and self.pairs is not None:
            time, work = self.pairs(cell)
            return intervals.within_run_ratio(time, work, PER)
        assert self.samples is not None
        e = intervals.within_run(self.samples(cell), self.statistic)
        if self.key == TIME_TO_TARGET and not cell.record_of(TrainRecord).reached:
            return replace(e, bound=True)
        return e

    def estimate(self, configuration: Configuration, runs: Mapping[str, Estimate]) -> Estimate:
        """The configuration's estimate: its run's own where it ran once, else the geometric
        mean of its runs' values with a run-to-run interval (``runs``: cell id -> within-run,
        :func:`rlperf.stats.intervals.across_runs`) at the level the sweep's design used,
        with the variance prior its comparison set was decided by
        (:func:`configuration_rule`)."""
        measured = [c for c in configuration.completed if np.isfinite(runs[c.id].value)]
        if len(measured) <= 1:  # one run (or one with samples that count): its own interval
            return runs[(measured or configuration.completed)[0].id]
        values = [runs[c.id].value for c in measured]
        bound = any(runs[c.id].bound for c in measured)
        level = design_confidence(configuration.cells[0].design)
        rule = configuration_rule(configuration)
        prior = rule.prior if rule is not None and rule.name == MODERATED else None
        return intervals.across_runs(values, level, bound, prior)

    def order(self, estimates: Mapping[str, Estimate]) -> list[str]:
        """Ids best first."""
        sign = 1.0 if self.lower_is_better else -1.0
        return sorted(estimates, key=lambda k: sign * estimates[k].value)


def configuration_rule(configuration: Configuration) -> Rule | None:
    """The rule the sweep decided the configuration's comparison set by (``sweep.json``
    ``rounds.rules``; None outside an adaptive sweep)."""
    rules = configuration.cells[0].rules or {}
    data = rules.get(f"{configuration.family}: {configuration.workload}")
    return Rule.from_json(data) if isinstance(data, Mapping) else None


def _stopped_on(cell: Cell, metric: str) -> Estimate | None:
    """The interval a run stopped on (``summary.json`` ``precision``, reached, for the
    objective ``metric``), as an estimate; None where it did not stop on one."""
    p = cell.record_of(TrainRecord).precision or {}
    if not p.get("reached") or p.get("objective") != metric or p.get("batches") is None:
        return None
    try:
        value, low, high = float(p["estimate"]), float(p["low"]), float(p["high"])
        return intervals.recorded(value, low, high, int(p["values"]), float(p["level"]),
                                  int(p["batches"]) - 1)  # fmt: skip
    except (KeyError, TypeError, ValueError):
        return None


def _iterations(_: Cell) -> str:
    return "iterations"


def _runs(_: Cell) -> str:
    return "runs"


#: Every objective, by the name ``--objective`` takes.
OBJECTIVES: dict[str, Objective] = {
    ENV_STEPS: Objective(ENV_STEPS, S_PER_1K_ENV_STEPS, "ratio", "s",
                           "time per 1 000 env steps", _iterations, pairs=env_step_pairs),
    TRAINED_STEPS: Objective(TRAINED_STEPS, "s_per_1k_trained_steps", "ratio", "s",
                               "time per 1 000 trained steps", _iterations,
                               pairs=trained_step_pairs),
    ITER_S: Objective(ITER_S, ITER_S, "mean", "s", "time per training iteration",
                        _iterations, samples=training_samples),
    TIME_TO_TARGET: Objective(TIME_TO_TARGET, "time_to_target_s", "mean", "s",
                                "time to target", _runs, samples=time_to_target_samples),
    "latency": Objective("latency", ACTION_MS, "median", "ms", "latency per action",
                         latency_sample_word, samples=latency_samples),
}  # fmt: skip


def _windows(_: Cell) -> str:
    return "windows"


def objective_of(family: str) -> Objective:
    """The family's default objective (a new stage's family is ranked like training; an env
    cell's samples are its windows)."""
    if family == Family.env:
        return replace(OBJECTIVES[ENV_STEPS], sample_word=_windows)
    key = FAMILY_OBJECTIVE.get(family)
    return OBJECTIVES[key] if key else replace(OBJECTIVES[ENV_STEPS], name=family)


def has_target(cell: Cell) -> bool:
    """Whether a training run had a target return (``train.stop.episode_return``)."""
    return (cell.record_of(TrainRecord).stop or {}).get("episode_return") is not None


def env_steps_per_iteration(configurations: Sequence[Configuration]) -> list[float]:
    """The distinct env steps per non-excluded iteration over every completed run."""
    seen: set[float] = set()
    for conf in configurations:
        for cell in conf.completed:
            _, env, _ = _included(cell)
            seen.update(float(v) for v in env if np.isfinite(v))
    return sorted(seen)


def same_work_per_iteration(configurations: Sequence[Configuration]) -> bool:
    """True when every non-excluded iteration of every run sampled the same env steps."""
    return len(env_steps_per_iteration(configurations)) == 1


def trained_steps_differ(configurations: Sequence[Configuration]) -> bool:
    """True when the learner trained on more (or fewer) steps than were sampled."""
    for conf in configurations:
        for cell in conf.completed:
            _, env, trained = _included(cell)
            ok = np.isfinite(env) & np.isfinite(trained)
            if ok.any() and not np.allclose(env[ok], trained[ok]):
                return True
    return False


def choose(
    family: str, configurations: Sequence[Configuration], requested: str | None, where: str
) -> tuple[Objective, str]:
    """The objective of one comparison and why it was chosen (a sentence for the table).

    Training: ``requested`` (``--objective``) where it fits (:func:`check_requested`),
    else time to target where the runs have a target, else time per 1 000 env steps.
    Other families: their one objective. ``where`` names the comparison in errors.
    """
    if family != Family.training:
        return objective_of(family), ""
    completed = [c for conf in configurations for c in conf.completed]
    steps = env_steps_per_iteration(configurations)
    if requested:
        check_requested(requested, configurations, where)
        objective = OBJECTIVES[requested]
        why = "chosen with --objective"
        if requested == ITER_S:
            why += f"; every iteration sampled {steps[0]:,.0f} env steps"
        return objective, why
    if completed and all(has_target(c) for c in completed):
        return OBJECTIVES[TIME_TO_TARGET], "the runs have a target return"
    if len(steps) == 1:
        why = (f"every iteration sampled {steps[0]:,.0f} env steps, so time per iteration "
               "would rank the same")  # fmt: skip
    elif steps:
        why = (f"iterations sampled {steps[0]:,.0f} to {steps[-1]:,.0f} env steps, so time "
               "per iteration is not the same work")  # fmt: skip
    else:
        why = "no iteration recorded its env steps"
    return OBJECTIVES[ENV_STEPS], why


def check_requested(requested: str, configurations: Sequence[Configuration], where: str) -> None:
    """Refuse an ``--objective`` that does not measure the same work in every cell of the
    comparison ``where`` (raises :class:`ObjectiveError`)."""
    if requested not in TRAINING_OBJECTIVES:
        raise ObjectiveError(
            f"--objective {requested!r} is not a training objective; choose one of "
            + ", ".join(TRAINING_OBJECTIVES)
        )
    if requested == ITER_S and not same_work_per_iteration(configurations):
        steps = env_steps_per_iteration(configurations)
        seen = ", ".join(f"{s:,.0f}" for s in steps[:6]) + (" ..." if len(steps) > 6 else "")
        raise ObjectiveError(
            f"--objective iter_s: the iterations of {where} sampled different env steps "
            f"({seen}), so time per iteration is not the same work; use env_steps "
            "(time per 1 000 env steps) instead"
        )
    if requested == TIME_TO_TARGET:
        completed = [c for conf in configurations for c in conf.completed]
        if not any(has_target(c) for c in completed):
            raise ObjectiveError(
                f"--objective time_to_target: no run of {where} had a target return "
                "(train.stop.episode_return)"
            )
