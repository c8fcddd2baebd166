"""The env a composed config describes, for the stages that build one from ``cfg.env``."""

from __future__ import annotations

from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

#: Observations saved in a checkpoint's ``probe.npz`` (see :mod:`rlperf.runs`).
PROBE_SIZE = 32


def env_config(cfg: DictConfig) -> dict[str, Any]:
    """The ``env`` subtree as a plain dict for the env creator, with the job's ``seed``."""
    env = cast(dict[str, Any], OmegaConf.to_container(cfg.env, resolve=True))
    env["seed"] = int(cfg.seed)
    return env


def probe_observations(cfg: DictConfig, n: int = PROBE_SIZE) -> Any:
    """``n`` real observations of the config's env (random actions, fixed ``seed``)."""
    import numpy as np

    from rlperf.envs.atari import make_atari_env

    env = make_atari_env(env_config(cfg))
    rng = np.random.default_rng(int(cfg.seed))
    try:
        obs, _ = env.reset(seed=int(cfg.seed))
        frames: list[np.ndarray] = []
        n_actions = int(cast(Any, env.action_space).n)
        while len(frames) < n:
            frames.append(obs)
            obs, _, term, trunc, _ = env.step(int(rng.integers(n_actions)))
            if term or trunc:
                obs, _ = env.reset()
        return np.stack(frames)
    finally:
        env.close()
