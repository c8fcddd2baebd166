"""The ``env`` group's schema: one dataclass per ``env.kind``.

An option extends its kind's schema (``defaults: [/schema/env/<kind>@_here_, _self_]``),
stored as ``schema/env/<kind>`` (:data:`ENV_SCHEMAS`, registered by
:func:`rlperf.config.schema.register_configs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from omegaconf import MISSING

from rlperf.specs.engines import DEFAULT_ENGINE, EnvEngine


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
    # What steps the env: not part of what an env step is (the env protocol's workload).
    engine: EnvEngine = DEFAULT_ENGINE  # rlperf.specs.engines (docs/environment.md)
    # Threads of a C++ engine (ale_vector, envpool) in each env runner; null = 1.
    threads: int | None = None


@dataclass
class AtariEnvConfig(EnvConfig):
    """``env.kind=atari``: an ALE game and its preprocessing (docs/environment.md)."""

    kind: EnvKind = EnvKind.atari
    id: str = "ALE/Pong-v5"
    dim: int = "${model.dim}"  # type: ignore[assignment]
    framestack: int = "${model.framestack}"  # type: ignore[assignment]
    # ALE-level frameskip: an int, or [low, high] for a random low..high-1 per step
    # (the study's Pong-v0 used [2, 5]); checked by rlperf.validation.groups.
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


#: ``env.kind`` -> the schema of its keys.
ENV_SCHEMAS: dict[str, type[EnvConfig]] = {
    EnvKind.atari: AtariEnvConfig,
    EnvKind.gym: GymEnvConfig,
    EnvKind.custom: CustomEnvConfig,
}
