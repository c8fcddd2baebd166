"""Purpose-built environments that break one rule each, for the env checks (rlperf.envs.check).

Each class is a small valid grid walk except for the one thing its name says. They
take ``config`` as their only argument, as ``env=custom`` builds them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np


class Walk(gym.Env):
    """A valid env: position 0..4 as a Box(1), actions left/right, the end pays 1."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config = dict(config or {})
        self.observation_space = gym.spaces.Box(0.0, 4.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.pos = 0
        if "pid_dir" in self.config:  # which processes built it
            Path(self.config["pid_dir"], f"{os.getpid()}.pid").touch()

    def _obs(self) -> np.ndarray:
        return np.array([self.pos], np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.pos = 0
        return self._obs(), {}

    def step(self, action: Any) -> Any:
        self.pos = min(max(self.pos + (1 if int(action) == 1 else -1), 0), 4)
        done = self.pos == 4
        return self._obs(), float(done), bool(done), False, {}


class OldGymStep(Walk):
    """``step`` returns the old gym 4-tuple (obs, reward, done, info)."""

    def step(self, action: Any) -> Any:
        obs, reward, terminated, _, info = super().step(action)
        return obs, reward, terminated, info


class ObsOutsideSpace(Walk):
    """``reset`` returns an observation above the Box's high."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        return np.array([9.0], np.float32), {}


class ResetWithoutSeed(Walk):
    """``reset`` takes no seed / options keywords (the old gym API)."""

    def reset(self) -> Any:  # type: ignore[override]
        self.pos = 0
        return self._obs(), {}


class BrokenConstructor(Walk):
    """The constructor raises on its config."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        raise ValueError(f"size must be given, got config {config}")


class TerminatedNotBool(Walk):
    """``step`` returns terminated as an int."""

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, int(terminated), truncated, info


class Unseeded(Walk):
    """Valid, but ``reset`` never seeds ``np_random`` (no ``super().reset(seed=seed)``)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self.pos = 0
        return self._obs(), {}


class NotAnEnv:
    """Has reset and step but is no gymnasium.Env."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.observation_space = gym.spaces.Discrete(3)
        self.action_space = gym.spaces.Discrete(2)
