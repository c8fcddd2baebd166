"""The words the jobs write and the sweep and the report read: outcomes, exclusion reasons,
report families and objectives, each an enum written once.

A job folder's ``summary.json`` and ``cell.json`` hold these values as plain strings
(``StrEnum`` members compare and serialise as their values), so folders written before
the enums existed read unchanged. Every stage, the sweep engine, tracking and the report
name them from here; ``tests/project/test_vocabulary.py`` fails on one written as a literal
elsewhere. This module imports only the standard library, so reading a word never pulls a
layer above it.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """``status`` of a run (``summary.json``) and of a sweep cell (``cell.json``, ``sweep.json``).

    Every stage and the sweep launcher use these values; the report reads them
    (docs/results.md#statuses). New outcomes are added here, not invented by a
    stage.
    """

    pending = "pending"  # a sweep cell that has not started (yet)
    running = "running"  # started and not ended (a killed run keeps this)
    completed = "completed"  # the stage finished; its results are measurements
    failed = "failed"  # the stage raised; ``error`` and ``traceback`` say what
    invalid = "invalid"  # refused before start: the config is wrong (``error`` names the key)
    skipped = "skipped"  # refused: this machine cannot run it (GPU, Edge TPU, CPUs, runtime)
    interrupted = "interrupted"  # Ctrl-C, SIGTERM, SIGHUP; the rows written so far are kept
    stopped_early = "stopped_early"  # a search scheduler stopped it; ``error`` has its reason
    # The report's word for a folder that holds neither summary.json nor cell.json (a job
    # still running, or killed before its first write); no job writes it.
    partial = "partial"


#: A sweep keeps cells with these statuses when it is resumed (not run again).
FINAL_STATUSES: frozenset[str] = frozenset({RunStatus.completed, RunStatus.stopped_early})
#: Statuses of runs that never started their stage (``summary.json`` has ``preflight: true``).
REFUSED_STATUSES: frozenset[str] = frozenset({RunStatus.invalid, RunStatus.skipped})
#: A sweep cell that has not ended: waiting for its trial, or in one.
OPEN_STATUSES: frozenset[str] = frozenset({RunStatus.pending, RunStatus.running})
#: A sweep cell that ended for good in this session (its progress line counts it as done;
#: an interrupted cell runs again with the same command).
DONE_STATUSES: tuple[RunStatus, ...] = (
    RunStatus.completed,
    RunStatus.failed,
    RunStatus.skipped,
    RunStatus.invalid,
    RunStatus.stopped_early,
)


class Exclusion(StrEnum):
    """Why a row is excluded (the value of :data:`rlperf.layout.EXCLUDED_COLUMN`)."""

    warmup = "warmup"  # before the end of the warm-up (the rule is in summary.json)
    # Training: an env runner or learner was lost or restarted during the iteration (RLlib's
    # fault tolerance); serve: measured while a fault was injected (a replica killed). Its
    # times and throughput measure the fault, not the configuration.
    fault = "fault"
    no_samples = "no_samples"  # the iteration sampled no env steps


class ClosedBy(StrEnum):
    """Why a sweep's configuration gets no more runs (``sweep.json`` ``rounds.closed``)."""

    max = "max"  # it has repeats.max runs
    precision = "precision"  # its run-to-run interval reached repeats.precision
    eliminated = "eliminated"  # the race showed it slower than its set's best
    failed = "failed"  # its last run failed


#: The closings a sweep decides early, which its progress line and the report name.
EARLY_CLOSINGS = frozenset({ClosedBy.precision, ClosedBy.eliminated})


class Family(StrEnum):
    """The report's comparison family of a stage (``StageSpec.family``): cells are compared
    only within one family."""

    training = "training"  # stage=train: iterations of an RLlib algorithm
    inference = "inference"  # stage=rollout and stage=edge: a trained policy's actions
    serve = "serve"  # stage=serve: a policy behind Ray Serve, judged on its rate under a bound
    env = "env"  # stage=env: the env alone


class Objective(StrEnum):
    """What a comparison ranks cells on (``rlperf-report --objective``); every one is
    time-like, lower is better. The training objectives are named after the column they
    are computed from (:mod:`rlperf.results.columns`)."""

    env_steps = "env_steps"  # time per 1 000 env steps sampled
    trained_steps = "trained_steps"  # time per 1 000 steps trained on
    iter_s = "iter_s"  # time per iteration (only where every iteration holds the same work)
    time_to_target = "time_to_target"  # time to the target return (train.stop.episode_return)
    latency = "latency"  # the median time per action (inference)
