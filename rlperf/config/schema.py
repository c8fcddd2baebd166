"""Structured schemas for every config group, registered in one place.

The primary schema types every group, so each YAML option under
``conf/<group>/`` is merged into its group's dataclass: a misspelt key or a
wrong type fails at composition time with Hydra's message naming the key. The groups
with kinds have a module each (:mod:`rlperf.config.schema_env`,
:mod:`~rlperf.config.schema_model`, :mod:`~rlperf.config.schema_algo`). Cross-group checks
(conv stack vs input size, GPU layout vs machine) live in
:mod:`rlperf.validation.validate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from rlperf.config.schema_algo import ALGO_SCHEMAS, AlgoConfig, gone_algorithm_hint
from rlperf.config.schema_env import ENV_SCHEMAS, EnvConfig
from rlperf.config.schema_model import MODEL_SCHEMAS, ModelConfig
from rlperf.config.schema_tracking import TrackingConfig
from rlperf.errors import add_message_hint
from rlperf.specs.backends import Backend
from rlperf.specs.stages import DEFAULT_STAGE, Stage

# Options that take one of a few values are Enum fields: composition rejects any
# other value with Hydra's message naming the key and the valid values. Each
# Enum is a StrEnum whose member names equal their values, so a field reads as a
# plain string and JSON holds the string. The enums of what a user picks by name
# (stage, backend.name, env.engine) key their specs in rlperf.specs.


class GpuLayoutMode(StrEnum):
    """``gpu_layout.mode``: who gets the visible GPUs (docs/configuration.md)."""

    none = "none"
    shared = "shared"
    driver = "driver"


class CpuAffinityMode(StrEnum):
    """``cpu_affinity.mode``: how Ray is started with respect to the CPUs."""

    unrestricted = "unrestricted"
    ray_cpus = "ray_cpus"
    pinned = "pinned"


class TargetJudge(StrEnum):
    """``train.stop.judge``: which return ``train.stop.episode_return`` is judged on."""

    eval = "eval"
    train = "train"


class Device(StrEnum):
    """``rollout.device``: where the driver's policy runs."""

    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class Heads(StrEnum):
    """``edge.heads``: which outputs the exported model computes."""

    policy = "policy"
    both = "both"


class ObservationPolicy(StrEnum):
    """Who plays while observation sets are recorded (``edge.*_policy``)."""

    random = "random"
    trained = "trained"


class ServeTransport(StrEnum):
    """``serve.transport``: how the load generator reaches the policy deployment."""

    http = "http"  # Serve's HTTP proxy on 127.0.0.1, a binary .npy body
    handle = "handle"  # Serve's Python DeploymentHandle, the same bytes


class Int8Io(StrEnum):
    """``edge.int8_io``: input/output type of full-integer models."""

    auto = "auto"  # int8 on CPU, uint8 for the Edge TPU (rlperf.tflite.convert.int8_io_for)
    uint8 = "uint8"
    int8 = "int8"


class InputScaling(StrEnum):
    """``edge.input_scaling``: how a full-integer model of Box observations quantizes them."""

    # each feature's calibrated range mapped onto [-1, 1] outside the graph, the inverse
    # folded into the first layer (rlperf.tflite.tflite_model.InputNormalization)
    per_feature = "per_feature"
    per_tensor = "per_tensor"  # one scale for every feature (TFLite's own)


class RunSelect(StrEnum):
    """``run_select``: which matching job of a sweep folder (``run=``) a downstream job takes.

    ``all`` takes every one: a downstream sweep has a cell per job, a single run
    needs exactly one (rlperf.runs.jobs.select_job says how the others pick).
    """

    all = "all"
    fastest = "fastest"
    best_return = "best_return"
    latest = "latest"


@dataclass
class RunMatchConfig:
    """``run_match``: the jobs of a sweep folder (``run=``) a downstream job may take.

    null = any value. The keys are what identifies a training job besides its
    model (``rlperf.runs.jobs.IDENTITY_KEYS``); an explicit ``model=`` of the
    downstream job matches the model.
    """

    study_training_row: str | None = None  # the row option the job was composed with
    seed: int | None = None
    workers: int | None = None
    gpu_layout: str | None = None  # gpu_layout.name
    cpu_affinity: str | None = None  # cpu_affinity.name
    algo: str | None = None  # algo.name
    env_id: str | None = None  # env.id (a custom env has none)


