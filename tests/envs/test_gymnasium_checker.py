"""Every env rlperf builds passes gymnasium's own checker, spec recreation included: each
wrapper records its constructor arguments (gymnasium.utils.RecordConstructorArgs), so
``gym.make`` of the env's spec rebuilds the same stack."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from rlperf.envs.factory import make_env
from rlperf.envs.from_config import env_config

#: Each shipped env option with the settings that make it small, and the extra keys of the
#: training's greedy evaluation (its cap) on one of them.
CASES = {
    "pong": ("env=pong", "model=tiny"),
    "pong, evaluation cap": ("env=pong", "model=tiny", "env.max_episode_steps=200"),
    "cartpole": ("env=cartpole", "model=mlp64"),
    "pendulum": ("env=pendulum", "model=mlp64"),
    "frozenlake": ("env=frozenlake", "model=mlp64"),
    "gym": ("env=gym", "env.id=Acrobot-v1", "model=mlp64"),
    "mujoco": ("env=mujoco", "model=mlp64"),  # float64 observations, cast to float32
}


@pytest.mark.parametrize("overrides", list(CASES.values()), ids=list(CASES))
def test_every_env_passes_gymnasiums_checker(compose_cfg, overrides: tuple[str, ...]) -> None:
    config: dict[str, Any] = dict(env_config(compose_cfg(*overrides)))
    if "env.max_episode_steps=200" in overrides:
        config["evaluation_cap"] = 50  # as the greedy evaluation builds it
    env = make_env(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the checker's advice on wrapped envs and Box bounds
        check_env(env, skip_render_check=True)
    if env.spec is None:  # a user's class built by its entry point is not registered
        assert config["kind"] == "custom"
        return
    # The spec rebuilds the same stack: the same observation after the same seeded reset.
    again = gym.make(env.spec)
    first, _ = env.reset(seed=3)
    second, _ = again.reset(seed=3)
    assert type(again) is type(env)
    np.testing.assert_array_equal(np.asarray(first), np.asarray(second))
    env.close()
    again.close()
