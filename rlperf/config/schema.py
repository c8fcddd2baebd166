"""Structured schemas for every config group, registered in one place.

The primary schema types every group, so each YAML option under
``conf/<group>/`` is merged into its group's dataclass: a misspelt key or a
wrong type fails at composition time with Hydra's message naming the key. Cross-group checks
(conv stack vs input size, GPU layout vs machine) live in
:mod:`rlperf.config.validate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

# Options that take one of a few values are Enum fields: composition rejects any
# other value with Hydra's message naming the key and the valid values. Each
# Enum is a StrEnum whose member names equal their values, so code compares a
# field with a plain string (``cfg.stage == "train"``) and JSON holds the string.


class Stage(StrEnum):
    """``stage``: what the job does."""

    train = "train"
    rollout = "rollout"
    edge = "edge"
    serve = "serve"


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


class Backend(StrEnum):
    """``backend.name``: what executes the policy."""

    rllib = "rllib"
    tflite_fp32 = "tflite_fp32"
    tflite_int8 = "tflite_int8"
    tflite_dynamic = "tflite_dynamic"
    tflite_fp16 = "tflite_fp16"
    edgetpu = "edgetpu"
    # Compressed variants, fine-tuned by distillation (rlperf/tflite/compress.py).
    tflite_qat = "tflite_qat"
    tflite_prune50 = "tflite_prune50"
    tflite_prune75 = "tflite_prune75"
    tflite_prune90 = "tflite_prune90"
    tflite_prune75_int8 = "tflite_prune75_int8"
    tflite_struct50 = "tflite_struct50"


class AlgoName(StrEnum):
    """``algo.name``: the RLlib algorithm; each has its own keys (its dataclass below)."""

    ppo = "ppo"
    appo = "appo"  # asynchronous PPO (V-trace, a target network), IMPALA's architecture
    impala = "impala"  # asynchronous actor-learner with V-trace
    dqn = "dqn"  # Q-learning from a replay buffer: Discrete actions
    sac = "sac"  # soft actor-critic from a replay buffer: Box actions


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

    uint8 = "uint8"
    int8 = "int8"


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


class ModelKind(StrEnum):
    """``model.kind``: the network family; each kind has its own keys (its dataclass below)."""

    vision = "vision"  # the study's conv VisionNetwork, for image observations
    mlp = "mlp"  # fully connected layers, for vector and Discrete observations


class Activation(StrEnum):
    """``model.activation`` of an MLP."""

    tanh = "tanh"
    relu = "relu"
    elu = "elu"
    silu = "silu"


@dataclass
class ModelConfig:
    """``model``: what every kind of network has. An option extends one kind's schema
    (``defaults: [/schema/model/<kind>@_here_, _self_]``), so a key of another kind is
    an error at composition."""

    name: str = MISSING
    kind: ModelKind = MISSING


@dataclass
class VisionModelConfig(ModelConfig):
    """``model.kind=vision``: the study's VisionNetwork geometry (image observations)."""

    kind: ModelKind = ModelKind.vision
    dim: int = 84
    framestack: int = 4
    # [[out_channels, [kh, kw], stride], ...]; the last layer is 'valid' and must reach 1x1.
    conv_filters: list[Any] = MISSING


@dataclass
class MlpModelConfig(ModelConfig):
    """``model.kind=mlp``: policy and value MLPs of their own (vector / Discrete observations).

    ``Discrete`` observations are one-hot encoded inside the network; a ``Box``
    action space gets a Gaussian head (mean and log-std), a ``Discrete`` one logits.
    """

    kind: ModelKind = ModelKind.mlp
    hiddens: list[int] = field(default_factory=lambda: [64, 64])
    activation: Activation = Activation.tanh


@dataclass
class GpuLayoutConfig:
    """``gpu_layout``: which GPUs Ray sees and how driver (learner) and workers share them."""

    name: str = MISSING
    visible_gpus: list[int] = field(default_factory=list)  # physical (NVML) indices
    mode: GpuLayoutMode = GpuLayoutMode.none
    # shared: the driver's fraction; workers split the rest. driver: ignored (all visible).
    driver_gpus: float = 0.0


#: ``env_runner.vectorize_mode``: RLlib's ``gym_env_vectorize_mode`` (gymnasium's
#: VectorizeMode): ``sync`` steps the sub-envs one after another in the env runner's
#: process; ``async`` runs each in a process of its own (AsyncVectorEnv). The
#: functional form because ``async`` is a Python keyword.
VectorizeMode = StrEnum("VectorizeMode", {"sync": "sync", "async": "async"})


@dataclass
class EnvRunnerConfig:
    """``env_runner``: what each of the ``workers`` env runners gets."""

    num_envs: int = 1
    num_cpus: float = 1.0
    vectorize_mode: VectorizeMode = VectorizeMode["sync"]  # type: ignore[valid-type]
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


