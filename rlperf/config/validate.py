"""One validation step over the composed config, before anything expensive starts.

Allowed values of single keys are Enum fields of the schema
(:mod:`rlperf.config.schema`), so composition already rejects them. Checks that
need several keys or groups at once (the conv stack against the input size,
the GPU layout against the workers, what a stage needs) live here: common
checks, then one validator per stage (:data:`STAGE_VALIDATORS`). Every error
names the keys involved, the value and what would be valid.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from rlperf.errors import ConfigError
from rlperf.models.shapes import ConvStackError, conv_stack_shapes


def _positive(key: str, value: Any, allow_zero: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    ok = ok and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{key}={value!r} is not valid; it must be a number {bound}")


def validate_model(cfg: DictConfig) -> None:
    """``model.*``: the kind's geometry (vision: the conv stack reaches 1x1 for
    ``model.dim`` and the Atari frame matches; mlp: positive layer sizes)."""
    kind = str(OmegaConf.select(cfg, "model.kind", default=None) or "vision")
    if kind == "mlp":
        hiddens = list(cfg.model.hiddens)
        if any(not isinstance(h, int) or isinstance(h, bool) or h < 1 for h in hiddens):
            raise ConfigError(
                f"model.hiddens={hiddens} must be a list of positive layer sizes (e.g. [64, 64])"
            )
        return
    _positive("model.dim", cfg.model.dim)
    _positive("model.framestack", cfg.model.framestack)
    try:
        conv_stack_shapes(cfg.model.dim, cfg.model.framestack, list(cfg.model.conv_filters))
    except ConvStackError as exc:
        raise ConfigError(f"model={cfg.model.name}: {exc}") from exc
    if _env_kind(cfg) != "atari":
        return  # the env's observations are checked against the model by validate_env_model
    if cfg.env.dim != cfg.model.dim:
        raise ConfigError(
            f"env.dim={cfg.env.dim} differs from model.dim={cfg.model.dim}; the network "
            f"input must equal the frame size (leave env.dim at its default ${{model.dim}})"
        )
    if cfg.env.framestack != cfg.model.framestack:
        raise ConfigError(
            f"env.framestack={cfg.env.framestack} differs from model.framestack="
            f"{cfg.model.framestack}; they must be equal"
        )


def _env_kind(cfg: DictConfig) -> str:
    return str(OmegaConf.select(cfg, "env.kind", default=None) or "atari")


def validate_env(cfg: DictConfig) -> None:
    """``env.*`` of each kind, without building the env (that is :func:`validate_env_model`)."""
    kind = _env_kind(cfg)
    env = cfg.env
    if env.get("max_episode_steps") is not None:
        _positive("env.max_episode_steps", env.max_episode_steps)
    if kind == "atari":
        fs = env.frameskip
        pair = OmegaConf.is_list(fs) or isinstance(fs, list | tuple)
        ok = (isinstance(fs, int) and not isinstance(fs, bool) and fs >= 1) or (
            pair
            and len(fs) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in fs)
            and 1 <= fs[0] < fs[1]
        )
        if not ok:
            raise ConfigError(
                f"env.frameskip={fs!r} must be an int >= 1 or a pair [low, high] with "
                f"1 <= low < high (ALE draws low..high-1 frames per step, e.g. the study's [2, 5])"
            )
    elif env.config is not None and not OmegaConf.is_dict(env.config):
        raise ConfigError(
            f"env.config={env.config!r} must be a mapping (env.config={{key: value}}) or null"
        )
    elif OmegaConf.is_missing(env, "id" if kind == "gym" else "entry_point"):
        key = "id" if kind == "gym" else "entry_point"
        example = "Acrobot-v1" if kind == "gym" else "my_envs.grid:GridWorld"
        raise ConfigError(f"env.kind={kind} needs env.{key} (e.g. env.{key}={example})")


def validate_env_model(cfg: DictConfig) -> None:
    """Build and check the env (:func:`rlperf.envs.check.check_env`: ids, a user's class,
    its spaces, reset and step), then check the model against its spaces.

    Imports gymnasium (and the user's module); no Ray. Raises :class:`ConfigError`
    (an :class:`~rlperf.envs.check.EnvCheckError` for the env) naming the keys.
    """
    from rlperf.envs.check import check_env
    from rlperf.models.spaces import ModelSpaceError, check_model_spaces

    model_kind = str(OmegaConf.select(cfg, "model.kind", default=None) or "vision")
    if _env_kind(cfg) == "atari" and model_kind != "vision":
        # Checked before the env is resolved: its frame size follows model.dim.
        raise ConfigError(
            f"model={cfg.model.name} (an MLP for vector or Discrete observations) cannot be "
            f"used with env.id={cfg.env.id}: an Atari env gives image frames "
            f"(Box(dim x dim x framestack, uint8)); use model=model1 (or tiny, model2..model6)"
        )
    env = cast(dict[str, Any], OmegaConf.to_container(cfg.env, resolve=True))
    report = check_env(env)
    validate_algo_actions(cfg, report.action_space, report.name)
    model = OmegaConf.to_container(cfg.model, resolve=True)
    assert isinstance(model, dict)
    try:
        check_model_spaces(model, report.observation_space, report.action_space, report.name)
    except ModelSpaceError as exc:
        raise ConfigError(str(exc)) from exc


def validate_gpu_layout(cfg: DictConfig) -> None:
    """``gpu_layout.*``: mode, visible GPUs and driver fraction are consistent."""
    gl = cfg.gpu_layout
    visible = list(gl.visible_gpus)
    if len(set(visible)) != len(visible) or any(
        not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in visible
    ):
        raise ConfigError(
            f"gpu_layout.visible_gpus={visible} must be distinct non-negative GPU indices"
        )
    if gl.mode == "none" and visible:
        raise ConfigError(
            f"gpu_layout.mode=none with gpu_layout.visible_gpus={visible}: use mode shared "
            f"or driver to give GPUs to Ray, or an empty list"
        )
    if gl.mode != "none" and not visible:
        raise ConfigError(
            f"gpu_layout.mode={gl.mode} needs at least one GPU in gpu_layout.visible_gpus"
        )
    if gl.mode == "shared":
        if not 0 < gl.driver_gpus < len(visible):
            raise ConfigError(
                f"gpu_layout.driver_gpus={gl.driver_gpus} with mode=shared must be in "
                f"(0, {len(visible)}): the driver takes a fraction, the workers the rest"
            )
        if cfg.workers == 0:
            raise ConfigError(
                f"gpu_layout={gl.name} (mode=shared) with workers=0: there are no workers to "
                f"share the GPUs with; use gpu_layout={gl.name}_driver or workers >= 1"
            )
    from rlperf.resources.plan import gpu_fractions, learner_split

    driver, _ = gpu_fractions(gl.mode, len(visible), float(gl.driver_gpus), int(cfg.workers))
    try:
        learner_split(driver, cfg.learners, str(cfg.algo.name))
    except ValueError as exc:
        raise ConfigError(f"gpu_layout={gl.name}: {exc}") from exc


def validate_resources(cfg: DictConfig) -> None:
    """``workers``, ``env_runner.*``, ``cpu_affinity.*``."""
    if not isinstance(cfg.workers, int) or cfg.workers < 0:
        raise ConfigError(f"workers={cfg.workers!r} must be an integer >= 0")
    _positive("env_runner.num_envs", cfg.env_runner.num_envs)
    _positive("env_runner.num_cpus", cfg.env_runner.num_cpus, allow_zero=True)
    if cfg.env_runner.torch_threads is not None:
        _positive("env_runner.torch_threads", cfg.env_runner.torch_threads)
    if cfg.learners is not None and (
        not isinstance(cfg.learners, int) or isinstance(cfg.learners, bool) or cfg.learners < 0
    ):
        raise ConfigError(
            f"learners={cfg.learners!r} must be null (the algorithm's and GPU layout's default) "
            f"or an integer >= 0 (0: the learner runs in the driver; N: N learner actors)"
        )
    aff = cfg.cpu_affinity
    if aff.num_cpus is not None:
        _positive("cpu_affinity.num_cpus", aff.num_cpus)
    _positive("cpu_affinity.first_cpu", aff.first_cpu, allow_zero=True)
    if cfg.ray.address is not None and aff.mode != "unrestricted":
        raise ConfigError(
            f"cpu_affinity={aff.name} changes how Ray is started, but ray.address="
            f"{cfg.ray.address!r} joins an existing cluster; use cpu_affinity=unrestricted"
        )


def _fraction(key: str, value: Any, low_open: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    ok = ok and (0 < value <= 1 if low_open else 0 <= value <= 1)
    if not ok:
        raise ConfigError(f"{key}={value!r} must be in {'(0, 1]' if low_open else '[0, 1]'}")


def validate_algo(cfg: DictConfig) -> None:
    """``algo.*``: what every algorithm has, then its own keys (:data:`ALGO_VALIDATORS`)."""
    a = cfg.algo
    _positive("algo.train_batch_size", a.train_batch_size)
    rfl = a.rollout_fragment_length
    if rfl != "auto" and not (isinstance(rfl, int) and rfl > 0):
        raise ConfigError(
            f"algo.rollout_fragment_length={rfl!r} must be a positive integer or 'auto'"
        )
    for key in ("lr", "actor_lr", "critic_lr", "alpha_lr"):
        if key in a:
            _positive(f"algo.{key}", a[key])
    for key in ("gamma", "lambda_"):
        if key in a:
            _fraction(f"algo.{key}", a[key])
    if a.grad_clip is not None:
        _positive("algo.grad_clip", a.grad_clip)
    ALGO_VALIDATORS[str(a.name)](cfg)


def _validate_ppo(cfg: DictConfig) -> None:
    a = cfg.algo
    _positive("algo.minibatch_size", a.minibatch_size)
    _positive("algo.num_epochs", a.num_epochs)
    if a.minibatch_size > a.train_batch_size:
        raise ConfigError(
            f"algo.minibatch_size={a.minibatch_size} exceeds algo.train_batch_size="
            f"{a.train_batch_size}"
        )


def _validate_async(cfg: DictConfig) -> None:
    """IMPALA and APPO."""
    a = cfg.algo
    _positive("algo.min_time_s_per_iteration", a.min_time_s_per_iteration, allow_zero=True)
    _positive("algo.min_sample_timesteps_per_iteration", a.min_sample_timesteps_per_iteration, True)
    _positive("algo.num_epochs", a.num_epochs)
    _positive("algo.broadcast_interval", a.broadcast_interval)
    mb = a.minibatch_size
    rfl = a.rollout_fragment_length
    fits = isinstance(mb, int) and 0 < mb <= a.train_batch_size and isinstance(rfl, int)
    if mb is not None and not (fits and mb % rfl == 0):
        raise ConfigError(
            f"algo.minibatch_size={mb!r} must be null (the whole batch) or a multiple of "
            f"algo.rollout_fragment_length={a.rollout_fragment_length} up to "
            f"algo.train_batch_size={a.train_batch_size}"
        )
    if "learner_queue_size" in a:
        _positive("algo.learner_queue_size", a.learner_queue_size)
    if a.name == "appo":
        _positive("algo.clip_param", a.clip_param)
        _fraction("algo.tau", a.tau, low_open=True)
        _positive("algo.target_network_update_freq", a.target_network_update_freq)
        _positive("algo.circular_buffer_num_batches", a.circular_buffer_num_batches)
        _positive(
            "algo.circular_buffer_iterations_per_batch", a.circular_buffer_iterations_per_batch
        )


def _validate_replay(cfg: DictConfig) -> None:
    """DQN and SAC: replay keys, and RLlib's MLP modules (``model.kind=mlp``)."""
    a = cfg.algo
    kind = str(OmegaConf.select(cfg, "model.kind", default=None) or "vision")
    if kind != "mlp":
        raise ConfigError(
            f"algo={a.name} with model={cfg.model.name} (kind {kind}): rlperf runs {a.name} on "
            f"RLlib's own networks shaped by an MLP model; use model=mlp64 (or mlp256). "
            f"Image observations (Atari) with {a.name} are not supported yet"
        )
    if a.replay_buffer_capacity < a.train_batch_size:
        raise ConfigError(
            f"algo.replay_buffer_capacity={a.replay_buffer_capacity} is smaller than "
            f"algo.train_batch_size={a.train_batch_size}; it must hold at least one batch"
        )
    _positive("algo.n_step", a.n_step)
    _fraction("algo.tau", a.tau, low_open=True)
    for key in ("num_steps_sampled_before_learning_starts", "target_network_update_freq"):
        _positive(f"algo.{key}", a[key], allow_zero=True)
    _positive("algo.min_sample_timesteps_per_iteration", a.min_sample_timesteps_per_iteration, True)
    for key in ("training_intensity", "min_time_s_per_iteration"):
        if a[key] is not None:
            _positive(f"algo.{key}", a[key], allow_zero=key != "training_intensity")
    if a.name == "dqn":
        _validate_epsilon(list(a.epsilon))
    elif a.target_entropy != "auto" and not isinstance(a.target_entropy, int | float):
        raise ConfigError(
            f"algo.target_entropy={a.target_entropy!r} must be 'auto' (-dim(actions)) or a number"
        )


def _validate_epsilon(schedule: list[Any]) -> None:
    ok = bool(schedule) and all(
        len(p) == 2 and isinstance(p[0], int) and isinstance(p[1], int | float) and 0 <= p[1] <= 1
        for p in schedule
    )
    ok = ok and all(a[0] < b[0] for a, b in zip(schedule, schedule[1:], strict=False))
    if not ok:
        raise ConfigError(
            f"algo.epsilon={schedule} must be [[env_step, epsilon], ...] with increasing "
            f"steps and epsilon in [0, 1] (e.g. [[0, 1.0], [10000, 0.05]])"
        )


#: The algorithm's own checks (``algo.name``), after the ones every algorithm has.
ALGO_VALIDATORS: dict[str, Callable[[DictConfig], None]] = {
    "ppo": _validate_ppo,
    "appo": _validate_async,
    "impala": _validate_async,
    "dqn": _validate_replay,
    "sac": _validate_replay,
}

#: The action space each algorithm needs: (space class name, a fitting env, another algo).
ALGO_ACTIONS = {
    "dqn": ("Discrete", "env=cartpole (or frozenlake)", "algo=sac for continuous actions"),
    "sac": ("Box", "env=pendulum", "algo=dqn or ppo for discrete actions"),
}


def validate_algo_actions(cfg: DictConfig, action_space: Any, env_name: str) -> None:
    """DQN needs ``Discrete`` actions, SAC a ``Box`` (checked on the built env's space)."""
    from rlperf.models.spaces import describe_space

    name = str(cfg.algo.name)
    if name not in ALGO_ACTIONS:
        return
    needed, env_hint, algo_hint = ALGO_ACTIONS[name]
    if type(action_space).__name__ != needed:
        raise ConfigError(
            f"algo={name} needs {needed} actions, but {env_name} has actions "
            f"{describe_space(action_space)}; use {env_hint}, or {algo_hint}"
        )


def validate_telemetry(cfg: DictConfig) -> None:
    """``telemetry.*``."""
    _positive("telemetry.interval_s", cfg.telemetry.interval_s)


def validate_train(cfg: DictConfig) -> None:
    """``stage=train``: ``train.*``; training runs in RLlib; the env builds and fits the model."""
    if cfg.backend.name != "rllib":
        raise ConfigError(
            f"backend={cfg.backend.name} with stage=train: training runs in RLlib; "
            f"use backend=rllib, or stage=edge to benchmark {cfg.backend.name}"
        )
    _positive("train.iterations", cfg.train.iterations)
    _positive("train.warmup_iterations", cfg.train.warmup_iterations, allow_zero=True)
    _positive("train.checkpoint_every", cfg.train.checkpoint_every, allow_zero=True)
    if cfg.train.torch_threads is not None:
        _positive("train.torch_threads", cfg.train.torch_threads)
    _positive("train.env_ceiling.duration_s", cfg.train.env_ceiling.duration_s)
    validate_stop(cfg)
    validate_env_model(cfg)


def validate_stop(cfg: DictConfig) -> None:
    """``train.stop.*`` and ``train.evaluation.*`` (time-to-target, docs/configuration.md#train)."""
    stop = cfg.train.stop
    ret = stop.episode_return
    if ret is not None and not math.isfinite(float(ret)):
        raise ConfigError(
            f"train.stop.episode_return={ret!r} is not valid; it must be a finite number "
            f"(the mean episode return that ends the run), or null"
        )
    for key in ("env_steps", "time_s"):
        if stop[key] is not None:
            _positive(f"train.stop.{key}", stop[key])
    if str(stop.judge) == "eval" and ret is not None:
        _positive("train.evaluation.interval", cfg.train.evaluation.interval)
        _positive("train.evaluation.episodes", cfg.train.evaluation.episodes)


def validate_rollout(cfg: DictConfig) -> None:
    """``stage=rollout``: an upstream run, ``rollout.*``, and ``backend=rllib``."""
    if cfg.run is None and cfg.checkpoint is None:
        raise ConfigError("stage=rollout needs run=<training job folder> or checkpoint=<path>")
    r = cfg.rollout
    if cfg.backend.name != "rllib":
        raise ConfigError(
            f"backend={cfg.backend.name} with stage=rollout: the rollout stage runs the policy "
            f"in RLlib; use backend=rllib, or stage=edge to benchmark {cfg.backend.name}"
        )
    _positive("rollout.episodes", r.episodes)
    _positive("rollout.warmup_steps", r.warmup_steps, allow_zero=True)
    _positive("rollout.torch_threads", r.torch_threads)
    if r.steps is not None:
        _positive("rollout.steps", r.steps)
        if r.warmup_steps >= r.steps:
            raise ConfigError(
                f"rollout.warmup_steps={r.warmup_steps} >= rollout.steps={r.steps}: every step "
                f"would be warm-up and the latency summary empty; lower rollout.warmup_steps"
            )
    if r.device == "cuda" and not list(cfg.gpu_layout.visible_gpus):
        raise ConfigError(
            f"rollout.device=cuda with gpu_layout={cfg.gpu_layout.name}: no GPU is visible; "
            f"use a layout with GPUs (e.g. gpu0_driver) or rollout.device=cpu"
        )
    if r.start_algorithm is False and cfg.workers > 0:
        raise ConfigError(
            f"rollout.start_algorithm=false with workers={cfg.workers}: env runners exist only "
            f"in a started Algorithm; use workers=0 or rollout.start_algorithm=null"
        )


def validate_edge(cfg: DictConfig) -> None:
    """``stage=edge``: a policy or a model file, and ``edge.*``."""
    if cfg.run is None and cfg.checkpoint is None and cfg.model_path is None:
        raise ConfigError(
            "stage=edge needs run=<training job folder>, checkpoint=<path> or "
            "model_path=<file.tflite>"
        )
    if not 0 <= cfg.edge.fidelity_threshold <= 1:
        raise ConfigError(
            f"edge.fidelity_threshold={cfg.edge.fidelity_threshold} must be in [0, 1]"
        )
    _validate_compression(cfg)
    source = str(cfg.edge.edgetpu_source)
    if source not in EDGETPU_SOURCES:
        raise ConfigError(
            f"edge.edgetpu_source={source} is not an int8 variant the Edge TPU compiler takes; "
            f"valid: {', '.join(EDGETPU_SOURCES)}"
        )
    if cfg.backend.name == "edgetpu" and source != "tflite_int8" and cfg.model_path is not None:
        raise ConfigError(
            f"edge.edgetpu_source={source} builds that variant from the trained policy: give "
            "run=<training job folder> or checkpoint=<path> instead of model_path"
        )


#: The full-integer variants ``backend=edgetpu`` can compile (``edge.edgetpu_source``).
EDGETPU_SOURCES = ("tflite_int8", "tflite_qat", "tflite_prune75_int8")

#: Backends that compress the trained policy (rlperf/tflite/compress.py RECIPES).
COMPRESSION_BACKENDS = ("tflite_qat", "tflite_prune50", "tflite_prune75", "tflite_prune90",
                        "tflite_prune75_int8", "tflite_struct50")  # fmt: skip


def _validate_compression(cfg: DictConfig) -> None:
    """A compression backend needs the torch policy and positive fine-tuning settings."""
    name = str(cfg.backend.name)
    if name == "edgetpu" and cfg.model_path is None:
        name = str(cfg.edge.edgetpu_source)  # the variant compiled is built here
    if name not in COMPRESSION_BACKENDS:
        return
    if cfg.run is None and cfg.checkpoint is None:
        raise ConfigError(
            f"backend={name} compresses the trained policy (fine-tuned by distillation from "
            f"it): give run=<training job folder> or checkpoint=<path>, not only model_path"
        )
    for key in ("finetune_steps", "finetune_batch"):
        if not cfg.edge[key] > 0:
            raise ConfigError(f"edge.{key}={cfg.edge[key]} must be > 0 for backend={name}")
    from rlperf.tflite.compress import learning_rates

    lr = cfg.edge.finetune_lr
    shown = lr if isinstance(lr, (int, float, str)) else list(lr)
    try:
        rates = learning_rates(lr)
    except (TypeError, ValueError):
        rates = []
    if not rates or not all(r > 0 for r in rates):
        raise ConfigError(
            f"edge.finetune_lr={shown} must be a learning rate > 0 or a non-empty list of "
            f"them (e.g. [3e-3,1e-3,3e-4]) for backend={name}"
        )


def validate_serve(cfg: DictConfig) -> None:
    """``stage=serve``: a policy or a model file, and ``serve.*``."""
    s = cfg.serve
    if cfg.run is None and cfg.checkpoint is None and cfg.model_path is None:
        raise ConfigError(
            "stage=serve needs run=<training job folder>, checkpoint=<path> or "
            "model_path=<file.tflite>"
        )
    if cfg.backend.name == "edgetpu":
        raise ConfigError(
            "backend=edgetpu with stage=serve: the serve stage runs CPU backends; use "
            "backend=rllib or a tflite_* backend (stage=edge benchmarks the Edge TPU)"
        )
    if cfg.backend.name in COMPRESSION_BACKENDS:
        raise ConfigError(
            f"backend={cfg.backend.name} with stage=serve: compressed variants are built and "
            "benchmarked by stage=edge; serve the .tflite it wrote with model_path=<file> and "
            "backend=tflite_fp32 (or tflite_int8 for an int8 file)"
        )
    if cfg.model_path is not None and cfg.backend.name == "rllib":
        raise ConfigError(
            f"model_path={cfg.model_path} with backend=rllib: a .tflite file is served by a "
            "tflite_* backend (e.g. backend=tflite_fp32)"
        )
    for key in ("replicas", "threads", "max_ongoing_requests", "max_batch_size",
                "requests_per_level", "baseline_requests", "observations"):  # fmt: skip
        if not isinstance(s[key], int) or s[key] < 1:
            raise ConfigError(f"serve.{key}={s[key]!r} must be an integer >= 1")
    for key in ("cpus_per_replica", "request_timeout_s", "max_send_lag_ms", "slo_ms"):
        _positive(f"serve.{key}", s[key])
    _positive("serve.batch_wait_timeout_s", s.batch_wait_timeout_s, allow_zero=True)
    _positive("serve.warmup_requests", s.warmup_requests, allow_zero=True)
    if s.max_queued_requests < -1:
        raise ConfigError(
            f"serve.max_queued_requests={s.max_queued_requests} must be -1 (unbounded) or >= 0"
        )
    if s.max_batch_size > s.max_ongoing_requests:
        raise ConfigError(
            f"serve.max_batch_size={s.max_batch_size} > serve.max_ongoing_requests="
            f"{s.max_ongoing_requests}: a replica never holds enough requests to fill a batch; "
            f"raise serve.max_ongoing_requests to at least {s.max_batch_size}"
        )
    if not 0 < s.confidence < 1:
        raise ConfigError(f"serve.confidence={s.confidence} must be in (0, 1)")
    if any(not isinstance(c, int) or c < 1 for c in s.clients):
        raise ConfigError(f"serve.clients={list(s.clients)} must be integers >= 1")
    if any(r <= 0 for r in s.rates):
        raise ConfigError(f"serve.rates={list(s.rates)} must be request rates > 0 (per second)")
    if s.kill_replica_level is not None and not 0 <= s.kill_replica_level < len(s.rates):
        raise ConfigError(
            f"serve.kill_replica_level={s.kill_replica_level} must index serve.rates "
            f"({len(s.rates)} open-loop levels: 0..{len(s.rates) - 1}) or be null"
        )


#: The validator of each stage (``stage``), run after the common checks.
STAGE_VALIDATORS: dict[str, Callable[[DictConfig], None]] = {
    "train": validate_train,
    "rollout": validate_rollout,
    "edge": validate_edge,
    "serve": validate_serve,
}


def validate_config(cfg: DictConfig) -> None:
    """Run the common checks, then the stage's; raise :class:`ConfigError` naming the keys."""
    validate_env(cfg)
    validate_model(cfg)
    validate_resources(cfg)
    validate_gpu_layout(cfg)
    validate_algo(cfg)
    validate_telemetry(cfg)
    STAGE_VALIDATORS[str(cfg.stage)](cfg)
