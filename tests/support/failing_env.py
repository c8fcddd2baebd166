"""An environment that passes rlperf's checks and then fails inside RLlib, on purpose.

``env=custom env.entry_point=support.failing_env:FailsMidRun`` (with ``tests`` on
``PYTHONPATH``): rlperf's pre-Ray check constructs, resets and steps it once, which
succeeds; its 30th step raises, so the job fails where a real bug would — in the env
runner, after Ray started. Its observations are ``config["shape"]`` uint8 frames
(``[42, 42, 4]`` fits ``model=tiny``), its actions ``Discrete(6)``. Tests also set
``train.env_ceiling.enabled=false``: the ceiling probe would meet the error first.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

#: The step that raises (counted per env instance, across episodes).
FAILING_STEP = 30


class FailsMidRun(gym.Env):
    def __init__(self, config: dict[str, Any] | None = None) -> None:
        shape = tuple((config or {}).get("shape", (1,)))
        self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)
        self.action_space = gym.spaces.Discrete(6)
        self.steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(self.observation_space.shape, np.uint8), {}

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps >= FAILING_STEP:
            raise RuntimeError(f"FailsMidRun: step {FAILING_STEP} breaks on purpose")
        return np.zeros(self.observation_space.shape, np.uint8), 0.0, False, False, {}