class Verbosity(StrEnum):
    """``verbosity``: how much the terminal shows (the job log keeps everything)."""

    quiet = "quiet"  # header, warnings and errors, the result summary (no progress)
    normal = "normal"  # + progress
    verbose = "verbose"  # + every log record and every third-party line (``-v``)


#: ``train.on_fault``: what a fault (an env runner or learner lost) does to the run.
#: ``continue``: record it, exclude the iterations it touched, go on; ``fail``: the run
#: fails (status failed, exit 1). Built with the functional API: OmegaConf matches
#: member *names*, and ``continue`` is a Python keyword.
OnFault = StrEnum("OnFault", [("continue", "continue"), ("fail", "fail")])  # type: ignore[misc]


@dataclass
class GpuLayoutConfig:
    """``gpu_layout``: which GPUs Ray sees and how driver (learner) and workers share them."""

    name: str = MISSING
    visible_gpus: list[int] = field(default_factory=list)  # physical (NVML) indices
    mode: GpuLayoutMode = GpuLayoutMode.none
    # shared: the driver's fraction; workers split the rest. driver: ignored (all visible).
    driver_gpus: float = 0.0


@dataclass
class EnvRunnerConfig:
    """``env_runner``: what each of the ``workers`` env runners gets."""

    num_envs: int = 1
    # Ray CPUs of each env runner; a threaded engine (env.threads) gets at least its threads.
    num_cpus: float = 1.0
    # torch intra-op threads in each env runner (its policy forward); null = as Ray
    # starts the actor (OMP_NUM_THREADS = its num_cpus, at least 1).
    torch_threads: int | None = None


@dataclass
class CpuAffinityConfig:
    """``cpu_affinity``: how Ray is started with respect to the machine's CPUs."""

    name: str = MISSING
    mode: CpuAffinityMode = CpuAffinityMode.unrestricted
    # CPUs Ray schedules on for ray_cpus / pinned; null = workers + 1 (the study's rule).
    num_cpus: int | None = None
    # pinned: first CPU of the mask (CPUs first_cpu .. first_cpu + num_cpus - 1).
    first_cpu: int = 0


@dataclass
class BackendConfig:
    """``backend``: what executes the policy (training always uses rllib)."""

    name: Backend = Backend.rllib


@dataclass
class EnvCeilingConfig:
    """``train.env_ceiling``: the raw speed of the run's env, the denominator of
    ``sampling_efficiency`` (:mod:`rlperf.envs.ceiling`)."""

    enabled: bool = True
    duration_s: float = 3.0  # random-action steps timed for this long, in one process
    cache_dir: str | None = None  # null = ~/.cache/rlperf/env_ceiling


@dataclass
class StopConfig:
    """``train.stop``: stop criteria besides the ``train.iterations`` cap; the first
    reached ends the run (:mod:`rlperf.training.target`). null = not set."""

    episode_return: float | None = None  # the target: a mean episode return
    env_steps: int | None = None  # budget of sampled env steps
    time_s: float | None = None  # budget of training seconds since the algorithm was built
    # 0.05: stop once the 95 % interval of the time per 1 000 env steps (over batch means of
    # the counted iterations, looked at after 8, 12, 18, ... of them) is within ±5 %.
    precision: float | None = None
    # eval: the mean return of greedy evaluation episodes (train.evaluation);
    # train: RLlib's smoothed return of the exploring training episodes.
    judge: TargetJudge = TargetJudge.eval


@dataclass
class EvaluationConfig:
    """``train.evaluation``: RLlib's evaluation, run when ``train.stop.episode_return``
    is judged on evaluation episodes (``train.stop.judge=eval``)."""

    interval: int = 1  # evaluate after every N-th training iteration
    episodes: int = 10  # episodes per evaluation (RLlib evaluation_duration)
    explore: bool = False  # false = greedy actions
    # Agent steps after which an evaluation episode is stopped (truncated); a round then
    # does not count toward the target. null = the env's own time limit, else 10 000.
    max_episode_steps: int | None = None


