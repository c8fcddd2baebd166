"""Check the environment of a config before Ray starts (docs/custom-env.md#checks).

What would otherwise fail inside a remote env runner, minutes later and
buried in a Ray traceback, is found here, in the driver, with a message that
names the entry point (or id), the call and what was wrong:

- ``atari``: the id is a registered gymnasium id of an ALE game (without
  starting an emulator for Pong and Breakout);
- ``gym``: the id is registered and ``gymnasium.make(id, **env.config)`` builds (a MuJoCo
  id without the ``mujoco`` package: one line naming ``pip install 'rlperf[mujoco]'``);
- ``custom`` (and ``frozenlake``): the module imports, the class constructs with
  ``env.config``, its spaces are gymnasium spaces, ``reset(seed=..., options=...)``
  takes the keywords and returns ``(obs, info)``, one ``step`` returns
  ``(obs, reward, terminated: bool, truncated: bool, info: dict)``, and both
  observations lie inside ``observation_space``.

An env without a time limit (a ``custom`` env without ``env.max_episode_steps``:
:func:`~rlperf.envs.factory.time_limit`) gets a warning: an episode that never ends
reports no return, and a greedy evaluation caps it
(``train.evaluation.max_episode_steps``).

Only what breaks training is refused (:class:`~rlperf.errors.EnvCheckError`, a
:class:`~rlperf.errors.ConfigError`). An env that does not seed its
``np_random`` on ``reset(seed=...)`` (gymnasium's strict ``check_env``
complains) still runs: its report carries a warning, which is logged.

Results are cached per env config within a process, so a sweep's pre-flight
builds each env once.
"""

from __future__ import annotations

import json
import logging
import numbers
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from rlperf.envs.entry_point import load_entry_point
from rlperf.envs.factory import describe_env, env_kind, env_spaces, make_env, time_limit
from rlperf.envs.mujoco import is_mujoco_id, missing_mujoco
from rlperf.errors import EntryPointError, EnvCheckError

log = logging.getLogger(__name__)

#: Agent steps at which a greedy evaluation stops an episode of an env without a time limit
#: of its own (``train.evaluation.max_episode_steps`` null; rlperf.training.target).
DEFAULT_EVALUATION_CAP = 10_000

#: The seed the check resets with (any fixed value).
CHECK_SEED = 123


@dataclass
class EnvReport:
    """What the check found: the spaces, and warnings that do not stop a run."""

    kind: str
    name: str  # env.id=... / env.entry_point=...
    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]
    warnings: list[str] = field(default_factory=list)
    check_s: float = 0.0
    time_limit: int | None = None  # agent steps after which the env ends an episode itself


_CACHE: dict[str, EnvReport] = {}


def check_env(env_config: Mapping[str, Any]) -> EnvReport:
    """Check the env of ``env_config`` (the ``env`` subtree, resolved); cached per config.

    Raises:
        EnvCheckError: naming the env, the call that failed and why.
    """
    if env_kind(env_config) == "gym" and is_mujoco_id(str(env_config.get("id"))):
        missing = missing_mujoco(str(env_config.get("id")))  # not cached: installs change
        if missing is not None:
            raise EnvCheckError(missing)
    key = json.dumps(dict(env_config), sort_keys=True, default=str)
    if key not in _CACHE:
        t0 = time.perf_counter()
        checker = {"atari": _check_atari, "gym": _check_gym, "custom": _check_custom}
        report = checker[env_kind(env_config)](dict(env_config))
        report.time_limit = time_limit(env_config)
        if report.time_limit is None:
            report.warnings.append(
                f"{report.name} has no time limit (env.max_episode_steps is null and the env "
                f"has none rlperf can see): an episode that never ends reports no return, and "
                f"a greedy evaluation stops each episode at train.evaluation.max_episode_steps "
                f"(default {DEFAULT_EVALUATION_CAP}) and does not count it toward a target; "
                f"set env.max_episode_steps"
            )
        report.check_s = time.perf_counter() - t0
        _CACHE[key] = report
    report = _CACHE[key]
    for warning in report.warnings:
        log.warning("%s", warning)
    return report


def _registered_spec(env_id: str, what: str) -> Any:
    import ale_py  # noqa: F401 - registers the ALE ids with gymnasium

    try:
        return gym.spec(env_id)
    except gym.error.Error as exc:
        raise EnvCheckError(
            f"env.id={env_id} is not a registered gymnasium id ({type(exc).__name__}: {exc}); "
            f"{what}"
        ) from exc


def _check_atari(cfg: dict[str, Any]) -> EnvReport:
    env_id = str(cfg.get("id", "ALE/Pong-v5"))
    spec = _registered_spec(env_id, "an Atari env needs an ALE id such as ALE/Pong-v5")
    if "ale_py" not in str(spec.entry_point):
        raise EnvCheckError(
            f"env.id={env_id} is not an ALE (Atari) game ({spec.entry_point}), but this env "
            f"config (kind atari, e.g. env=pong) preprocesses Atari frames; use env=gym "
            f"env.id={env_id} (or env=cartpole / env=pendulum), with an MLP model such as "
            f"model=mlp64"
        )
    try:
        obs_space, act_space = env_spaces(cfg)
    except ValueError as exc:
        raise EnvCheckError(f"{describe_env(cfg)}: {exc}") from exc
    return EnvReport("atari", describe_env(cfg), obs_space, act_space)


