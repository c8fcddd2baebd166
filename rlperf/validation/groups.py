"""The checks of the config groups that need several keys or groups at once: the env of
each kind, the model against the env (the conv stack against the input size, the spaces),
the GPU layout against the workers, the resources, the algorithm, telemetry. Every error
names the keys involved, the value and what would be valid."""

from __future__ import annotations

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
