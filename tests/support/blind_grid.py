"""A grid world that the greedy policy can never finish, and exploration finishes at once.

``env=custom env.entry_point=support.blind_grid:BlindGrid`` (``tests`` on ``PYTHONPATH``):
a 2 x 2 grid, start in one corner, the goal (reward 1, the episode ends) in the opposite
one, so one move right and one move up reach it. Moves off the grid keep the agent in
place, and there is no time limit. The agent sees nothing (its observation is always
``[0.0]``): a greedy policy picks one action in every state, moves once at most and then
walks into a wall for ever, while random actions reach the goal in a few steps. The
case of issue 28: training episodes end, greedy evaluation episodes cannot.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

#: Action -> (dx, dy): right, up, left, down.
MOVES = ((1, 0), (0, 1), (-1, 0), (0, -1))


class BlindGrid(gym.Env):
    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(len(MOVES))
        self.pos = (0, 0)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.pos = (0, 0)
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> Any:
        dx, dy = MOVES[int(action)]
        x, y = self.pos[0] + dx, self.pos[1] + dy
        if 0 <= x <= 1 and 0 <= y <= 1:  # an invalid move keeps the agent in place
            self.pos = (x, y)
        done = self.pos == (1, 1)
        return np.zeros(1, np.float32), float(done), done, False, {}
