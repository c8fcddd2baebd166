"""Build the environment an ``env`` config subtree describes, whatever its kind.

=========  ==========================================================  =====================
``kind``   what is built                                               keys besides ``kind``
=========  ==========================================================  =====================
atari      an ALE game with DeepMind-style preprocessing                see :mod:`.atari`
           (:func:`rlperf.envs.atari.make_atari_env`)
gym        ``gymnasium.make(id, **config)``, no preprocessing           ``id``, ``config``
custom     ``Class(config)`` of ``entry_point`` (``package.module:     ``entry_point``,
           Class``, imported by :mod:`rlperf.envs.entry_point`)         ``config``
=========  ==========================================================  =====================

Every kind also takes ``engine`` and ``threads`` (what steps the env: :mod:`.engines`;
with RLlib's ``num_envs`` and a vector engine, one vector env of :mod:`.vector`),
A ``gym`` or ``custom`` env whose Box observations are of another float dtype than float32
(MuJoCo's float64, many users' own envs) is cast to float32 once, here, where the env meets
every model (:func:`float32_observations`; the protocol records it:
:func:`observation_cast`). Every kind also takes ``max_episode_steps`` (a gymnasium
``TimeLimit`` in agent steps; null = the env's own,
:func:`time_limit`), ``evaluation_cap`` (set by the training's greedy evaluation only:
:class:`EvaluationCap`) and ``seed`` (the job's ``seed``: the default seed of the first
reset, derived per env runner and sub-env as for Atari, see docs/environment.md#seeds).
A config without ``kind`` (runs of rlperf before 0.2) is Atari.

:func:`register_rllib_env` registers :func:`make_env` with Ray Tune as
``"rlperf_env"``; the env runners build every kind through it. Import is cheap
(gymnasium and numpy; ale-py and cv2 come with :mod:`.atari`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from rlperf.envs.atari import _DefaultSeed, _instance_seed, make_atari_env
from rlperf.envs.atari import env_spaces as atari_spaces
from rlperf.envs.entry_point import load_entry_point
from rlperf.envs.mujoco import (
    is_mujoco_id,
    route_warnings,
    simulator_facts,
    simulator_version,
)
from rlperf.specs.engines import ENGINE_KEYS, engine_of

#: Name under which :func:`register_rllib_env` registers :func:`make_env`.
RLLIB_ENV_NAME = "rlperf_env"

#: Kinds of ``env.kind`` (:class:`rlperf.config.schema.EnvKind`).
KINDS = ("atari", "gym", "custom")

# Keys every kind accepts besides its own, and RLlib's key of a vectorised EnvContext.
_COMMON_KEYS = frozenset({"kind", "max_episode_steps", "seed", "evaluation_cap", *ENGINE_KEYS})

#: The key of an env config that caps its episodes for an evaluation (:class:`EvaluationCap`).
EVALUATION_CAP = "evaluation_cap"
#: What :class:`EvaluationCap` adds to the ``info`` of the step that it truncated.
CAPPED_INFO = "rlperf_evaluation_capped"
_KIND_KEYS = {"gym": frozenset({"id", "config"}), "custom": frozenset({"entry_point", "config"})}
_RLLIB_CONTEXT_KEYS = frozenset({"num_envs"})


def env_kind(env_config: Mapping[str, Any]) -> str:
    """``kind`` of an env config (``atari`` where it has none: rlperf 0.1 runs)."""
    kind = str(env_config.get("kind") or "atari")
    if kind not in KINDS:
        raise ValueError(f"env.kind={kind!r} is not valid; choose one of {', '.join(KINDS)}")
    return kind


def describe_env(env_config: Mapping[str, Any]) -> str:
    """``env.id=...`` or ``env.entry_point=...``: how messages name an env."""
    if env_kind(env_config) == "custom":
        return f"env.entry_point={env_config.get('entry_point')}"
    return f"env.id={env_config.get('id', 'ALE/Pong-v5')}"


def _plain_config(env_config: Mapping[str, Any]) -> dict[str, Any]:
    """The kind's keys of ``env_config`` (a dict, DictConfig or RLlib EnvContext)."""
    kind = env_kind(env_config)
    given = {k: v for k, v in dict(env_config).items() if k not in _RLLIB_CONTEXT_KEYS}
    unknown = sorted(set(given) - _COMMON_KEYS - _KIND_KEYS[kind])
    if unknown:
        raise ValueError(
            f"unknown env_config key(s) {unknown} for kind {kind}; valid keys are "
            f"{sorted(_COMMON_KEYS | _KIND_KEYS[kind])}"
        )
    return given