@dataclass
class ConsoleConfig:
    """``console``: the terminal while a job runs (every stage)."""

    # A phase that has run this many seconds without a progress line gets one saying what
    # runs, since when and the steps so far; 0 = never.
    heartbeat_s: float = 30.0


@dataclass
class TrainConfig:
    """``train``: the training job."""

    iterations: int = 20  # the cap; train.stop may end the run earlier
    # Warm-up iterations are flagged in metrics.csv and excluded from summaries:
    # the first `warmup_iterations`, and, if `warmup_until_first_episode`, every
    # iteration before the first one in which an episode finished (the study's rule,
    # which the study's presets select).
    warmup_iterations: int = 1
    warmup_until_first_episode: bool = False
    stop: StopConfig = field(default_factory=lambda: StopConfig())
    evaluation: EvaluationConfig = field(default_factory=lambda: EvaluationConfig())
    checkpoint_every: int = 0  # 0 = only at the end
    # An iteration an env-runner or learner fault touched, or that sampled nothing, is
    # flagged (excluded: fault / no_samples) and listed in summary.json "faults".
    # continue: go on (RLlib restarts the env runner); fail: the run fails.
    on_fault: OnFault = OnFault["continue"]  # type: ignore[valid-type]
    torch_threads: int | None = None  # torch intra-op threads in the driver; null = torch default
    env_ceiling: EnvCeilingConfig = field(default_factory=lambda: EnvCeilingConfig())


@dataclass
class RayConfig:
    """``ray``: how Ray is started (or which cluster is joined)."""

    address: str | None = None  # null = start a local Ray instance
    include_dashboard: bool = False
    # Let Ray schedule more CPU bundles than the machine has cores (small machines).
    overcommit_cpus: bool = False
    object_store_memory_mb: int | None = None
    log_to_driver: bool = False


@dataclass
class TelemetryConfig:
    """``telemetry``: background CPU/RAM/GPU sampling."""

    enabled: bool = True
    interval_s: float = 1.0
    # Where the RAPL counters of the CPU packages are (CPU energy); null: not read.
    powercap: str | None = "/sys/class/powercap"


@dataclass
class RolloutConfig:
    """``rollout``: the RLlib inference stage (``stage=rollout``)."""

    episodes: int = 10
    steps: int | None = None  # stop after this many steps instead of `episodes`
    warmup_steps: int = 100  # flagged and excluded from the latency summary
    explore: bool = False  # false = greedy (deterministic) actions
    torch_threads: int = 1
    # Where the driver's policy runs: auto | cpu | cuda. auto = cuda when gpu_layout
    # makes a GPU visible (as the study's RLlib 1.1 driver did), else cpu.
    device: Device = Device.auto
    # Start a PPO Algorithm with `workers` env runners and the GPU layout's resources
    # before acting (the study's setting); null = only when workers > 0.
    start_algorithm: bool | None = None
    # 0.05 (with `steps`, the cap): stop once the 95 % interval of the median action
    # latency, over windows of 100 steps (their medians' batch means), is within ±5 %.
    precision: float | None = None


