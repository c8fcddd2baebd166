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

Every kind also takes ``max_episode_steps`` (a gymnasium ``TimeLimit`` in
agent steps; null = the env's own) and ``seed`` (the job's ``seed``: the
default seed of the first reset, derived per env runner and sub-env as for
Atari, see docs/environment.md#seeds). A config without ``kind`` (runs of
rlperf before 0.2) is Atari.

:func:`register_rllib_env` registers :func:`make_env` with Ray Tune as
``"rlperf_env"``; the env runners build every kind through it. Import is cheap
(gymnasium and numpy; ale-py and cv2 come with :mod:`.atari`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from rlperf.envs.atari import _DefaultSeed, _instance_seed, make_atari_env
from rlperf.envs.atari import env_spaces as atari_spaces
from rlperf.envs.entry_point import load_entry_point

#: Name under which :func:`register_rllib_env` registers :func:`make_env`.
RLLIB_ENV_NAME = "rlperf_env"

#: Kinds of ``env.kind`` (:class:`rlperf.config.schema.EnvKind`).
KINDS = ("atari", "gym", "custom")

# Keys every kind accepts besides its own, and RLlib's key of a vectorised EnvContext.
_COMMON_KEYS = frozenset({"kind", "max_episode_steps", "seed"})
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
        return gym.make(str(cfg["id"]), disable_env_checker=True, **kwargs)
    return load_entry_point(str(cfg["entry_point"]))(kwargs)  # type: ignore[no-any-return]


def make_env(env_config: Mapping[str, Any] | None = None) -> gym.Env:
    """Build the env of ``env_config`` (see the module docstring), seeded like Atari envs.

    With an RLlib ``EnvContext`` as ``env_config`` and ``seed`` set, each env
    instance gets its own derived default seed (:func:`rlperf.envs.atari.derive_seed`).
    """
    env_config = env_config if env_config is not None else {}
    if env_kind(env_config) == "atari":
        return make_atari_env(env_config)
    cfg = _plain_config(env_config)
    env = construct_env(cfg)
    if cfg.get("max_episode_steps") is not None:
        env = gym.wrappers.TimeLimit(env, int(cfg["max_episode_steps"]))
    if cfg.get("seed") is not None:
        env = _DefaultSeed(env, _instance_seed(env_config, int(cfg["seed"])))
    return env


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
