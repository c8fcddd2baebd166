"""An env's ``num_envs`` envs as its engine steps them, outside RLlib (``stage=env``).

:func:`engine_env` builds them for every ``env.engine``: an :class:`EnvLoop` of rlperf's
envs (``python``: one after another, as an env runner's own loop), gymnasium's
``SyncVectorEnv`` / ``AsyncVectorEnv`` over rlperf's envs, or a C++ engine's vector env
(:func:`rlperf.envs.vector.make_vector_env`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

from rlperf.envs.factory import make_env
from rlperf.specs import load
from rlperf.specs.engines import engine_of, without_engine


class EnvLoop:
    """``env.engine=python`` with several envs outside RLlib: ``num_envs`` separate envs
    stepped one after another in one loop, as an env runner's own loop does (no batching of
    observations, no vector env); an env whose episode ends is reset at once."""

    def __init__(self, envs: list[gym.Env]) -> None:
        self.envs = envs
        self.num_envs = len(envs)
        self.single_observation_space = envs[0].observation_space
        self.single_action_space = envs[0].action_space
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def reset(self, seed: int | None = None) -> tuple[list[Any], list[dict[str, Any]]]:
        out = [
            env.reset(seed=None if seed is None else seed + i) for i, env in enumerate(self.envs)
        ]
        return [o for o, _ in out], [i for _, i in out]

    def step(self, actions: Any) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, dict]:
        obs, rewards = [], np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        for i, env in enumerate(self.envs):
            o, rewards[i], terminated[i], truncated[i], _ = env.step(actions[i])
            if terminated[i] or truncated[i]:
                o, _ = env.reset()
            obs.append(o)
        return obs, rewards, terminated, truncated, {}

    def close(self) -> None:
        for env in self.envs:
            env.close()


def engine_env(env: Mapping[str, Any], num_envs: int) -> Any:
    """``num_envs`` envs of ``env`` as its engine steps them, for ``stage=env``: an
    :class:`EnvLoop` (python), gymnasium's ``SyncVectorEnv`` / ``AsyncVectorEnv`` over
    rlperf's envs, or the C++ engine's vector env (the engine spec's ``builder``). Each has
    ``num_envs``, a batched ``action_space``, ``reset(seed=)`` (sub-env i gets seed + i),
    ``step`` and ``close``."""
    return load(engine_of(env).builder)(env, num_envs)


def env_loop(env: Mapping[str, Any], num_envs: int) -> EnvLoop:
    """``env.engine=python``: rlperf's envs one after another."""
    return EnvLoop([make_env(without_engine(env)) for _ in range(num_envs)])


def sync_vector_env(env: Mapping[str, Any], num_envs: int) -> gym.vector.VectorEnv:
    """``env.engine=gymnasium_sync``: gymnasium's ``SyncVectorEnv`` over rlperf's envs."""
    return gym.vector.SyncVectorEnv([partial(make_env, without_engine(env))] * num_envs)


def async_vector_env(env: Mapping[str, Any], num_envs: int) -> gym.vector.VectorEnv:
    """``env.engine=gymnasium_async``: gymnasium's ``AsyncVectorEnv`` over rlperf's envs, as
    RLlib starts it (the default context)."""
    return gym.vector.AsyncVectorEnv([partial(make_env, without_engine(env))] * num_envs)