@dataclass
class EdgeConfig:
    """``edge``: export to TFLite, quantize, compile for the Edge TPU, benchmark."""

    episodes: int = 3
    steps: int | None = None
    warmup_steps: int = 50
    threads: int = 1
    heads: Heads = Heads.policy  # both: logits and value
    calibration_size: int = 300
    calibration_policy: ObservationPolicy = ObservationPolicy.random
    calibration_seed: int = 0
    fidelity_observations: int = 300
    # Who plays while fidelity frames are taken.
    fidelity_policy: ObservationPolicy = ObservationPolicy.random
    fidelity_seed: int = 1
    # Minimum greedy-action agreement with the torch policy before a variant is flagged.
    fidelity_threshold: float = 0.9
    # Box policies: the largest p99 action error, relative to each dimension's range
    # (high - low), before a variant is flagged (docs/edge.md#continuous-actions).
    action_tolerance: float = 0.05
    export_tolerance: float = 1e-4  # max abs logit error of the Keras rebuild vs torch
    cache_dir: str | None = None  # null = ~/.cache/rlperf/edge
    # int8 models' input/output type: auto (int8 on CPU, uint8 for the Edge TPU), uint8
    # (the study's and the Edge TPU's; docs/study.md) or int8 (no uint8<->int8 QUANTIZE ops,
    # so XNNPACK runs every op on CPU). Both feed raw frames losslessly.
    int8_io: Int8Io = Int8Io.auto
    # Box observations of an int8 model: per_feature (each feature its own range, the
    # default) or per_tensor (one input scale for all; docs/edge.md#per-feature-input-scaling).
    input_scaling: InputScaling = InputScaling.per_feature
    xnnpack: bool = True  # apply LiteRT's XNNPACK delegate on CPU backends
    isolate: bool = True  # benchmark each variant in a fresh process (own peak memory)
    edgetpu_library: str = "libedgetpu.so.1"
    edgetpu_device: str | None = None  # e.g. ":0", "usb", "pci:0"; null = first found
    # The full-integer variant backend=edgetpu compiles (EDGETPU_SOURCES in
    # rlperf/specs/backends.py): post-training int8, QAT, or 75 % pruning then int8.
    edgetpu_source: str = "tflite_int8"
    # Fine-tuning of the compressed backends (tflite_qat, tflite_prune*, tflite_struct50):
    # distillation from the torch policy on the calibration set (docs/compression.md).
    finetune_steps: int = 600
    # One learning rate or a list: one fine-tune each, the lowest held-out error kept
    # (CartPole's MLP wants 3e-3, model1 3e-4). Any: a float or a list of floats.
    finetune_lr: Any = field(default_factory=lambda: [3.0e-3, 1.0e-3, 3.0e-4])
    finetune_batch: int = 32


@dataclass
class ServeConfig:
    """``serve``: a policy behind Ray Serve, driven by rlperf's load generator (docs/serve.md)."""

    # The deployment (sweepable axes).
    replicas: int = 1
    cpus_per_replica: float = 1.0  # Ray CPUs per policy replica (the echo replica asks for none)
    threads: int = 1  # torch / LiteRT threads of the model, in each replica and in-process
    max_ongoing_requests: int = 8  # per replica; more wait in Serve's queue
    max_queued_requests: int = -1  # -1 = unbounded queue; >= 0 rejects beyond it (HTTP 503)
    max_batch_size: int = 1  # dynamic batching: 1 = off
    batch_wait_timeout_s: float = 0.0  # how long a batch waits to fill
    transport: ServeTransport = ServeTransport.http  # of the load levels
    # The load.
    clients: list[int] = field(default_factory=lambda: [1, 4])  # closed-loop levels
    rates: list[float] = field(default_factory=lambda: [25.0, 50.0, 100.0])  # open loop, req/s
    # Measured requests per level (warm-up not included); 368 is the least that bounds a p99
    # at 95 % (fewer: the upper bound is infinite and no level can meet serve.slo_ms).
    requests_per_level: int = 400
    warmup_requests: int = 30  # per level, sent first, recorded and excluded
    baseline_requests: int = 200  # in-process / handle / HTTP / echo, one client each
    observations: int = 64  # real observations from the env, sent round-robin
    observation_seed: int = 0
    request_timeout_s: float = 5.0
    # A level whose send lag (sent - scheduled) exceeds this at p99 is invalid.
    max_send_lag_ms: float = 5.0
    slo_ms: float = 20.0  # p99 bound of max_rate_under_slo
    confidence: float = 0.95  # of the percentile intervals
    http_port: int = 0  # 0 = a free port
    # Kill one policy replica halfway through this open-loop level (index into rates).
    kill_replica_level: int | None = None


