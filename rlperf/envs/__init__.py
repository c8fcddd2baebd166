"""Environments rlperf trains and benchmarks on (Atari through ale-py)."""

from __future__ import annotations

from rlperf.envs.atari import (
    DEFAULT_ENV_CONFIG,
    RLLIB_ENV_NAME,
    env_spaces,
    make_atari_env,
    register_rllib_env,
    resolve_env_config,
)

__all__ = [
    "DEFAULT_ENV_CONFIG",
    "RLLIB_ENV_NAME",
    "env_spaces",
    "make_atari_env",
    "register_rllib_env",
    "resolve_env_config",
]
