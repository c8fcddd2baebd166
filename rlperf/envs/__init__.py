"""Environments rlperf trains and benchmarks on: Atari through ale-py (:mod:`.atari`), any
gymnasium id, and user classes by entry point (:mod:`.factory`, :mod:`.check`)."""

from __future__ import annotations

from rlperf.envs.atari import (
    DEFAULT_ENV_CONFIG,
    RLLIB_ENV_NAME,
    env_spaces,
    make_atari_env,
    register_rllib_env,
    resolve_env_config,
)
from rlperf.envs.factory import make_env

__all__ = [
    "DEFAULT_ENV_CONFIG",
    "RLLIB_ENV_NAME",
    "env_spaces",
    "make_atari_env",
    "make_env",
    "register_rllib_env",
    "resolve_env_config",
]
