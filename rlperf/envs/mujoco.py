"""MuJoCo locomotion envs: gymnasium's ``HalfCheetah-v5``, ``Hopper-v5``, ``Ant-v5``, ...

They are ``env.kind=gym`` envs (``env=mujoco`` is ``env=gym`` with ``HalfCheetah-v5``;
docs/environment.md#mujoco), built by ``gymnasium.make`` like any other id. Three things
are their own:

- they need the ``mujoco`` package (``pip install 'rlperf[mujoco]'``, which pins the
  versions the suite ran against); :func:`missing_mujoco` says so in one line before Ray
  starts, where gymnasium would raise ``DependencyNotInstalled`` in every env runner;
- their observations are float64, cast to float32 where the env meets the model
  (:func:`rlperf.envs.factory.float32_observations`);
- what a step *is* depends on keyword arguments that the id hides: the physics steps per
  env step (``frame_skip``), the start-state noise (``reset_noise_scale``) and whether the
  observation leaves out the torso's x position
  (``exclude_current_positions_from_observation``). :func:`simulator_facts` reads them
  from the built env for the env protocol (``simulator``), with the registered step limit.

MuJoCo's own warnings go to the log (:func:`route_warnings`), not to the terminal and a
``MUJOCO_LOG.TXT`` in the user's folder.
"""

from __future__ import annotations

import logging
from typing import Any

import gymnasium as gym

log = logging.getLogger(__name__)

#: The command that installs what MuJoCo envs need.
PIP_COMMAND = "pip install 'rlperf[mujoco]'"

_ENTRY_POINT_PREFIX = "gymnasium.envs.mujoco"

#: Keyword arguments of gymnasium 1.2's ``*-v5`` MuJoCo envs that change what a step is,
#: kept by each env as ``_<name>`` (Reacher and the pendulums lack some: None there).
_KEPT_ARGUMENTS = ("reset_noise_scale", "exclude_current_positions_from_observation")


def is_mujoco_id(env_id: str) -> bool:
    """Whether ``env_id`` is a registered gymnasium MuJoCo env."""
    try:
        entry_point = gym.spec(env_id).entry_point
    except gym.error.Error:
        return False
    return str(entry_point).startswith(_ENTRY_POINT_PREFIX)


def missing_mujoco(env_id: str) -> str | None:
    """One line saying that ``env_id`` needs MuJoCo and how to install it, where the
    ``mujoco`` package does not import; else None."""
    try:
        import mujoco  # noqa: F401 - only whether it imports
    except ImportError as exc:
        return (
            f"env.id={env_id} is a MuJoCo env, and the mujoco package is not installed "
            f"({exc}); install it with: {PIP_COMMAND}"
        )
    return None


def route_warnings() -> None:
    """Send MuJoCo's warnings to this module's logger instead of its default handler, which
    prints each to the terminal and appends it to ``MUJOCO_LOG.TXT`` in the working
    directory. A compiler attribute deprecated by mujoco 4 in gymnasium's own model files
    (HalfCheetah's ``settotalmass``: nothing a user can act on) is logged at debug level;
    any other warning (an unstable simulation: "Nan, Inf or huge value in QACC") at warning
    level. Installed in each process that builds a MuJoCo env (the driver, every env
    runner); idempotent."""
    import mujoco

    mujoco.set_mju_user_warning(_log_warning)


def _log_warning(message: str) -> None:
    level = logging.DEBUG if "is deprecated" in message else logging.WARNING
    log.log(level, "MuJoCo: %s", message)


def simulator_facts(env: gym.Env) -> dict[str, Any] | None:
    """What a MuJoCo env's step is, read from the built env (None for any other env):
    ``engine`` ``"mujoco"``, ``frame_skip``, the physics ``timestep`` and the env step
    ``dt`` in seconds, ``reset_noise_scale``,
    ``exclude_current_positions_from_observation`` and the registered
    ``max_episode_steps``."""
    base = env.unwrapped
    if not type(base).__module__.startswith(_ENTRY_POINT_PREFIX):
        return None  # (gymnasium's MuJoCo module imports mujoco: not for other envs)
    from gymnasium.envs.mujoco.mujoco_env import MujocoEnv

    if not isinstance(base, MujocoEnv):
        return None
    spec = env.spec
    facts: dict[str, Any] = {
        "engine": "mujoco",
        "frame_skip": int(base.frame_skip),
        "timestep": float(base.model.opt.timestep),
        "dt": float(base.dt),
    }
    for name in _KEPT_ARGUMENTS:
        value = getattr(base, f"_{name}", None)
        facts[name] = value if value is None or isinstance(value, bool) else float(value)
    facts["max_episode_steps"] = None if spec is None else spec.max_episode_steps
    return facts


def simulator_version() -> str:
    """``mujoco 4.0.1``: the simulator's version, recorded beside its facts."""
    import mujoco

    return f"mujoco {mujoco.__version__}"