def construct_env(env_config: Mapping[str, Any]) -> gym.Env:
    """The bare env of a ``gym`` or ``custom`` config (no time limit, no default seed)."""
    cfg = _plain_config(env_config)
    kwargs = dict(cfg.get("config") or {})
    if env_kind(cfg) == "gym":
        if is_mujoco_id(str(cfg["id"])):
            route_warnings()  # MuJoCo's warnings to the log, not the terminal and a file
        return gym.make(str(cfg["id"]), disable_env_checker=True, **kwargs)
    return load_entry_point(str(cfg["entry_point"]))(kwargs)  # type: ignore[no-any-return]


class EvaluationCap(gym.Wrapper[Any, Any, Any, Any], gym.utils.RecordConstructorArgs):
    """Truncates an episode after ``steps`` agent steps, and says so in the step's ``info``
    (:data:`CAPPED_INFO`): the cap of a greedy evaluation on an env without a time limit
    of its own (``train.evaluation.max_episode_steps``), whose capped episodes do not count
    toward a return target (:mod:`rlperf.training.target`)."""

    def __init__(self, env: gym.Env, steps: int) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, steps=steps)
        gym.Wrapper.__init__(self, env)
        self.steps, self.elapsed = int(steps), 0

    def reset(self, **kwargs: Any) -> Any:
        self.elapsed = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.elapsed += 1
        if self.elapsed >= self.steps and not (terminated or truncated):
            truncated, info = True, {**info, CAPPED_INFO: True}
        return obs, reward, terminated, truncated, info


