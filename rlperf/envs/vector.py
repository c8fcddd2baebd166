"""Vector envs of the engines RLlib takes whole (``gym_env_vectorize_mode=vector_entry_point``):
rlperf's creator (:func:`rlperf.envs.factory.make_env`) gets the env config plus
``num_envs`` and returns one ``gymnasium.vector.VectorEnv`` of that many envs.

:func:`ale_vector_env` builds ale-py's ``AtariVectorEnv`` from rlperf's Atari keys
(:data:`rlperf.specs.engines.ALE_VECTOR_KEYS` says how each maps) and transposes its
channels-first ``(N, framestack, dim, dim)`` frames to rlperf's ``(N, dim, dim, framestack)``
(:class:`ChannelsLast`: one contiguous copy), so a policy trained on either engine acts in
every downstream stage. Rewards are never clipped (rlperf reports raw scores). Its threads
are not pinned to CPUs of their own (``thread_affinity_offset=-1``): they run inside the
env runner's process and its affinity mask (``cpu_affinity=pinned``: Ray's CPUs).

:func:`engine_refusal` is the pre-flight's check of an Atari config against the engine.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from rlperf.results.protocol import ALE_FRAME_CAP
from rlperf.specs import load
from rlperf.specs.engines import EXTRA_ENGINES, REFUSED, engine_of, engine_threads, without_engine


def ale_game(env_id: str) -> str:
    """The ROM name of an ALE id: ``ALE/Pong-v5``, ``PongNoFrameskip-v4`` -> ``pong``."""
    name = str(env_id).split("/")[-1].split("-")[0].removesuffix("NoFrameskip")
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


def game_lives(env_id: str) -> int:
    """The lives a game starts with (ALE's counter; 0 for games without lives, Pong)."""
    env = gym.make(str(env_id), disable_env_checker=True)
    try:
        env.reset(seed=0)
        return int(env.unwrapped.ale.lives())  # type: ignore[attr-defined]
    finally:
        env.close()


def engine_refusal(env: Mapping[str, Any]) -> str | None:
    """Why the config's engine cannot honour its env (one line naming the key), else None."""
    spec = engine_of(env)
    kind = str(env.get("kind") or "atari")
    if spec.name in EXTRA_ENGINES:
        module, extra = EXTRA_ENGINES[spec.name]
        if importlib.util.find_spec(module) is None:
            return (
                f"env.engine={spec.name} needs the {module} package, which is not installed: "
                f"pip install 'rlperf[{extra}]' (or use env.engine=ale_vector)"
            )
    if kind not in spec.kinds:
        return (
            f"env.engine={spec.name} steps {', '.join(spec.kinds)} envs only, not env.kind={kind} "
            f"(use env.engine=python, gymnasium_sync or gymnasium_async)"
        )
    threads = env.get("threads")
    if threads is not None and not spec.threaded and int(threads) != 1:
        return (
            f"env.threads={threads} does nothing with env.engine={spec.name}, which has no "
            f"threads of its own (ale_vector and envpool have); leave env.threads=null"
        )
    if threads is not None and int(threads) < 1:
        return f"env.threads={threads} must be >= 1 (or null: 1)"
    if kind != "atari" or not spec.atari_keys:
        return None
    frameskip = env.get("frameskip", 1)
    if spec.atari_keys.get("frameskip") == REFUSED and frameskip != 1:
        return (
            f"env.frameskip={frameskip} cannot be honoured by env.engine={spec.name}: its one "
            f"action repeat is env.skip (max over the last 2 frames); set env.frameskip=1 and "
            f"env.skip to the frames per step you want, or use env.engine=python"
        )
    life_keys = [k for k in ("episodic_life", "fire_reset") if env.get(k)]
    if life_keys and game_lives(str(env.get("id"))) > 0:
        keys = " and ".join(f"env.{k}=true" for k in life_keys)
        return (
            f"{keys} cannot be honoured by env.engine={spec.name} for {env.get('id')}, a game "
            f"with lives (ALE's vector env ends episodes on its own counter and presses FIRE at "
            f"reset only); set {' '.join(f'env.{k}=false' for k in life_keys)}, or use "
            f"env.engine=python"
        )
    return None


class ChannelsLast(gym.vector.VectorWrapper):
    """``(N, C, H, W)`` frames as ``(N, H, W, C)``: a contiguous transposed copy.

    Its spaces are batched from the engine's single ones (EnvPool's ``observation_space``
    and ``action_space`` are a single env's, against gymnasium's vector convention)."""

    def __init__(self, env: gym.vector.VectorEnv) -> None:
        super().__init__(env)
        n = int(env.num_envs)
        c, h, w = env.single_observation_space.shape  # type: ignore[misc]
        self.single_observation_space = spaces.Box(0, 255, (h, w, c), np.uint8)
        self.observation_space = batch_space(self.single_observation_space, n)
        self.single_action_space = env.single_action_space
        self.action_space = batch_space(env.single_action_space, n)

    @staticmethod
    def frames(obs: np.ndarray) -> np.ndarray:
        """The engine's ``(N, C, H, W)`` as a contiguous ``(N, H, W, C)`` array: one strided
        copy here (about 28 us per env step with 8 envs at 84 px) instead of the strided
        reads of a view in every consumer (RLlib copies each sub-env's frame into its episode
        and stacks them again for the module: docs/benchmarks.md#in-training)."""
        return np.ascontiguousarray(obs.transpose(0, 2, 3, 1))

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return self.frames(obs), info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        return self.frames(obs), reward, terminated, truncated, info


def ale_vector_env(env: Mapping[str, Any], num_envs: int) -> gym.vector.VectorEnv:
    """ale-py's ``AtariVectorEnv`` of ``num_envs`` envs for an rlperf Atari env config (its
    keys as :data:`~rlperf.specs.engines.ALE_VECTOR_KEYS` says), channels last."""
    # ale_py, cv2 (rlperf.envs.atari): deferred, validation imports this module for
    # engine_refusal before any env is built.
    from ale_py.vector_env import AtariVectorEnv

    from rlperf.envs.atari import resolve_env_config

    cfg = resolve_env_config(without_engine(env))
    skip = int(cfg["skip"])
    steps = cfg["max_episode_steps"]
    frames = ALE_FRAME_CAP if steps is None else min(ALE_FRAME_CAP, int(steps) * skip)
    vector = AtariVectorEnv(
        ale_game(cfg["id"]),
        num_envs=int(num_envs),
        num_threads=engine_threads(env),
        thread_affinity_offset=-1,
        max_num_frames_per_episode=frames,
        repeat_action_probability=float(cfg["repeat_action_probability"]),
        img_height=int(cfg["dim"]),
        img_width=int(cfg["dim"]),
        grayscale=True,
        stack_num=int(cfg["framestack"]),
        frameskip=skip,
        maxpool=True,
        noop_max=int(cfg["noop_max"]),
        episodic_life=False,  # refused for games with lives (engine_refusal); none here
        reward_clipping=False,
        use_fire_reset=bool(cfg["fire_reset"]),
    )
    return ChannelsLast(vector)


class EnvPoolSeeded(ChannelsLast):
    """EnvPool's pool, channels last, seeded as the other engines are: EnvPool fixes its envs'
    seeds when it builds them and ignores ``reset(seed=)`` (with a warning), so a reset with
    another seed builds the pool again with it (RLlib resets with ``seed + worker_index``
    once, before sampling); sub-env i then gets seed + i, as on every engine."""

    def __init__(self, make: Any, seed: int) -> None:
        self._make, self.seed = make, int(seed)
        super().__init__(make(self.seed))

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        seed = kwargs.pop("seed", None)
        if isinstance(seed, list | tuple):
            seed = seed[0]
        if seed is not None and int(seed) != self.seed:
            self.env.close()
            self.env, self.seed = self._make(int(seed)), int(seed)
        obs, info = self.env.reset(**kwargs)
        return self.frames(obs), info


def envpool_env(env: Mapping[str, Any], num_envs: int) -> gym.vector.VectorEnv:
    """EnvPool's Atari pool of ``num_envs`` envs for an rlperf Atari env config (its keys as
    :data:`~rlperf.specs.engines.ENVPOOL_KEYS` says), channels last (:class:`EnvPoolSeeded`)."""
    # An extra (rlperf[envpool]): engine_refusal names it where absent; ale_py and cv2
    # (rlperf.envs.atari): deferred as in ale_vector_env.
    import envpool

    from rlperf.envs.atari import resolve_env_config

    cfg = resolve_env_config(without_engine(env))
    game = ale_game(cfg["id"])
    steps = cfg["max_episode_steps"]
    skip = int(cfg["skip"])
    options = dict(
        num_envs=int(num_envs),
        num_threads=engine_threads(env),
        thread_affinity_offset=-1,
        max_episode_steps=ALE_FRAME_CAP // skip if steps is None else int(steps),
        img_height=int(cfg["dim"]),
        img_width=int(cfg["dim"]),
        gray_scale=True,
        stack_num=int(cfg["framestack"]),
        frame_skip=skip,
        noop_max=max(1, int(cfg["noop_max"])),  # EnvPool: 1 = no NOOPs (rlperf: 0)
        episodic_life=False,  # refused for games with lives (engine_refusal)
        reward_clip=False,
        use_fire_reset=bool(cfg["fire_reset"]),
        repeat_action_probability=float(cfg["repeat_action_probability"]),
    )
    task = "".join(part.capitalize() for part in game.split("_")) + "-v5"
    return EnvPoolSeeded(
        lambda seed: envpool.make_gymnasium(task, seed=seed, **options), int(env.get("seed") or 0)
    )


def make_vector_env(env: Mapping[str, Any], num_envs: int) -> gym.vector.VectorEnv:
    """The vector env of an engine RLlib takes whole (``vector_entry_point``)."""
    spec = engine_of(env)
    if not spec.vector:
        raise ValueError(f"env.engine={spec.name} builds its envs one by one, not as a vector env")
    vector_env: gym.vector.VectorEnv = load(spec.builder)(env, num_envs)
    return vector_env