def _check_gym(cfg: dict[str, Any]) -> EnvReport:
    env_id = str(cfg.get("id"))
    _registered_spec(env_id, "use a registered id (gymnasium.pprint_registry() lists them)")
    env = _attempt(
        cfg, f"gymnasium.make({env_id!r}, **env.config)", lambda: make_env({**cfg, "seed": None})
    )
    try:
        return EnvReport("gym", describe_env(cfg), env.observation_space, env.action_space)
    finally:
        env.close()


def _attempt(cfg: Mapping[str, Any], call: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, or an :class:`EnvCheckError` naming the env, the call and the exception."""
    try:
        return fn()
    except EntryPointError as exc:
        raise EnvCheckError(str(exc)) from exc
    except Exception as exc:
        raise EnvCheckError(
            f"{describe_env(cfg)}: {call} raised {type(exc).__name__}: {exc}"
        ) from exc


def _check_custom(cfg: dict[str, Any]) -> EnvReport:
    name = describe_env(cfg)
    spec = str(cfg.get("entry_point"))
    cls = _attempt(cfg, "import", lambda: load_entry_point(spec))
    config = dict(cfg.get("config") or {})
    call = f"{spec.split(':')[-1]}(env.config={config})"
    env = _attempt(cfg, call, lambda: cls(config))
    if not isinstance(env, gym.Env):
        raise EnvCheckError(
            f"{name}: {call} returned a {type(env).__name__}, not a gymnasium.Env; RLlib's env "
            f"runners need a subclass of gymnasium.Env"
        )
    try:
        warnings = _check_protocol(env, name)
        return EnvReport("custom", name, env.observation_space, env.action_space, warnings)
    finally:
        try:
            env.close()
        except Exception as exc:  # a failing close() does not stop training
            log.warning("%s: close() raised %s: %s", name, type(exc).__name__, exc)


def _check_protocol(env: gym.Env, name: str) -> list[str]:
    """Spaces, ``reset`` and one ``step`` of ``env``; returns the warnings."""
    for attr in ("observation_space", "action_space"):
        space = getattr(env, attr, None)
        if not isinstance(space, gym.spaces.Space):
            raise EnvCheckError(
                f"{name}: {attr} is {type(space).__name__}, not a gymnasium.spaces.Space; set "
                f"self.{attr} in __init__"
            )
    out = _call(env, name, f"reset(seed={CHECK_SEED}, options=None)", seed=CHECK_SEED)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise EnvCheckError(
            f"{name}: reset(seed={CHECK_SEED}, options=None) returned {_brief(out)}; expected a "
            f"tuple (observation, info)"
        )
    _check_obs(env, name, "reset", out[0])
    _check_info(name, "reset", out[1])
    warnings = []
    if getattr(env.unwrapped, "_np_random", None) is None:
        warnings.append(
            f"{name}: reset(seed=...) did not seed np_random (call super().reset(seed=seed) "
            f"first in reset); the env runs, but its randomness is not reproducible"
        )
    action = env.action_space.sample()
    step = _call(env, name, f"step({_brief(action)})", action=action)
    _check_step(env, name, step)
    return warnings


def _call(env: gym.Env, name: str, call: str, **kwargs: Any) -> Any:
    try:
        if "action" in kwargs:
            return env.step(kwargs["action"])
        return env.reset(seed=kwargs["seed"], options=None)
    except TypeError as exc:
        hint = ""
        if "reset" in call and "keyword" in str(exc):
            hint = (
                "; gymnasium (and RLlib) call reset with keywords: "
                "def reset(self, *, seed=None, options=None)"
            )
        raise EnvCheckError(f"{name}: {call} raised TypeError: {exc}{hint}") from exc
    except Exception as exc:
        raise EnvCheckError(f"{name}: {call} raised {type(exc).__name__}: {exc}") from exc


def _check_step(env: gym.Env, name: str, out: Any) -> None:
    call = "step(action)"
    if not (isinstance(out, tuple) and len(out) == 5):
        n = len(out) if isinstance(out, tuple) else None
        raise EnvCheckError(
            f"{name}: {call} returned {_brief(out)}"
            + (f" ({n} values)" if n is not None else "")
            + "; expected (obs, reward, terminated, truncated, info), gymnasium's 5-tuple "
            "(a 4-tuple with done is the old gym API)"
        )
    obs, reward, terminated, truncated, info = out
    _check_obs(env, name, "step", obs)
    if not isinstance(reward, numbers.Real) or isinstance(reward, bool):
        raise EnvCheckError(
            f"{name}: {call} returned reward {_brief(reward)}; expected a number (float)"
        )
    for label, flag in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(flag, bool | np.bool_):
            raise EnvCheckError(f"{name}: {call} returned {label}={_brief(flag)}; expected a bool")
    _check_info(name, "step", info)


def _check_obs(env: gym.Env, name: str, call: str, obs: Any) -> None:
    space = env.observation_space
    if space.contains(obs):
        return
    dtype = getattr(obs, "dtype", type(obs).__name__)
    shape = getattr(obs, "shape", None)
    raise EnvCheckError(
        f"{name}: {call} returned an observation outside observation_space {space}: "
        f"{_brief(obs)} (type {type(obs).__name__}, dtype {dtype}, shape {shape})"
    )


def _check_info(name: str, call: str, info: Any) -> None:
    if not isinstance(info, dict):
        raise EnvCheckError(f"{name}: {call} returned info {_brief(info)}; expected a dict")


def _brief(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
