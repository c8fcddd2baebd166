"""One spec per stage (``stage=<name>``): what it runs, reads, checks, says and reports.

Every table about stages is derived from :data:`STAGE_SPECS`: the entry point the job
wrapper runs (:mod:`rlperf.stages`), the validator (:mod:`rlperf.validation.validate`), the
keys only some stages read (``rlperf.cli``'s warning), the pre-flight
(:func:`rlperf.resources.plan.check_feasibility`), what a sweep's trial asks Tune for
(:mod:`rlperf.sweep.resources`), the terminal's header and summary
(:mod:`rlperf.console.text`), the rows tracking sends (:mod:`rlperf.tracking.record`)
and the report's comparison family and default objective.

Adding a stage: its package with the entry point, its line here, its schema dataclass
(the config node; the schema sits below every stage), its validator and docs
(docs/development.md#adding-a-stage). The entry point and the validator are named by
``module:function`` and imported only when that stage runs, as here nothing above the
standard library is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum, auto

from rlperf.layout import LEVELS_FILE, METRICS_FILE, STEPS_FILE
from rlperf.vocabulary import Family, Objective


class Stage(StrEnum):
    """``stage``: what the job does (one :class:`StageSpec` each)."""

    train = auto()
    rollout = auto()
    edge = auto()
    serve = auto()
    env = auto()


class Feasibility(StrEnum):
    """What a stage asks of the machine, checked before it starts
    (:func:`rlperf.resources.plan.check_feasibility`)."""

    env_runners = auto()  # the resource plan's env runners and learners
    engine_threads = auto()  # the env engine's threads alone (no env runners start)
    serve_replicas = auto()  # Serve's replicas and their CPUs


class TrialRequest(StrEnum):
    """What a sweep's trial of the stage asks Tune for (:mod:`rlperf.sweep.resources`)."""

    algorithm = auto()  # what its RLlib algorithm starts (env runners, learners)
    engine = auto()  # the CPUs of the env engine's threads
    one_cpu = auto()  # one CPU (TFLite, Serve: their own processes)


class EnvSource(StrEnum):
    """Which env a job of the stage plays, for its recorded env protocol."""

    config = auto()  # its own config's ``env`` (training)
    upstream = auto()  # the upstream run's env, as the stage resolved it (``summary["env"]``)
    none = auto()  # no env (serve answers requests)


#: Keys every downstream stage reads: the upstream run and which of a sweep's jobs.
UPSTREAM_KEYS = ("run", "run_match", "run_select", "checkpoint")


@dataclass(frozen=True)
class StageSpec:
    """One ``stage``.

    ``reads``: the config nodes and keys that this stage reads and some other stage does
    not (a command-line override of one in another stage's run gets a warning).
    ``header``: what the terminal's first line names, ``(label, config key)``.
    ``counts``: what its summary line counts, ``(summary.json key, label)``; a dotted key
    reads a nested value. ``rows_file``: the result file of its rows, which tracking
    places on a step axis and the report requires of a completed job. ``family``: the
    report's comparison family; ``objective``: the family's default objective (``None``:
    judged otherwise, as serve on its rate under the latency bound).
    """

    name: str  # a Stage, held as the plain string
    entry: str  # module:function of the entry point, (cfg, out_dir, ctx) -> summary
    validator: str  # module:function, (cfg) -> None, raising ConfigError
    node: str  # its own config node
    reads: tuple[str, ...]
    feasibility: Feasibility | None
    trial: TrialRequest
    env_source: EnvSource
    header: tuple[tuple[str, str], ...]
    counts: tuple[tuple[str, str], ...]
    rows_file: str
    family: Family
    objective: Objective | None
    trains: bool = False  # it trains a policy: its folder is what downstream stages read
    serves: bool = False  # answers requests over a server: its headline is the server's
    #: Times the env alone: no env runners, learner or policy backend start, and it acts at
    #: random unless ``run=`` gives it a policy.
    env_only: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", str(self.name))


#: A job that benchmarks a trained policy (edge, serve): where it comes from, its backend.
_POLICY_HEADER = (("run", "run"), ("model_path", "model_path"), ("backend", "backend.name"))