class EnvKind(StrEnum):
    """``env.kind``: how the environment is built; each kind has its own keys."""

    atari = "atari"  # an ALE game with DeepMind-style preprocessing (rlperf.envs.atari)
    gym = "gym"  # any registered gymnasium id, as gymnasium makes it
    custom = "custom"  # a gymnasium.Env class named by entry point (docs/custom-env.md)


@dataclass
class EnvConfig:
    """``env``: what every kind of environment has. An option extends one kind's schema
    (``defaults: [/schema/env/<kind>@_here_, _self_]``), so ``env=cartpole`` shows and
    accepts no Atari key."""

    kind: EnvKind = MISSING
    # Agent steps per episode before a truncation (gymnasium TimeLimit); null = the env's own.
    max_episode_steps: int | None = None


@dataclass
class AtariEnvConfig(EnvConfig):
    """``env.kind=atari``: an ALE game and its preprocessing (docs/environment.md)."""

    kind: EnvKind = EnvKind.atari
    id: str = "ALE/Pong-v5"
    dim: int = "${model.dim}"  # type: ignore[assignment]
    framestack: int = "${model.framestack}"  # type: ignore[assignment]
    # ALE-level frameskip: an int, or [low, high] for a random low..high-1 per step
    # (the study's Pong-v0 used [2, 5]); checked by rlperf.config.validate.
    frameskip: Any = 1
    skip: int = 4
    repeat_action_probability: float = 0.0
    noop_max: int = 30
    episodic_life: bool = True
    fire_reset: bool = True


@dataclass
class GymEnvConfig(EnvConfig):
    """``env.kind=gym``: a registered gymnasium id, no preprocessing."""

    kind: EnvKind = EnvKind.gym
    id: str = MISSING
    # Keyword arguments of gymnasium.make (e.g. {g: 9.81} for Pendulum-v1); null = none.
    # Any rather than a dict field: env.config={...} on the command line must be able to
    # set keys the option does not list (a typed dict node refuses new keys).
    config: Any = None


@dataclass
class CustomEnvConfig(EnvConfig):
    """``env.kind=custom``: the user's gymnasium.Env class (docs/custom-env.md)."""

    kind: EnvKind = EnvKind.custom
    # package.module:Class, importable from the working directory or installed.
    entry_point: str = MISSING
    # Passed to the class as its only argument: Class(config); null = {}. Any, as for gym.
    config: Any = None


@dataclass
class AlgoConfig:
    """``algo``: what every algorithm has. An option extends its algorithm's schema
    (``defaults: [/schema/algo/<name>@_here_, _self_]``), so a PPO key given to DQN is
    an error at composition. Keys carry RLlib's names (docs/configuration.md#algo)."""

    name: AlgoName = MISSING
    gamma: float = 0.99
    grad_clip: float | None = None


@dataclass
class PpoAlgoConfig(AlgoConfig):
    """``algo=ppo``: the study's hyperparameters (RLlib 1.1 defaults)."""

    name: AlgoName = AlgoName.ppo
    train_batch_size: int = 4000
    rollout_fragment_length: Any = "auto"  # int or "auto" (the study's 200: see algo/ppo.yaml)
    minibatch_size: int = 128
    num_epochs: int = 30
    lr: float = 5e-5
    lambda_: float = 1.0
    clip_param: float = 0.3
    vf_clip_param: float = 10.0
    kl_coeff: float = 0.2
    kl_target: float = 0.01
    entropy_coeff: float = 0.0
    vf_loss_coeff: float = 1.0


@dataclass
class AsyncAlgoConfig(AlgoConfig):
    """What IMPALA and APPO share: asynchronous actor-learner with V-trace (RLlib 2.60
    defaults)."""

    train_batch_size: int = 500  # env steps per learner update (all learners together)
    rollout_fragment_length: Any = 50  # int or "auto"
    # train() loops training_step for at least this long (RLlib: 10 s) and at least
    # until this many env steps are sampled (RLlib: 0).
    min_time_s_per_iteration: float = 10.0
    min_sample_timesteps_per_iteration: int = 0
    lr: float = 5e-4
    grad_clip: float | None = 40.0
    vtrace_clip_rho_threshold: float = 1.0
    vtrace_clip_pg_rho_threshold: float = 1.0
    vf_loss_coeff: float = 0.5
    entropy_coeff: float = 0.01
    broadcast_interval: int = 1  # training_step calls between weight broadcasts
    num_epochs: int = 1
    # null = the whole batch; else a multiple of rollout_fragment_length.
    minibatch_size: int | None = None
    # RLlib 2.60 defaults to true (env runners pull weights from a state-server actor);
    # false: the driver pushes them. Measured on 2 cores: with true, no env steps in 16 s.
    use_env_runner_state_server: bool = False


@dataclass
class ImpalaAlgoConfig(AsyncAlgoConfig):
    """``algo=impala``: asynchronous actor-learner with V-trace."""

    name: AlgoName = AlgoName.impala
    learner_queue_size: int = 3  # batches waiting for a remote learner's thread