@dataclass
class EnvBenchConfig:
    """``env_bench``: raw env throughput (``stage=env``, docs/environment.md#env-stage).

    Steps count every env of the engine (``env_runner.num_envs`` per engine step).
    """

    steps: int = 20000  # env steps timed, after the warm-up
    warmup_steps: int = 1000  # env steps stepped first, flagged and excluded
    windows: int = 20  # rows of metrics.csv the timed steps are cut into (progress, intervals)
    torch_threads: int = 1  # the policy's threads with run= (its time is not the env's)
    # 0.05: stop after the window at which the 95 % interval of the time per 1 000 env steps
    # (over batch means of the windows, looked at after 8, 12, 18, ... of them) is within ±5 %.
    precision: float | None = None


@dataclass
class RlperfConfig:
    """The primary config; its groups come from ``conf/`` (:mod:`rlperf.config.search_path`)."""

    stage: Stage = DEFAULT_STAGE
    seed: int = 0
    model: ModelConfig = MISSING
    gpu_layout: GpuLayoutConfig = MISSING
    # Number of RLlib env runners (the study's rollout workers). A plain integer,
    # not a config group: Hydra cannot select a group option named by a number
    # from the command line, and `workers=1,2,4` must sweep.
    workers: int = 1
    # RLlib num_learners: 0 = the learner runs in the driver process; N = N data-parallel
    # learner actors, each with a CPU (or a GPU) of its own. null = as the GPU layout
    # says (0, or one learner per GPU where the driver has several).
    learners: int | None = None
    env_runner: EnvRunnerConfig = field(default_factory=EnvRunnerConfig)
    cpu_affinity: CpuAffinityConfig = MISSING
    backend: BackendConfig = MISSING
    env: EnvConfig = MISSING
    algo: AlgoConfig = MISSING
    train: TrainConfig = field(default_factory=TrainConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    # What the terminal shows; `-v` on the command line is verbosity=verbose.
    verbosity: Verbosity = Verbosity.normal
    console: ConsoleConfig = field(default_factory=ConsoleConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    # Downstream stages: the upstream run folder, or a checkpoint path.
    run: str | None = None
    # Downstream stages over a sweep folder: which of its training jobs (docs/sweeps.md).
    run_match: RunMatchConfig = field(default_factory=RunMatchConfig)
    run_select: RunSelect = RunSelect.all
    checkpoint: str | None = None
    model_path: str | None = None  # stage=edge / serve: an existing .tflite file
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    edge: EdgeConfig = field(default_factory=EdgeConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)
    env_bench: EnvBenchConfig = field(default_factory=EnvBenchConfig)


#: The schema of each kind of a group with kinds, stored as ``schema/<group>/<kind>``
#: for the options' defaults lists (``- /schema/env/atari@_here_``).
KIND_SCHEMAS: dict[str, dict[str, type]] = {
    "env": dict(ENV_SCHEMAS),
    "model": dict(MODEL_SCHEMAS),
    "algo": dict(ALGO_SCHEMAS),
}


def kind_schema_hint(cause: BaseException | None) -> str:
    """A key unknown to a group's base schema (``ModelConfig``, ``EnvConfig``, ...): the
    option does not name the schema of its kind first (docs/configuration.md)."""
    object_type = getattr(cause, "object_type", None)
    for group, schemas in KIND_SCHEMAS.items():
        bases = {base for schema in schemas.values() for base in schema.__bases__}
        if object_type in bases:
            kinds = ", ".join(f"/schema/{group}/{kind}@_here_" for kind in schemas)
            return (f"; a {group} option starts with 'defaults: [<its kind's schema>, _self_]'"
                    f" naming one of {kinds} (docs/configuration.md)")  # fmt: skip
    return ""


_registered = False


def register_configs() -> None:
    """Register the primary schema, which types every config group, and the hint a
    composition error gets when an option lacks its kind's schema."""
    global _registered
    if _registered:
        return
    add_message_hint(kind_schema_hint)
    add_message_hint(gone_algorithm_hint)
    cs = ConfigStore.instance()
    cs.store(name="rlperf_schema", node=RlperfConfig)
    for group, schemas in KIND_SCHEMAS.items():
        for kind, node in schemas.items():
            cs.store(group=f"schema/{group}", name=kind, node=node)
    _registered = True
