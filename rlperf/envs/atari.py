"""Atari (ALE) environments with DeepMind-style preprocessing.

The env config subtree (``env.env_config`` in rlperf's Hydra config, or RLlib's
``EnvContext``) accepts these keys, all optional:

=============================  ===============  =================================================
key                            default          meaning
=============================  ===============  =================================================
``id``                         ``ALE/Pong-v5``  gymnasium id of an ALE game
``dim``                        ``84``           side of the square, resized grayscale frame
``framestack``                 ``4``            frames stacked on the last axis
``frameskip``                  ``1``            ALE-level frameskip for ``gym.make``: an int, or
                                                [low, high) for a random skip per step
``skip``                       ``4``            agent-level action repeat, max over last 2 frames
``repeat_action_probability``  ``0.0``          sticky actions, passed to ``gym.make``
``noop_max``                   ``30``           up to this many raw no-ops after a real reset
``episodic_life``              ``True``         a lost life ends the learner's episode
``fire_reset``                 ``True``         press FIRE after reset (games that have FIRE)
``max_episode_steps``          ``None``         agent-step limit per learner episode
``seed``                       ``None``         default seed of the first reset
=============================  ===============  =================================================

The wrappers are our own rather than RLlib's ``atari_wrappers``: RLlib's
``EpisodicLifeEnv`` decides between a real reset and a no-op continuation from
``terminated`` alone, so after a truncation (ALE's frame cap or a time limit)
it keeps stepping a finished game and every later "episode" is one step long.
:class:`EpisodicLife` continues the game only after a life-loss termination.

Import is cheap: gymnasium, numpy and cv2 only; Ray is imported inside
:func:`register_rllib_env`.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat, cast

import ale_py
import cv2
import gymnasium as gym
import numpy as np
from ale_py.env import AtariEnv
from gymnasium import spaces

from rlperf.results.protocol import ATARI_DEFAULTS
from rlperf.specs.engines import ENGINE_KEYS

__all__ = [
    "DEFAULT_ENV_CONFIG",
    "RLLIB_ENV_NAME",
    "EpisodicLife",
    "FireReset",
    "FrameStack",
    "MaxAndSkip",
    "NoopReset",
    "ResizeFrame",
    "derive_seed",
    "env_spaces",
    "make_atari_env",
    "register_rllib_env",
    "resolve_env_config",
]

gym.register_envs(ale_py)

#: Name under which :func:`register_rllib_env` registers :func:`make_atari_env`.
RLLIB_ENV_NAME = "rlperf_atari"

#: Every accepted env_config key with its default: the protocol's defaults (written once,
#: in the results layer, where the report reads them too) and the default seed.
DEFAULT_ENV_CONFIG: dict[str, Any] = {**ATARI_DEFAULTS, "seed": None}

# Minimal action-set sizes of games, so env_spaces() needs no emulator for
# them (tests check the table against ale-py). Keyed by the lower-case game
# name as it appears in the id ("ALE/Pong-v5", "PongNoFrameskip-v4").
_KNOWN_ACTION_COUNTS = {"pong": 6, "breakout": 4}

# Keys that are not settings of the game: RLlib's key of a vectorised EnvContext, rlperf's
# env kind (rlperf.envs.factory), which must say atari where it is given, and its engine
# (rlperf.specs.engines: what steps the env, not what it is).
_RLLIB_CONTEXT_KEYS = frozenset({"num_envs", "kind", *ENGINE_KEYS})

# How many envs this process has built per (seed, worker_index, vector_index):
# RLlib 2.60 creates all sub-envs of an env runner from one EnvContext with
# vector_index 0, so the ordinal is what tells them apart.
_ENV_ORDINALS: collections.Counter[tuple[int, int, int]] = collections.Counter()


def _ale_env(env: gym.Env) -> AtariEnv:
    """The ALE env at the bottom of a wrapper stack."""
    return cast(AtariEnv, env.unwrapped)


def _lives_of(env: gym.Env, info: Mapping[str, Any]) -> int:
    """The life counter after a step or reset: ``info["lives"]``, else ALE's own."""
    lives = info.get("lives")
    return int(lives) if lives is not None else int(_ale_env(env).ale.lives())


# --------------------------------------------------------------------------
# Wrappers (inner to outer in the order make_atari_env stacks them)
# --------------------------------------------------------------------------


class NoopReset(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """On a real reset, take a random number (1..noop_max) of NOOP actions.

    Randomises the start state of deterministic ALE games. Uses the wrapped
    env's ``np_random``, so it is reproducible under ``reset(seed=...)``.
    """

    def __init__(self, env: gym.Env, noop_max: int = 30) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, noop_max=noop_max)
        gym.Wrapper.__init__(self, env)
        self.noop_max = noop_max
        meanings = _ale_env(env).get_action_meanings()
        if meanings[0] != "NOOP":
            raise ValueError(f"action 0 of {env.spec and env.spec.id} is {meanings[0]}, not NOOP")

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        if self.noop_max <= 0:
            return obs, info
        noops = int(self.np_random.integers(1, self.noop_max + 1))
        for _ in range(noops):
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info