@dataclass
class AppoAlgoConfig(AsyncAlgoConfig):
    """``algo=appo``: asynchronous PPO (IMPALA's architecture plus PPO's clipped
    surrogate against a target network; batches are reused from a circular buffer)."""

    name: AlgoName = AlgoName.appo
    entropy_coeff: float = 0.0
    lambda_: float = 1.0
    clip_param: float = 0.4
    use_kl_loss: bool = False
    kl_coeff: float = 1.0
    kl_target: float = 0.01
    target_network_update_freq: int = 2
    tau: float = 1.0
    circular_buffer_num_batches: int = 8
    circular_buffer_iterations_per_batch: int = 2


@dataclass
class ReplayAlgoConfig(AlgoConfig):
    """What DQN and SAC share: an episode replay buffer in the driver."""

    train_batch_size: int = 32
    rollout_fragment_length: Any = "auto"
    replay_buffer_capacity: int = 50000  # RLlib: replay_buffer_config.capacity (env steps)
    num_steps_sampled_before_learning_starts: int = 1000
    # Trained / sampled steps; null = one update per sampled batch (RLlib's default).
    training_intensity: float | None = None
    n_step: int = 1
    target_network_update_freq: int = 500
    tau: float = 1.0
    min_sample_timesteps_per_iteration: int = 1000
    min_time_s_per_iteration: float | None = None


@dataclass
class DqnAlgoConfig(ReplayAlgoConfig):
    """``algo=dqn``: (double, dueling) Q-learning; ``Discrete`` actions (RLlib 2.60 defaults)."""

    name: AlgoName = AlgoName.dqn
    lr: float = 5e-4
    grad_clip: float | None = 40.0
    double_q: bool = True
    dueling: bool = True
    # epsilon-greedy schedule, [[env_step, epsilon], ...] interpolated linearly.
    epsilon: list[Any] = field(default_factory=lambda: [[0, 1.0], [10000, 0.05]])


@dataclass
class SacAlgoConfig(ReplayAlgoConfig):
    """``algo=sac``: soft actor-critic; ``Box`` actions (RLlib 2.60 defaults)."""

    name: AlgoName = AlgoName.sac
    train_batch_size: int = 256
    replay_buffer_capacity: int = 1000000
    num_steps_sampled_before_learning_starts: int = 1500
    target_network_update_freq: int = 0
    tau: float = 0.005
    min_sample_timesteps_per_iteration: int = 100
    min_time_s_per_iteration: float | None = 1.0
    actor_lr: float = 3e-5
    critic_lr: float = 3e-4
    alpha_lr: float = 3e-4
    initial_alpha: float = 1.0
    target_entropy: Any = "auto"  # a float, or "auto" (-|A|)
    twin_q: bool = True


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
    export_tolerance: float = 1e-4  # max abs logit error of the Keras rebuild vs torch
    cache_dir: str | None = None  # null = ~/.cache/rlperf/edge
    # int8 models' input/output type: uint8 (the study's and the Edge TPU's; docs/study.md)
    # or int8 (no uint8<->int8 QUANTIZE ops, so XNNPACK runs every op on CPU). Both feed
    # raw frames losslessly.
    int8_io: Int8Io = Int8Io.uint8
    xnnpack: bool = True  # apply LiteRT's XNNPACK delegate on CPU backends
    isolate: bool = True  # benchmark each variant in a fresh process (own peak memory)
    edgetpu_library: str = "libedgetpu.so.1"
    edgetpu_device: str | None = None  # e.g. ":0", "usb", "pci:0"; null = first found
    # The full-integer variant backend=edgetpu compiles (EDGETPU_SOURCES in
    # rlperf/config/validate.py): post-training int8, QAT, or 75 % pruning then int8.
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
class RlperfConfig:
    """The primary config; its groups come from ``conf/`` (:mod:`rlperf.config.search_path`)."""

    stage: Stage = Stage.train
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


#: The schema of each kind of a group with kinds, stored as ``schema/<group>/<kind>``
#: for the options' defaults lists (``- /schema/env/atari@_here_``).
KIND_SCHEMAS: dict[str, dict[str, type]] = {
    "env": {
        EnvKind.atari: AtariEnvConfig,
        EnvKind.gym: GymEnvConfig,
        EnvKind.custom: CustomEnvConfig,
    },
    "model": {ModelKind.vision: VisionModelConfig, ModelKind.mlp: MlpModelConfig},
    "algo": {
        AlgoName.ppo: PpoAlgoConfig,
        AlgoName.appo: AppoAlgoConfig,
        AlgoName.impala: ImpalaAlgoConfig,
        AlgoName.dqn: DqnAlgoConfig,
        AlgoName.sac: SacAlgoConfig,
    },
}

_registered = False


def register_configs() -> None:
    """Register the primary schema, which types every config group."""
    global _registered
    if _registered:
        return
    cs = ConfigStore.instance()
    cs.store(name="rlperf_schema", node=RlperfConfig)
    for group, schemas in KIND_SCHEMAS.items():
        for kind, node in schemas.items():
            cs.store(group=f"schema/{group}", name=kind, node=node)
    _registered = True
