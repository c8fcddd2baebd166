"""FrozenLake: a small deterministic grid world, rlperf's worked example of a user environment.

``env=frozenlake`` builds it from its entry point
(``rlperf.envs.frozenlake:FrozenLake``) exactly as ``env=custom`` builds a
user's class, so it exercises the same import, checks and env-runner path
(docs/custom-env.md walks through it). Unlike gymnasium's ``FrozenLake-v1`` it
is never slippery: a move always goes where it points, so a policy that learns
it is easy to check.

The map is a list of equal-length rows: ``S`` start, ``F`` frozen (safe),
``H`` hole (the episode ends, reward 0), ``G`` goal (the episode ends, reward
1). Observation: ``Discrete(rows * cols)``, the agent's cell ``row * cols +
col``. Actions: ``Discrete(4)`` — 0 left, 1 down, 2 right, 3 up (gymnasium's
order); a move into the border leaves the agent where it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium import spaces

#: The classic 4x4 map (gymnasium's "4x4").
DEFAULT_MAP = ("SFFF", "FHFH", "FFFH", "HFFG")

#: Row and column change of each action: left, down, right, up.
MOVES = ((0, -1), (1, 0), (0, 1), (-1, 0))


def parse_map(rows: Sequence[str]) -> tuple[str, ...]:
    """Check a map: equal-length rows of S/F/H/G with exactly one S and at least one G."""
    rows = tuple(str(r) for r in rows)
    if not rows or len({len(r) for r in rows}) != 1 or not rows[0]:
        raise ValueError(f"map must be non-empty rows of equal length, got {list(rows)}")
    cells = "".join(rows)
    bad = sorted(set(cells) - set("SFHG"))
    if bad:
        raise ValueError(f"map has cells {bad}; allowed are S, F, H, G")
    if cells.count("S") != 1 or "G" not in cells:
        raise ValueError(f"map needs exactly one S and at least one G, got {list(rows)}")
    return rows


class FrozenLake(gym.Env[int, int]):
    """The grid world; ``config`` (``env.config``) may hold ``map`` (list of rows)."""

    metadata = {"render_modes": []}

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        config = dict(config or {})
        unknown = sorted(set(config) - {"map"})
        if unknown:
            raise ValueError(f"unknown FrozenLake config key(s) {unknown}; valid: ['map']")
        self.rows = parse_map(config.get("map", DEFAULT_MAP))
        self.n_rows, self.n_cols = len(self.rows), len(self.rows[0])
        self.observation_space = spaces.Discrete(self.n_rows * self.n_cols)
        self.action_space = spaces.Discrete(4)
        self.start = "".join(self.rows).index("S")
        self.state = self.start

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        super().reset(seed=seed)  # seeds np_random (unused: the lake is deterministic)
        self.state = self.start
        return self.state, {}

    def step(self, action: int) -> tuple[int, SupportsFloat, bool, bool, dict[str, Any]]:
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        row, col = divmod(self.state, self.n_cols)
        d_row, d_col = MOVES[int(action)]
        row = min(max(row + d_row, 0), self.n_rows - 1)
        col = min(max(col + d_col, 0), self.n_cols - 1)
        self.state = row * self.n_cols + col
        cell = self.rows[row][col]
        return self.state, float(cell == "G"), cell in "HG", False, {}
