"""One validation step over the composed config, before anything expensive starts.

Allowed values of single keys are Enum fields of the schema
(:mod:`rlperf.config.schema`), so composition already rejects them. Checks that
need several keys or groups at once (the conv stack against the input size,
the GPU layout against the workers, what a stage needs) live here: common
checks, then one validator per stage (its spec's ``validator``,
:mod:`rlperf.specs.stages`). Every error names the keys involved, the value and what
would be valid.
"""

from __future__ import annotations

import math
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from rlperf.algos import spec_of
from rlperf.checks import fraction, positive
from rlperf.envs.check import check_env
from rlperf.envs.vector import engine_refusal
from rlperf.errors import ConfigError, ConvStackError, ModelSpaceError
from rlperf.models.shapes import conv_stack_shapes
from rlperf.models.spaces import check_model_spaces, describe_space
from rlperf.resources.plan import gpu_fractions, learner_split
from rlperf.specs import load
from rlperf.specs.backends import COMPRESSION_BACKENDS, backend_spec
from rlperf.specs.stages import stage_spec
from rlperf.tracking.tools import check_tools


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
    positive("model.dim", cfg.model.dim)
    positive("model.framestack", cfg.model.framestack)
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
        positive("env.max_episode_steps", env.max_episode_steps)
    # Unresolved: the keys it reads are plain values (env.dim may point at a model not here).
    refusal = engine_refusal(cast(dict[str, Any], OmegaConf.to_container(env, resolve=False)))
    if refusal is not None:
        raise ConfigError(refusal)
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

    Imports the user's module; no Ray. Raises :class:`ConfigError` (an
    :class:`~rlperf.errors.EnvCheckError` for the env) naming the keys.
    """
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
    driver, _ = gpu_fractions(gl.mode, len(visible), float(gl.driver_gpus), int(cfg.workers))
    try:
        learner_split(driver, cfg.learners, spec_of(cfg).default_learners)
    except ValueError as exc:
        raise ConfigError(f"gpu_layout={gl.name}: {exc}") from exc


def validate_resources(cfg: DictConfig) -> None:
    """``workers``, ``env_runner.*``, ``cpu_affinity.*``."""
    if not isinstance(cfg.workers, int) or cfg.workers < 0:
        raise ConfigError(f"workers={cfg.workers!r} must be an integer >= 0")
    positive("env_runner.num_envs", cfg.env_runner.num_envs)
    positive("env_runner.num_cpus", cfg.env_runner.num_cpus, allow_zero=True)
    if cfg.env_runner.torch_threads is not None:
        positive("env_runner.torch_threads", cfg.env_runner.torch_threads)
    if cfg.learners is not None and (
        not isinstance(cfg.learners, int) or isinstance(cfg.learners, bool) or cfg.learners < 0
    ):
        raise ConfigError(
            f"learners={cfg.learners!r} must be null (the algorithm's and GPU layout's default) "
            f"or an integer >= 0 (0: the learner runs in the driver; N: N learner actors)"
        )
    aff = cfg.cpu_affinity
    if aff.num_cpus is not None:
        positive("cpu_affinity.num_cpus", aff.num_cpus)
    positive("cpu_affinity.first_cpu", aff.first_cpu, allow_zero=True)
    if cfg.ray.address is not None and aff.mode != "unrestricted":
        raise ConfigError(
            f"cpu_affinity={aff.name} changes how Ray is started, but ray.address="
            f"{cfg.ray.address!r} joins an existing cluster; use cpu_affinity=unrestricted"
        )


def validate_algo(cfg: DictConfig) -> None:
    """``algo.*``: what every algorithm has, then its own keys (its spec's ``validator``)."""
    a = cfg.algo
    positive("algo.train_batch_size", a.train_batch_size)
    rfl = a.rollout_fragment_length
    if rfl != "auto" and not (isinstance(rfl, int) and rfl > 0):
        raise ConfigError(
            f"algo.rollout_fragment_length={rfl!r} must be a positive integer or 'auto'"
        )
    for key in ("lr", "actor_lr", "critic_lr", "alpha_lr"):
        if key in a:
            positive(f"algo.{key}", a[key])
    for key in ("gamma", "lambda_"):
        if key in a:
            fraction(f"algo.{key}", a[key])
    if a.grad_clip is not None:
        positive("algo.grad_clip", a.grad_clip)
    spec_of(cfg).validator(cfg)


def validate_algo_actions(cfg: DictConfig, action_space: Any, env_name: str) -> None:
    """The algorithm's action space (its spec's ``actions``: DQN needs ``Discrete``, SAC a
    ``Box``), checked on the built env's space."""
    needs = spec_of(cfg).actions
    if needs is not None and type(action_space).__name__ != needs.space:
        raise ConfigError(
            f"algo={cfg.algo.name} needs {needs.space} actions, but {env_name} has actions "
            f"{describe_space(action_space)}; use {needs.env_hint}, or {needs.algo_hint}"
        )


def validate_telemetry(cfg: DictConfig) -> None:
    """``telemetry.*``."""
    positive("telemetry.interval_s", cfg.telemetry.interval_s)


def validate_train(cfg: DictConfig) -> None:
    """``stage=train``: ``train.*``; training runs in RLlib; the env builds and fits the model."""
    if not backend_spec(cfg.backend.name).in_rllib:
        raise ConfigError(
            f"backend={cfg.backend.name} with stage=train: training runs in RLlib; "
            f"use backend=rllib, or stage=edge to benchmark {cfg.backend.name}"
        )
    positive("train.iterations", cfg.train.iterations)
    positive("train.warmup_iterations", cfg.train.warmup_iterations, allow_zero=True)
    positive("train.checkpoint_every", cfg.train.checkpoint_every, allow_zero=True)
    if cfg.train.torch_threads is not None:
        positive("train.torch_threads", cfg.train.torch_threads)
    positive("train.env_ceiling.duration_s", cfg.train.env_ceiling.duration_s)
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
            positive(f"train.stop.{key}", stop[key])
    if str(stop.judge) == "eval" and ret is not None:
        positive("train.evaluation.interval", cfg.train.evaluation.interval)
        positive("train.evaluation.episodes", cfg.train.evaluation.episodes)
        if cfg.train.evaluation.max_episode_steps is not None:
            positive("train.evaluation.max_episode_steps", cfg.train.evaluation.max_episode_steps)


def validate_rollout(cfg: DictConfig) -> None:
    """``stage=rollout``: an upstream run, ``rollout.*``, and ``backend=rllib``."""
    if cfg.run is None and cfg.checkpoint is None:
        raise ConfigError("stage=rollout needs run=<training job folder> or checkpoint=<path>")
    r = cfg.rollout
    if not backend_spec(cfg.backend.name).in_rllib:
        raise ConfigError(
            f"backend={cfg.backend.name} with stage=rollout: the rollout stage runs the policy "
            f"in RLlib; use backend=rllib, or stage=edge to benchmark {cfg.backend.name}"
        )
    positive("rollout.episodes", r.episodes)
    positive("rollout.warmup_steps", r.warmup_steps, allow_zero=True)
    positive("rollout.torch_threads", r.torch_threads)
    if r.steps is not None:
        positive("rollout.steps", r.steps)
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


def validate_serve(cfg: DictConfig) -> None:
    """``stage=serve``: a policy or a model file, and ``serve.*``."""
    s = cfg.serve
    if cfg.run is None and cfg.checkpoint is None and cfg.model_path is None:
        raise ConfigError(
            "stage=serve needs run=<training job folder>, checkpoint=<path> or "
            "model_path=<file.tflite>"
        )
    if backend_spec(cfg.backend.name).on_edgetpu:
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
    if cfg.model_path is not None and backend_spec(cfg.backend.name).in_rllib:
        raise ConfigError(
            f"model_path={cfg.model_path} with backend=rllib: a .tflite file is served by a "
            "tflite_* backend (e.g. backend=tflite_fp32)"
        )
    for key in ("replicas", "threads", "max_ongoing_requests", "max_batch_size",
                "requests_per_level", "baseline_requests", "observations"):  # fmt: skip
        if not isinstance(s[key], int) or s[key] < 1:
            raise ConfigError(f"serve.{key}={s[key]!r} must be an integer >= 1")
    for key in ("cpus_per_replica", "request_timeout_s", "max_send_lag_ms", "slo_ms"):
        positive(f"serve.{key}", s[key])
    positive("serve.batch_wait_timeout_s", s.batch_wait_timeout_s, allow_zero=True)
    positive("serve.warmup_requests", s.warmup_requests, allow_zero=True)
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


def validate_env_stage(cfg: DictConfig) -> None:
    """``stage=env``: ``env_bench.*``; ``backend=rllib`` (nothing executes a policy but the
    run's torch network, with ``run=``)."""
    b = cfg.env_bench
    for key in ("steps", "windows", "torch_threads"):
        if not isinstance(b[key], int) or isinstance(b[key], bool) or b[key] < 1:
            raise ConfigError(f"env_bench.{key}={b[key]!r} must be an integer >= 1")
    positive("env_bench.warmup_steps", b.warmup_steps, allow_zero=True)
    num_envs = int(cfg.env_runner.num_envs)
    if b.steps < b.windows * num_envs:
        raise ConfigError(
            f"env_bench.steps={b.steps} is fewer than env_bench.windows={b.windows} x "
            f"env_runner.num_envs={num_envs} env steps (each window needs a step of every env); "
            f"raise env_bench.steps to at least {b.windows * num_envs} or lower env_bench.windows"
        )
    if not backend_spec(cfg.backend.name).in_rllib:
        raise ConfigError(
            f"backend={cfg.backend.name} with stage=env: stage=env times the env alone (random "
            "actions, or run=<training job>'s torch policy); use backend=rllib, or stage=edge "
            f"to benchmark {cfg.backend.name}"
        )


def validate_config(cfg: DictConfig) -> None:
    """Run the common checks, then the stage's; raise :class:`ConfigError` naming the keys."""
    validate_env(cfg)
    spec = stage_spec(cfg.stage)
    if not spec.env_only or cfg.run is not None or cfg.checkpoint is not None:
        validate_model(cfg)  # stage=env with random actions builds no network
    validate_resources(cfg)
    validate_gpu_layout(cfg)
    validate_algo(cfg)
    validate_telemetry(cfg)
    positive("console.heartbeat_s", cfg.console.heartbeat_s, allow_zero=True)
    check_tools(OmegaConf.select(cfg, "tracking"))
    load(spec.validator)(cfg)  # the stage's own checks (a function of this module)
