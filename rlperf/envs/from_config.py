"""The env a composed config describes, for the stages that build one from ``cfg.env``."""

from __future__ import annotations

from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from rlperf.envs.atari import DEFAULT_ENV_CONFIG
from rlperf.envs.factory import make_env

#: Observations saved in a checkpoint's ``probe.npz`` (see :mod:`rlperf.runs.probe`).
PROBE_SIZE = 32


def env_config(cfg: DictConfig) -> dict[str, Any]:
    """The ``env`` subtree as a plain dict for :func:`rlperf.envs.factory.make_env`, with the
    job's ``seed`` (a config of rlperf 0.1 without ``kind`` is Atari)."""
    env = cast(dict[str, Any], OmegaConf.to_container(cfg.env, resolve=True))
    env.setdefault("kind", "atari")
    env["seed"] = int(cfg.seed)
    return env


def probe_observations(cfg: DictConfig, n: int = PROBE_SIZE) -> Any:
    """``n`` real observations of the config's env (random actions, fixed ``seed``), stacked."""
    import numpy as np

    env = make_env(env_config(cfg))
    env.action_space.seed(int(cfg.seed))
    try:
        obs, _ = env.reset(seed=int(cfg.seed))
        frames: list[Any] = []
        while len(frames) < n:
            frames.append(obs)
            obs, _, term, trunc, _ = env.step(env.action_space.sample())
            if term or trunc:
                obs, _ = env.reset()
        return np.stack([np.asarray(f) for f in frames])
    finally:
        env.close()


def play_env(ecfg: DictConfig, obs_shape: tuple[int, ...]) -> dict[str, Any]:
    """The env to play: ``ecfg.env`` (the run's, as trained, with command-line ``env.*``).

    An Atari env's ``dim`` and ``framestack`` always follow the network's input.
    """
    env = cast(dict[str, Any], OmegaConf.to_container(ecfg.env, resolve=True))
    return env_for_policy(env, obs_shape)


def env_for_policy(env: dict[str, Any], obs_shape: tuple[int, ...]) -> dict[str, Any]:
    """``env`` (an ``env`` config as a dict) without its seed; for Atari, only the Atari
    keys, with ``dim`` and ``framestack`` from the network's input ``obs_shape``."""
    env = dict(env)
    env.pop("seed", None)
    if str(env.get("kind") or "atari") != "atari":
        return env
    # Without "kind": the settings hash of observation sets cached before env kinds existed.
    out = {k: env[k] for k in DEFAULT_ENV_CONFIG if k in env}
    out["dim"], out["framestack"] = int(obs_shape[0]), int(obs_shape[2])
    return out