#: Every stage, in the order the docs list them.
STAGE_SPECS: tuple[StageSpec, ...] = (
    StageSpec(
        Stage.train,
        entry="rlperf.training.training_job:run_training",
        validator="rlperf.validation.stages:validate_train",
        node="train",
        reads=("train",),
        feasibility=Feasibility.env_runners,
        trial=TrialRequest.algorithm,
        env_source=EnvSource.config,
        header=(
            ("model", "model.name"),
            ("env", "env.id"),
            ("algo", "algo.name"),
            ("workers", "workers"),
            ("gpu_layout", "gpu_layout.name"),
            ("cpu_affinity", "cpu_affinity.name"),
            ("iterations", "train.iterations"),
        ),
        counts=(("iterations", "iteration(s)"),),
        rows_file=METRICS_FILE,
        family=Family.training,
        objective=Objective.env_steps,
        trains=True,
    ),
    StageSpec(
        Stage.rollout,
        entry="rlperf.rollout.rollout_job:run_rollout",
        validator="rlperf.validation.stages:validate_rollout",
        node="rollout",
        reads=("rollout", *UPSTREAM_KEYS),
        feasibility=None,
        trial=TrialRequest.algorithm,
        env_source=EnvSource.upstream,
        header=(("run", "run"), ("checkpoint", "checkpoint"), ("workers", "workers")),
        counts=(("steps", "step(s)"), ("episodes.count", "episode(s)")),
        rows_file=STEPS_FILE,
        family=Family.inference,
        objective=Objective.latency,
    ),
    StageSpec(
        Stage.edge,
        entry="rlperf.edge.edge_job:run_edge",
        validator="rlperf.validation.edge:validate_edge",
        node="edge",
        reads=("edge", *UPSTREAM_KEYS, "model_path"),
        feasibility=None,
        trial=TrialRequest.one_cpu,
        env_source=EnvSource.upstream,
        header=_POLICY_HEADER,
        counts=(("steps", "step(s)"), ("episodes.count", "episode(s)")),
        rows_file=STEPS_FILE,
        family=Family.inference,
        objective=Objective.latency,
    ),
    StageSpec(
        Stage.serve,
        entry="rlperf.serve.serve_job:run_serve",
        validator="rlperf.validation.stages:validate_serve",
        node="serve",
        # Serve builds its TFLite models with the edge stage's settings.
        reads=("serve", "edge", *UPSTREAM_KEYS, "model_path"),
        feasibility=Feasibility.serve_replicas,
        trial=TrialRequest.one_cpu,
        env_source=EnvSource.none,
        header=_POLICY_HEADER,
        counts=(("levels", "level(s)"), ("requests", "request(s)")),
        rows_file=LEVELS_FILE,
        family=Family.serve,
        objective=None,
        serves=True,
    ),
    StageSpec(
        Stage.env,
        entry="rlperf.env_bench.env_job:run_env_bench",
        validator="rlperf.validation.stages:validate_env_stage",
        node="env_bench",
        reads=("env_bench", *UPSTREAM_KEYS),
        feasibility=Feasibility.engine_threads,
        trial=TrialRequest.engine,
        env_source=EnvSource.upstream,
        header=(
            ("env", "env.id"),
            ("engine", "env.engine"),
            ("num_envs", "env_runner.num_envs"),
            ("threads", "env.threads"),
            ("run", "run"),
        ),
        counts=(("steps", "env steps timed"),),
        rows_file=METRICS_FILE,
        family=Family.env,
        objective=Objective.env_steps,
        env_only=True,
    ),
)

#: ``stage`` -> its spec.
STAGES: dict[str, StageSpec] = {spec.name: spec for spec in STAGE_SPECS}
if list(STAGES) != list(Stage):
    raise ValueError(f"STAGE_SPECS {list(STAGES)} must list every Stage once: {list(Stage)}")

#: The stage of a job that does not say (the primary config's default; older runs).
DEFAULT_STAGE = Stage.train

#: Each stage-specific config node or key -> the stages that read it, in stage order.
READ_BY: dict[str, tuple[str, ...]] = {
    key: tuple(s.name for s in STAGE_SPECS if key in s.reads)
    for key in dict.fromkeys(k for s in STAGE_SPECS for k in s.reads)
}

#: The report's comparison family of each stage.
STAGE_FAMILY: dict[str, Family] = {s.name: s.family for s in STAGE_SPECS}

#: Each family's default objective, where it is ranked on one.
FAMILY_OBJECTIVE: dict[str, Objective] = {s.family: s.objective for s in STAGE_SPECS if s.objective}


def stage_spec(name: object) -> StageSpec:
    """The spec of stage ``name`` (a :class:`Stage` or its string)."""
    try:
        return STAGES[str(name)]
    except KeyError:
        raise KeyError(f"stage={name!r} is none of {', '.join(STAGES)}") from None


def trains(stage: object) -> bool:
    """Whether ``stage`` (any value a job folder may hold, None too) trains a policy: its
    folder is what downstream stages read."""
    spec = STAGES.get(str(stage))
    return spec is not None and spec.trains