class MaxAndSkip(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Repeat each action ``skip`` times; observe the max of the last 2 frames.

    The max removes the flicker of sprites that ALE draws on alternate
    frames. Rewards are summed; an episode end stops the repeat early.
    """

    def __init__(self, env: gym.Env, skip: int = 4) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, skip=skip)
        gym.Wrapper.__init__(self, env)
        self.skip = skip

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        total_reward = 0.0
        prev_obs = None
        obs: Any = None
        terminated = truncated = False
        info: dict[str, Any] = {}
        for _ in range(self.skip):
            prev_obs = obs
            obs, reward, terminated, truncated, info = self.env.step(action)
            total_reward += float(reward)
            if terminated or truncated:
                break
        if prev_obs is not None:
            # ALE returns a fresh array per step, so no copies are needed.
            obs = np.maximum(prev_obs, obs)
        return obs, total_reward, terminated, truncated, info


class EpisodicLife(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """A lost life ends the learner's episode; the game itself goes on.

    ``step`` returns ``terminated=True`` when the life counter drops (and is
    still above 0). The following ``reset()`` then continues the game with a
    NOOP step instead of resetting it — but only if the previous step was such
    a life-loss termination: after a game over, any truncation (ALE frame cap
    or a time limit inside this wrapper), a reset in mid-life (a wrapper
    outside truncated the episode) or a seeded reset, the game is really reset.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self._lives = 0
        self._continue_game = False

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = _lives_of(self.env, info)
        life_lost = 0 < lives < self._lives
        self._lives = lives
        self._continue_game = life_lost and not terminated and not truncated
        return obs, reward, terminated or life_lost, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if self._continue_game and seed is None:
            self._continue_game = False
            obs, _, terminated, truncated, info = self.env.step(0)
            if not (terminated or truncated):
                self._lives = _lives_of(self.env, info)
                return obs, info
        self._continue_game = False
        obs, info = self.env.reset(seed=seed, options=options)
        self._lives = _lives_of(self.env, info)
        return obs, info


class FireReset(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """At the start of every life, press FIRE (then action 2), for games that wait for FIRE.

    After reset: the same sequence as OpenAI baselines and RLlib 1.1, which the
    2021 study used; if either step ends the episode (e.g. a life is lost),
    reset again. After a life lost in mid-episode (``episodic_life=false``, a
    whole game per episode) the same presses follow in the same ``step``, their
    rewards added: a policy trained with ``episodic_life=true`` never had to
    press FIRE itself (each life began with this wrapper's reset), so a greedy
    one would otherwise wait at a relaunch until the frame cap.
    """

    _MAX_ATTEMPTS = 100

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        meanings = _ale_env(env).get_action_meanings()
        self.fire_action = meanings.index("FIRE")
        self.n_actions = len(meanings)
        self._lives = 0

    def _presses(self) -> list[int]:
        return [self.fire_action] + ([2] if self.n_actions >= 3 else [])

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        total = float(reward)
        if _lives_of(self.env, info) < self._lives and not (terminated or truncated):
            for press in self._presses():
                obs, reward, terminated, truncated, info = self.env.step(press)
                total += float(reward)
                if terminated or truncated:
                    break
        self._lives = _lives_of(self.env, info)
        return obs, total, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        for _ in range(self._MAX_ATTEMPTS):
            obs, info = self.env.reset(seed=seed, options=options)
            # A retry with the same seed would replay the same failure.
            seed = None
            for action in self._presses():
                obs, _, terminated, truncated, info = self.env.step(action)
                if terminated or truncated:
                    break
            else:
                self._lives = _lives_of(self.env, info)
                return obs, info
        raise RuntimeError(f"FireReset: every one of {self._MAX_ATTEMPTS} resets ended at once")


class ResizeFrame(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Resize a 2-D grayscale frame to ``dim x dim`` with ``cv2.INTER_AREA``."""

    def __init__(self, env: gym.Env, dim: int = 84) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, dim=dim)
        gym.ObservationWrapper.__init__(self, env)
        self.dim = dim
        self.observation_space = spaces.Box(0, 255, (dim, dim), np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        if observation.ndim == 3:  # an RGB env was wrapped
            observation = cv2.cvtColor(observation, cv2.COLOR_RGB2GRAY)
        return cv2.resize(observation, (self.dim, self.dim), interpolation=cv2.INTER_AREA)


class FrameStack(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Stack the last ``k`` frames on the last axis, newest last.

    Keeps the last ``k`` frames in a deque and interleaves them with
    ``cv2.merge`` into a fresh ``(dim, dim, k)`` array per step (about 3 µs
    at 84x84x4; numpy's strided shift-and-copy takes 10x as long). Returned
    arrays are never written again, so a consumer may keep them. After reset
    every slot holds the first frame.
    """

    def __init__(self, env: gym.Env, k: int = 4) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, k=k)
        gym.Wrapper.__init__(self, env)
        self.k = k
        shape = env.observation_space.shape
        assert shape is not None, "FrameStack needs an env with an array observation space"
        h, w = shape[:2]
        self.observation_space = spaces.Box(0, 255, (h, w, k), np.uint8)
        self._frames: collections.deque[np.ndarray] = collections.deque(maxlen=k)

    def _stacked(self) -> np.ndarray:
        if self.k == 1:
            return self._frames[0][:, :, None].copy()
        return cv2.merge(list(self._frames))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        frame, info = self.env.reset(seed=seed, options=options)
        self._frames.extend([frame] * self.k)
        return self._stacked(), info

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        frame, reward, terminated, truncated, info = self.env.step(action)
        self._frames.append(frame)
        return self._stacked(), reward, terminated, truncated, info


class _DefaultSeed(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Use ``seed`` for the first reset that is not given a seed of its own."""

    def __init__(self, env: gym.Env, seed: int) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, seed=seed)
        gym.Wrapper.__init__(self, env)
        self.default_seed = seed
        self._pending_seed: int | None = seed
        env.action_space.seed(seed)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if seed is None:
            seed = self._pending_seed
        self._pending_seed = None
        return self.env.reset(seed=seed, options=options)


# --------------------------------------------------------------------------
# Config handling and factories
# --------------------------------------------------------------------------


def resolve_env_config(env_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge ``env_config`` over :data:`DEFAULT_ENV_CONFIG` and validate it.

    Accepts a plain dict, an OmegaConf ``DictConfig`` or RLlib's ``EnvContext``
    (a dict subclass). Keys: see the module docstring.

    Raises:
        ValueError: an unknown key (the message names it and lists the valid
            keys) or a value out of range.
    """
    given = dict(env_config or {})
    if given.get("kind", "atari") != "atari":
        raise ValueError(f"env_config.kind={given['kind']!r}: make_atari_env builds kind atari")
    for key in _RLLIB_CONTEXT_KEYS:
        given.pop(key, None)
    unknown = sorted(set(given) - set(DEFAULT_ENV_CONFIG))
    if unknown:
        raise ValueError(
            f"unknown env_config key(s) {unknown}; valid keys are {sorted(DEFAULT_ENV_CONFIG)}"
        )
    cfg = {**DEFAULT_ENV_CONFIG, **given}
    cfg["frameskip"] = _frameskip(cfg["frameskip"])
    for key, minimum in (("dim", 1), ("framestack", 1), ("skip", 1)):
        if not _is_int(cfg[key]) or cfg[key] < minimum:
            raise ValueError(f"env_config.{key} must be an int >= {minimum}, got {cfg[key]!r}")
    if not _is_int(cfg["noop_max"]) or cfg["noop_max"] < 0:
        raise ValueError(f"env_config.noop_max must be an int >= 0, got {cfg['noop_max']!r}")
    if not 0.0 <= float(cfg["repeat_action_probability"]) <= 1.0:
        raise ValueError(
            "env_config.repeat_action_probability must lie in [0, 1], "
            f"got {cfg['repeat_action_probability']!r}"
        )
    steps = cfg["max_episode_steps"]
    if steps is not None and (not _is_int(steps) or steps < 1):
        raise ValueError(f"env_config.max_episode_steps must be null or an int >= 1, got {steps!r}")
    seed = cfg["seed"]
    if seed is not None and (not _is_int(seed) or seed < 0):
        raise ValueError(f"env_config.seed must be null or an int >= 0, got {seed!r}")
    return cfg


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _frameskip(value: Any) -> int | tuple[int, int]:
    """An int >= 1, or a [low, high) pair (ALE draws low..high-1 per step)."""
    if _is_int(value) and value >= 1:
        return value
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        low, high = value
        if _is_int(low) and _is_int(high) and 1 <= low < high:
            return (low, high)
    raise ValueError(
        f"env_config.frameskip must be an int >= 1 or a pair [low, high) with "
        f"1 <= low < high, got {value!r}"
    )


def derive_seed(seed: int, worker_index: int = 0, vector_index: int = 0, ordinal: int = 0) -> int:
    """Seed of one env instance, from the configured seed and its position.

    Returns ``seed`` itself for worker 0, vector 0, ordinal 0 (a plain,
    non-RLlib use), otherwise a well-mixed 32-bit seed from
    ``numpy.random.SeedSequence`` so runners and sub-envs get unrelated,
    reproducible streams.
    """
    if worker_index == 0 and vector_index == 0 and ordinal == 0:
        return seed
    sequence = np.random.SeedSequence([seed, worker_index, vector_index, ordinal])
    return int(sequence.generate_state(1, dtype=np.uint32)[0])


def _instance_seed(env_config: Mapping[str, Any], seed: int) -> int:
    if not hasattr(env_config, "worker_index"):
        return seed
    worker_index = int(getattr(env_config, "worker_index", 0) or 0)
    vector_index = int(getattr(env_config, "vector_index", 0) or 0)
    key = (seed, worker_index, vector_index)
    ordinal = _ENV_ORDINALS[key]
    _ENV_ORDINALS[key] += 1
    return derive_seed(seed, worker_index, vector_index, ordinal)


def make_atari_env(env_config: Mapping[str, Any] | None = None) -> gym.Env:
    """Build a preprocessed ALE env (the ``env.env_config`` subtree).

    Keys (all optional): ``id``, ``dim``, ``framestack``, ``frameskip``,
    ``skip``, ``repeat_action_probability``, ``noop_max``, ``episodic_life``,
    ``fire_reset``, ``max_episode_steps``, ``seed`` — see the module docstring.

    Wrapper order, inner to outer: ALE (grayscale) → :class:`NoopReset` →
    :class:`MaxAndSkip` → :class:`EpisodicLife` → :class:`FireReset` →
    :class:`ResizeFrame` → :class:`FrameStack` → ``TimeLimit`` (counts the
    steps the learner sees, per learner episode) → default seed.

    With ``seed`` set and an RLlib ``EnvContext`` as ``env_config``, each env
    instance gets :func:`derive_seed` of (seed, worker_index, vector_index,
    ordinal of this env in the process), so runners and sub-envs differ
    while runs stay reproducible. A seed passed to ``reset()`` (RLlib passes
    one when ``config.debugging(seed=...)`` is set) wins over it.

    Returns:
        A gymnasium env with observation space
        ``Box(0, 255, (dim, dim, framestack), uint8)``.
    """
    cfg = resolve_env_config(env_config)
    env = gym.make(
        cfg["id"],
        obs_type="grayscale",
        frameskip=cfg["frameskip"],
        repeat_action_probability=float(cfg["repeat_action_probability"]),
        disable_env_checker=True,
    )
    if cfg["noop_max"] > 0:
        env = NoopReset(env, cfg["noop_max"])
    if cfg["skip"] > 1:
        env = MaxAndSkip(env, cfg["skip"])
    if cfg["episodic_life"]:
        env = EpisodicLife(env)
    if cfg["fire_reset"] and "FIRE" in _ale_env(env).get_action_meanings():
        env = FireReset(env)
    env = ResizeFrame(env, cfg["dim"])
    env = FrameStack(env, cfg["framestack"])
    if cfg["max_episode_steps"] is not None:
        env = gym.wrappers.TimeLimit(env, cfg["max_episode_steps"])
    if cfg["seed"] is not None:
        env = _DefaultSeed(env, _instance_seed(env_config or {}, cfg["seed"]))
    return env


def env_spaces(env_config: Mapping[str, Any] | None = None) -> tuple[spaces.Box, spaces.Discrete]:
    """Observation and action space of :func:`make_atari_env` for ``env_config``.

    Needs no emulator for games with a known action count (Pong, Breakout);
    otherwise builds the env once and closes it.
    """
    cfg = resolve_env_config(env_config)
    observation_space = spaces.Box(0, 255, (cfg["dim"], cfg["dim"], cfg["framestack"]), np.uint8)
    game = cfg["id"].split("/")[-1].split("-")[0].lower().removesuffix("noframeskip")
    if game in _KNOWN_ACTION_COUNTS:
        return observation_space, spaces.Discrete(_KNOWN_ACTION_COUNTS[game])
    env = make_atari_env({**cfg, "seed": None})
    try:
        action_space = env.action_space
        assert isinstance(action_space, spaces.Discrete)
        return observation_space, action_space
    finally:
        env.close()


def register_rllib_env() -> str:
    """Register :func:`make_atari_env` with Ray Tune as ``"rlperf_atari"``.

    Returns the name, to pass as ``config.environment(env=...)``; the
    ``env_config`` given there is the config subtree described above.
    """
    # Ray Tune: only to register the env; importing rlperf.envs must not import Ray.
    from ray.tune.registry import register_env

    register_env(RLLIB_ENV_NAME, make_atari_env)
    return RLLIB_ENV_NAME