def time_limit(env_config: Mapping[str, Any]) -> int | None:
    """The agent steps after which the env of ``env_config`` ends an episode by itself:
    ``max_episode_steps``; else ALE's frame cap in agent steps (Atari: 108 000 frames at 4
    frames per step, 27 000), or the registered id's ``max_episode_steps`` (``gym``); None
    where none is known (a ``custom`` env without ``max_episode_steps``)."""
    if env_config.get("max_episode_steps") is not None:
        return int(env_config["max_episode_steps"])
    kind = env_kind(env_config)
    if kind == "atari":
        # rlperf.results: the protocol knows the frame cap; deferred (it imports this module's kin).
        from rlperf.results.protocol import env_protocol

        protocol = env_protocol(env_config)
        frames, per_step = protocol.get("max_frames_per_episode"), protocol.get("frames_per_step")
        return int(frames // per_step) if frames and per_step else None
    if kind == "gym":
        try:
            steps = gym.spec(str(env_config.get("id"))).max_episode_steps
        except gym.error.Error:
            return None
        return int(steps) if steps is not None else None
    return None


def make_env(env_config: Mapping[str, Any] | None = None) -> gym.Env:
    """Build the env of ``env_config`` (see the module docstring), seeded like Atari envs.

    With an RLlib ``EnvContext`` as ``env_config`` and ``seed`` set, each env
    instance gets its own derived default seed (:func:`rlperf.envs.atari.derive_seed`).
    """
    env_config = env_config if env_config is not None else {}
    if "num_envs" in env_config and engine_of(env_config).vector:
        # RLlib's vector_entry_point: the config plus num_envs, one vector env for all.
        from rlperf.envs.vector import make_vector_env

        config = {k: v for k, v in dict(env_config).items() if k != "num_envs"}
        return make_vector_env(config, int(env_config["num_envs"]))  # type: ignore[return-value]
    cap = env_config.get(EVALUATION_CAP)
    if cap is not None:
        rest = {k: v for k, v in dict(env_config).items() if k != EVALUATION_CAP}
        return EvaluationCap(make_env(_keep_context(env_config, rest)), int(cap))
    if env_kind(env_config) == "atari":
        return make_atari_env(env_config)
    cfg = _plain_config(env_config)
    env = float32_observations(construct_env(cfg))
    if cfg.get("max_episode_steps") is not None:
        env = gym.wrappers.TimeLimit(env, int(cfg["max_episode_steps"]))
    if cfg.get("seed") is not None:
        env = _DefaultSeed(env, _instance_seed(env_config, int(cfg["seed"])))
    return env


#: The dtype every model of rlperf takes (torch's default, TFLite's float input).
OBSERVATION_DTYPE = np.dtype(np.float32)


def observation_cast(space: gym.Space[Any]) -> str | None:
    """``"float64 -> float32"`` where observations of ``space`` are cast on their way to the
    model (a Box of another float dtype), else None."""
    if not isinstance(space, gym.spaces.Box) or not np.issubdtype(space.dtype, np.floating):
        return None
    if space.dtype == OBSERVATION_DTYPE:
        return None
    return f"{space.dtype} -> {OBSERVATION_DTYPE}"


def float32_observations(env: gym.Env) -> gym.Env:
    """``env`` with float32 observations where its Box observations are another float dtype
    (:class:`Float32Observations`: the space and every observation cast); else ``env``.
    A torch layer refuses float64 input beside float32 weights ("mat1 and mat2 must have the
    same dtype"): cast once here, no model, rollout, export or server sees float64."""
    if observation_cast(env.observation_space) is None:
        return env
    return Float32Observations(env)


class Float32Observations(gym.ObservationWrapper[Any, Any, Any], gym.utils.RecordConstructorArgs):
    """Box observations of another float dtype as float32, the space's bounds with them
    (cast here: gymnasium's ``DtypeObservation`` warns that the bounds lose precision)."""

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.ObservationWrapper.__init__(self, env)
        space = env.observation_space
        assert isinstance(space, gym.spaces.Box)
        with np.errstate(over="ignore"):  # beyond float32's range: ±inf, as unbounded
            low, high = space.low.astype(OBSERVATION_DTYPE), space.high.astype(OBSERVATION_DTYPE)
        self.observation_space = gym.spaces.Box(low, high, space.shape, np.float32)

    def observation(self, observation: Any) -> Any:
        return np.asarray(observation, dtype=OBSERVATION_DTYPE)


@dataclass(frozen=True)
class BuiltEnvFacts:
    """What only the built env of a ``gym`` or ``custom`` config tells, for its protocol:
    the observation cast (:func:`observation_cast`) and, for a MuJoCo env, its simulator's
    facts and version (:mod:`rlperf.envs.mujoco`)."""

    observation_cast: str | None = None
    simulator: dict[str, Any] | None = None
    simulator_version: str | None = None


def built_env_facts(env_config: Mapping[str, Any]) -> BuiltEnvFacts:
    """:class:`BuiltEnvFacts` of the env :func:`make_env` builds from ``env_config`` (empty
    for Atari, whose frames are uint8, and for an env that cannot be built: the job's own
    error says why)."""
    if env_kind(env_config) == "atari":
        return BuiltEnvFacts()
    try:
        env = construct_env({k: v for k, v in dict(env_config).items() if k != "seed"})
    except Exception:  # a wrong entry point or id: reported where the job builds it
        return BuiltEnvFacts()
    try:
        simulator = simulator_facts(env)
        return BuiltEnvFacts(
            observation_cast(env.observation_space),
            simulator,
            None if simulator is None else simulator_version(),
        )
    finally:
        env.close()


def _keep_context(original: Mapping[str, Any], config: dict[str, Any]) -> Mapping[str, Any]:
    """``config`` as an RLlib ``EnvContext`` like ``original`` (its worker and vector index,
    which seed derivation reads), where ``original`` is one."""
    copy_with_overrides = getattr(original, "copy_with_overrides", None)
    if copy_with_overrides is None:
        return config
    context = copy_with_overrides(env_config=config)
    return context  # type: ignore[no-any-return]


def env_spaces(env_config: Mapping[str, Any]) -> tuple[gym.Space[Any], gym.Space[Any]]:
    """Observation and action space of :func:`make_env` (Atari: usually without an emulator)."""
    if env_kind(env_config) == "atari":
        return atari_spaces(env_config)
    env = make_env({**dict(env_config), "seed": None})
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def register_rllib_env() -> str:
    """Register :func:`make_env` with Ray Tune as ``"rlperf_env"``; returns the name."""
    # Ray Tune: only to register the env; importing rlperf.envs must not import Ray.
    from ray.tune.registry import register_env

    register_env(RLLIB_ENV_NAME, make_env)
    return RLLIB_ENV_NAME
