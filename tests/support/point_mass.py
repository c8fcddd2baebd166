"""A 2-D point mass steered to the origin: a small env with a 2-D continuous action.

``env=custom env.entry_point=support.point_mass:PointMass env.max_episode_steps=30``
(``tests`` on ``PYTHONPATH``; the time limit is the env's own, said so rlperf sees it).
The observation is the position ``(x, y)`` in [-1, 1]^2; the action a velocity
``(vx, vy)`` in a Box whose two dimensions have different ranges ([-1, 1] and
[-0.5, 0.5], so a rule that mixes the dimensions' ranges is caught); each step
moves the point by 0.2 x the action (clipped to the square) and rewards
``-|position|``. Episodes last ``config["steps"]`` steps (default 30), starting at a
seeded random position. ``config["dtype"]`` (default float32) is the observations' dtype:
float64, as MuJoCo's and many users' envs give them, which rlperf casts to float32 where
the env meets the model (rlperf.envs.factory.float32_observations). The best actor pushes
toward the origin, hard:
:func:`teacher_actions` is that rule (what :func:`fit_actor` teaches an MLP).
gymnasium's own 2-D Box envs need Box2D or MuJoCo, which rlperf does not install.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

LOW = np.array([-1.0, -0.5], np.float32)
HIGH = np.array([1.0, 0.5], np.float32)


class PointMass(gym.Env):
    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.steps = int((config or {}).get("steps", 30))
        self.dtype = np.dtype((config or {}).get("dtype", "float32"))
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), self.dtype)
        self.action_space = gym.spaces.Box(LOW, HIGH, dtype=np.float32)
        self.pos = np.zeros(2, np.float32)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        self.t = 0
        return self.pos.astype(self.dtype), {}

    def step(self, action: Any) -> Any:
        a = np.clip(np.asarray(action, np.float32).reshape(2), LOW, HIGH)
        self.pos = np.clip(self.pos + 0.2 * a, -1.0, 1.0).astype(np.float32)
        self.t += 1
        reward = -float(np.linalg.norm(self.pos))
        return self.pos.astype(self.dtype), reward, False, self.t >= self.steps, {}


def teacher_actions(obs: np.ndarray) -> np.ndarray:
    """Toward the origin, each dimension scaled into its range: ``clip(-2.5 pos)``."""
    return np.clip(-2.5 * np.asarray(obs, np.float32) * HIGH, LOW, HIGH)


def fit_actor(net: Any, steps: int = 400, seed: int = 0) -> float:
    """Fit a Box policy's reference actor (``net.squash``) to :func:`teacher_actions` on
    uniform positions by Adam on the squared action error; returns the final mean absolute
    error relative to each dimension's range."""
    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    low, high = torch.from_numpy(LOW), torch.from_numpy(HIGH)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)

    def act(x: torch.Tensor) -> torch.Tensor:
        mean = net.logits(x)[:, :2]
        unit = torch.tanh(mean) if net.squash == "tanh" else torch.clamp(mean, -1.0, 1.0)
        return low + (unit + 1.0) * (high - low) / 2.0

    net.train()
    for _ in range(steps):
        obs = rng.uniform(-1, 1, (128, 2)).astype(np.float32)
        loss = ((act(torch.from_numpy(obs)) - torch.from_numpy(teacher_actions(obs))) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    net.eval()
    obs = rng.uniform(-1, 1, (512, 2)).astype(np.float32)
    err = np.abs(net.actions_of(net.logits(torch.from_numpy(obs)).detach().numpy())
                 - teacher_actions(obs)) / (HIGH - LOW)  # fmt: skip
    return float(err.mean())


def make_run_folder(path: Any, squash: str = "tanh", fit_steps: int = 400) -> dict[str, Any]:
    """A training-run-like folder of a point-mass actor fitted to :func:`teacher_actions`
    (``squash="tanh"``: SAC's head, saved without a value network, as SAC saves it):
    ``.hydra/config.yaml`` (``env=custom``, ``model=mlp64``), ``checkpoint/rlperf_policy.pt``
    and ``checkpoint/probe.npz``. ``fit_steps=0`` keeps the initial weights.

    Returns ``{"path", "policy", "net", "fit_error"}``.
    """
    from pathlib import Path

    import torch
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from rlperf.config.schema import register_configs
    from rlperf.layout import CHECKPOINT_DIR, CONFIG_FILE, POLICY_FILE
    from rlperf.models.actor import action_range
    from rlperf.models.mlp_net import MlpNet
    from rlperf.models.policy_file import save_policy
    from rlperf.runs.probe import write_probe

    path = Path(path)
    env = PointMass()
    torch.manual_seed(0)
    net = MlpNet.for_spaces(env.observation_space, env.action_space, [64, 64], "tanh",
                            squash=squash, value=squash != "tanh")  # fmt: skip
    fit_error = fit_actor(net, fit_steps) if fit_steps else float("nan")
    policy = save_policy(net, path / CHECKPOINT_DIR / POLICY_FILE, extra={"trained": "supervised"})
    obs = np.random.default_rng(7).uniform(-1, 1, (32, 2)).astype(np.float32)
    with torch.no_grad():
        logits = net.logits(torch.from_numpy(obs)).numpy()
    write_probe(path / CHECKPOINT_DIR, obs, logits, net.actions_of(logits),
                action_range(net.action_spec))  # fmt: skip
    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module("rlperf.conf", version_base="1.3"):
            cfg = compose("config", overrides=[
                "stage=train", "env=custom", "env.entry_point=support.point_mass:PointMass",
                "env.max_episode_steps=30", "model=mlp64", "algo=sac",
            ])  # fmt: skip
    finally:
        GlobalHydra.instance().clear()
    (path / CONFIG_FILE).parent.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, path / CONFIG_FILE, resolve=True)
    return {"path": path, "policy": policy, "net": net, "fit_error": fit_error}
