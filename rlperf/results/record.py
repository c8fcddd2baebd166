"""``summary.json`` as a typed record: what a job writes and the sweep, tracking and report read.

A :class:`RunRecord` is the file: every key it declares is a typed attribute
(:class:`Key`), read and written by name, never by a string. It keeps the keys in the
order the job learnt them, so ``summary.json`` stays the file it was (a training
writes its env protocol before its stage runs, a rollout after it). The keys every job
writes are :class:`RunRecord`'s; each stage's own are its subclass's (:data:`RECORDS`).
A key no record declares (a newer rlperf's) is kept as written
(:attr:`RunRecord.results`) and survives a rewrite.

Older files read through :func:`read_record`, a versioned reader: today's files carry
no ``version`` key and are version 1 (:data:`RECORD_VERSION`); a file without
``status`` (written by rlperf 0.1, or a job killed before its first write of one) has
``status`` None, which each reader resolves (the report from ``cell.json``, else
``partial``). A version above this rlperf's is read for what it shares, never refused:
the report of a newer folder still shows its outcome.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

from rlperf.layout import SUMMARY_FILE
from rlperf.results.jsonfile import write_json
from rlperf.specs.stages import Stage
from rlperf.vocabulary import RunStatus

#: The layout of ``summary.json`` this rlperf writes (absent from the file: version 1).
RECORD_VERSION = 1
#: The key a later layout will carry its version in.
VERSION_KEY = "version"

T = TypeVar("T")


class Key(Generic[T]):
    """One declared key of ``summary.json``: a typed attribute over the record's ordered keys.

    Reading a key the file lacks gives ``default``; setting it adds it (at the end, the
    first time) or replaces its value in place.
    """

    def __init__(self, default: T) -> None:
        self.default = default
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> Key[T]: ...
    @overload
    def __get__(self, obj: RunRecord, objtype: type | None = None) -> T: ...
    def __get__(self, obj: RunRecord | None, objtype: type | None = None) -> T | Key[T]:
        if obj is None:
            return self
        if self.name not in obj.data:
            return copy.copy(self.default)  # a default list is never shared between records
        value: T = obj.data[self.name]
        return value

    def __set__(self, obj: RunRecord, value: T) -> None:
        obj.data[self.name] = value


class RunRecord:
    """``summary.json`` of a job of any stage (docs/results.md#summary).

    The keys every stage's job wrapper writes are declared here; the stage's own part
    is :attr:`results`. ``data`` is the file's object, in order.
    """

    #: What the job's outcome is (:class:`RunStatus`), as the plain string the file holds;
    #: None in a file without one (rlperf 0.1; a job killed before its first write).
    status: Key[str | None] = Key(None)
    stage: Key[str | None] = Key(None)
    backend: Key[str | None] = Key(None)
    #: One line: why the job did not complete (None when it did).
    error: Key[str | None] = Key(None)
    traceback: Key[str | None] = Key(None)
    #: Problems that did not stop the job: ``{kind, at, message, setting}`` each.
    incidents: Key[list[dict[str, Any]]] = Key([])
    #: What an env step of the job is (rlperf.results.protocol), None without an env.
    env_protocol: Key[dict[str, Any] | None] = Key(None)
    #: The env a downstream job played (the upstream run's, with its own ``env.*``).
    env: Key[dict[str, Any] | None] = Key(None)
    #: RAPL's record of the job's CPU energy (None without telemetry).
    cpu_energy: Key[dict[str, Any] | None] = Key(None)
    #: Iterations a training ran (0 for a run refused before it started).
    iterations: Key[int | None] = Key(None)
    #: Refused before the stage started (``invalid`` / ``skipped`` by the pre-flight).
    preflight: Key[bool] = Key(False)
    #: Which tracking tools got the job, and how long closing them took.
    tracking: Key[dict[str, Any] | None] = Key(None)
    #: The job's wall time: the wrapper's start to the end of the stage.
    wall_s: Key[float | None] = Key(None)

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        # The caller's dict itself, not a copy: a reader's record is a view of what it parsed.
        self.data: dict[str, Any] = data if data is not None else {}

    @classmethod
    def new(cls, stage: str | None, backend: str | None, status: str) -> RunRecord:
        """The keys every ``summary.json`` starts with, in the order the file has them."""
        record = cls()
        record.status, record.stage, record.backend = str(status), stage, backend
        record.error, record.traceback, record.incidents = None, None, []
        return record

    @classmethod
    def unwritten(cls) -> RunRecord:
        """The record of a folder whose job never wrote one (its process or node died
        first): its stage and traceback unknown, its outcome for the caller to mark."""
        record = cls()
        record.stage, record.traceback = None, None
        return record

    @classmethod
    def declared(cls) -> frozenset[str]:
        """The keys :class:`RunRecord` types (the others are the stage's :attr:`results`)."""
        return frozenset(
            name for klass in cls.__mro__ for name, v in vars(klass).items() if isinstance(v, Key)
        )

    # --- the outcome

    @property
    def completed(self) -> bool:
        return self.status == RunStatus.completed

    def mark(self, status: str, error: str | None, traceback: str | None = None) -> None:
        """End the record with ``status`` and its reason (and the traceback, where one is)."""
        self.status, self.error = str(status), error
        if traceback is not None:
            self.traceback = traceback

    # --- the stage's own part

    def metric_mean(self, column: str) -> float | None:
        """The mean of a training's ``column`` over its counted iterations (None for a job
        that has no such aggregate)."""
        stats = as_record(self, TrainRecord).metrics.get(column) or {}
        mean = stats.get("mean") if isinstance(stats, Mapping) else None
        return float(mean) if isinstance(mean, int | float) else None

    @property
    def results(self) -> dict[str, Any]:
        """The keys no record declares (a newer rlperf's), as written, in order."""
        known = self.declared() | {VERSION_KEY}
        return {k: v for k, v in self.data.items() if k not in known}

    # --- the file

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)

    def write(self, folder: Path) -> Path:
        """``folder/summary.json``, atomically (NaN as null)."""
        path = folder / SUMMARY_FILE
        write_json(path, self.data)
        return path


Json = dict[str, Any]  # a nested block of the file, as written (its own keys: docs/results.md)


class _StageRecord(RunRecord):
    """Keys that several stages write, each with the same meaning (a training's steps are
    its iterations': it leaves ``steps`` unset): where a policy came from, what was
    played or stepped, where it ran."""

    #: The upstream run (``run``, ``checkpoint``, ``policy``) the job read.
    source: Key[Json | None] = Key(None)
    seed: Key[int | None] = Key(None)
    warmup: Key[Json | None] = Key(None)
    warmup_steps: Key[int | None] = Key(None)
    #: Steps timed (warm-up included).
    steps: Key[int | None] = Key(None)
    #: ``{metric: {count, mean, std, p50, p90, p99, max}}`` over the steps that count.
    latency: Key[Json] = Key({})
    #: ``{reason: rows}`` of the rows left out (:class:`rlperf.vocabulary.Exclusion`).
    excluded: Key[dict[str, int]] = Key({})
    #: episodes.csv's count and returns.
    episodes: Key[Json | None] = Key(None)
    timer_overhead_ns: Key[float | None] = Key(None)
    #: The CPU's and GPUs' joules over the timed loop, per 1 000 actions.
    energy: Key[Json | None] = Key(None)
    model_params: Key[int | None] = Key(None)
    #: Where the learner(s) and env runners ran (rlperf.resources.placement).
    learner: Key[Json | None] = Key(None)
    env_runners: Key[Json | None] = Key(None)
    #: The run's precision stop (``rollout.precision``, ``train.stop.precision``).
    precision: Key[Json | None] = Key(None)
    #: What produced the actions (stage=env: random, or the run's policy; serve: the check).
    actions: Key[Any] = Key(None)
    #: The model's facts (name, kind, observation shape, actions).
    model: Key[Json | None] = Key(None)
    #: Files built or reused (edge, serve) and their build times.
    cache: Key[Json | None] = Key(None)
    timings_s: Key[Json] = Key({})


class TrainRecord(_StageRecord):
    """``summary.json`` of ``stage=train`` (docs/results.md#summary)."""

    #: The GPU layout's plan, recorded before Ray starts.
    resource_plan: Key[Json | None] = Key(None)
    env_ceiling_steps_per_s: Key[float | None] = Key(None)
    env_ceiling: Key[Json | None] = Key(None)
    #: Pre-flight, env ceiling, Ray's start and building the actors, before the first step.
    startup_s: Key[float | None] = Key(None)
    #: The scale settings as RLlib ran them.
    scale: Key[Json | None] = Key(None)
    faults: Key[list[Json]] = Key([])
    #: ``{column: {n, mean, std, min, p50, max}}`` over the iterations that count.
    metrics: Key[dict[str, dict[str, float]]] = Key({})
    total_env_steps: Key[int | None] = Key(None)
    sampling_efficiency: Key[float | None] = Key(None)
    checkpoint: Key[str | None] = Key(None)
    #: The stop criteria and which one ended the run.
    stop: Key[Json | None] = Key(None)
    #: Whether the return target was reached (None without one).
    reached: Key[bool | None] = Key(None)
    time_to_target_s: Key[float | None] = Key(None)
    env_steps_to_target: Key[int | None] = Key(None)
    iterations_to_target: Key[int | None] = Key(None)
    wall_s_to_target: Key[float | None] = Key(None)
    return_at_target: Key[float | None] = Key(None)
    evaluation: Key[Json | None] = Key(None)


class RolloutRecord(_StageRecord):
    """``summary.json`` of ``stage=rollout`` (docs/rollout.md)."""

    explore: Key[bool | None] = Key(None)
    action_selection: Key[str | None] = Key(None)
    algorithm_started: Key[bool | None] = Key(None)
    #: The reloaded policy against the run's ``probe.npz``.
    probe: Key[Json | None] = Key(None)
    timer: Key[Json | None] = Key(None)
    executor: Key[Json | None] = Key(None)
    episodes_finished: Key[int | None] = Key(None)


class EdgeRecord(_StageRecord):
    """``summary.json`` of ``stage=edge`` (docs/edge.md)."""

    variant: Key[str | None] = Key(None)
    heads: Key[str | None] = Key(None)
    threads: Key[int | None] = Key(None)
    #: Greedy agreement, logit error and returns against the torch policy.
    fidelity: Key[Json | None] = Key(None)
    reference_returns: Key[list[float] | None] = Key(None)
    model_file: Key[str | None] = Key(None)
    model_size_bytes: Key[int | None] = Key(None)
    model_gzip_bytes: Key[int | None] = Key(None)
    weights: Key[Json | None] = Key(None)
    model_info: Key[Json | None] = Key(None)
    input: Key[Json | None] = Key(None)
    delegate: Key[Json | None] = Key(None)
    memory: Key[Json | None] = Key(None)
    export: Key[Json | None] = Key(None)
    calibration: Key[Json | None] = Key(None)
    edgetpu: Key[Json | None] = Key(None)


class ServeRecord(_StageRecord):
    """``summary.json`` of ``stage=serve`` (docs/serve.md)."""

    model_spec: Key[Json | None] = Key(None)
    #: The deployment's settings as Serve ran them.
    serve: Key[Json | None] = Key(None)
    baseline: Key[Json | None] = Key(None)
    generator: Key[Json | None] = Key(None)
    #: The highest offered rate whose p99 met the bound (MLPerf Server's rule).
    max_rate_under_slo: Key[Json | None] = Key(None)
    #: The replicas killed and the levels measured meanwhile.
    faults: Key[Json | None] = Key(None)
    requests: Key[int | None] = Key(None)
    levels: Key[int | None] = Key(None)
    network: Key[Json | None] = Key(None)


class EnvRecord(_StageRecord):
    """``summary.json`` of ``stage=env`` (docs/environment.md#env-stage)."""

    engine: Key[Json | None] = Key(None)
    calls: Key[int | None] = Key(None)
    seconds: Key[float | None] = Key(None)
    env_steps_per_s: Key[float | None] = Key(None)
    frames_per_step: Key[float | None] = Key(None)
    frames_per_s: Key[float | None] = Key(None)
    wall_steps_per_s: Key[float | None] = Key(None)
    episodes_ended: Key[int | None] = Key(None)
    cpu: Key[Json | None] = Key(None)
    rss_mb: Key[Json | None] = Key(None)


#: The record of each stage's ``summary.json``.
RECORDS: dict[str, type[RunRecord]] = {
    Stage.train: TrainRecord,
    Stage.rollout: RolloutRecord,
    Stage.edge: EdgeRecord,
    Stage.serve: ServeRecord,
    Stage.env: EnvRecord,
}

R = TypeVar("R", bound=RunRecord)


def record_class(stage: object) -> type[RunRecord]:
    """The record of a job of ``stage`` (a stage this rlperf does not know: the common one)."""
    return RECORDS.get(str(stage), RunRecord)


def as_record(record: RunRecord, kind: type[R]) -> R:
    """``record`` as the stage record ``kind`` (the same file: a view, never a copy)."""
    return record if isinstance(record, kind) else kind(record.data)


def from_json(data: dict[str, Any]) -> RunRecord:
    """The record of a parsed ``summary.json`` of any version (:data:`RECORD_VERSION`)."""
    # Version 1 is every file written so far (none carries VERSION_KEY): a later layout
    # migrates here, before the record is built, so that readers see one shape.
    return record_class(data.get("stage"))(data)


def read_record(folder: Path) -> RunRecord | None:
    """The record of ``folder/summary.json``; None when it is missing or not a JSON object."""
    try:
        data = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return from_json(data) if isinstance(data, dict) else None
