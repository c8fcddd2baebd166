"""The env protocol: what an env step *is*, recorded with every result (``env_protocol``).

Two runs do the same work only if their envs do: an env step of ``ALE/Pong-v5`` with
rlperf's defaults is 4 emulator frames without sticky actions, one of the 2021 study's
``Pong-v0`` is 2, 3 or 4 frames with sticky actions 0.25. Every training, rollout and
edge job writes :func:`env_protocol` of the env it played into ``summary.json``
(``env_protocol``, docs/results.md); the report reads it back (legacy runs:
:func:`legacy_env_protocol` of their ``params.json``) and ranks cells against each other
only when their :func:`protocol_key` is equal. Standard library only: the report imports
this module, and neither it nor the results layer may import :mod:`rlperf.envs`.

The record (schema 1; ``None`` where a field does not apply or is not known):

==============================  =====================================================
field                           meaning
==============================  =====================================================
``schema``                      version of this record (1)
``kind``                        ``atari``, ``gym`` or ``custom`` (``env.kind``)
``env_id``                      gymnasium id (custom: the entry point)
``env_version``                 ``v5`` of ``ALE/Pong-v5``, ``v0`` / ``v4`` of old ids
``frameskip``                   ALE-level frameskip: an int, or ``[low, high)`` (ALE
                                draws low..high-1 frames per step)
``agent_skip``                  rlperf's action repeat ``skip`` (max of last 2 frames)
``frames_per_step``             mean emulator frames per env step: mean ALE frameskip
                                x ``agent_skip`` (``[2, 5)`` x 1 -> 3.0)
``sticky_action_probability``   ALE's ``repeat_action_probability``
``action_set``                  ``minimal`` (the game's actions) or ``full`` (18)
``max_frames_per_episode``      emulator frames after which an episode is cut: ALE's
                                frame cap or ``max_episode_steps`` x
                                ``frames_per_step``, whichever is smaller
``max_episode_steps``           the step limit (TimeLimit) in env steps, or None
``noop_max``                    up to this many NOOP env steps of the ALE env after a
                                real reset (each ``frameskip`` frames)
``episodic_life``               a lost life ends the learner's episode
``fire_reset``                  FIRE pressed at the start of a life (games with FIRE)
``reward_clipping``             what the learner trained on: ``False`` (the game's
                                rewards), ``True`` (their sign) or a number c
                                (clipped to [-c, c])
``observation``                 Atari: ``{"dim", "framestack", "grayscale"}``; else
                                None (the shape is the env's, not in its config)
``return_reported``             the return in the result files: ``raw score`` (the
                                game's rewards summed over whole games) or ``clipped``
``env_config``                  gym / custom: ``env.config`` (the env's own keyword
                                arguments), else None
``engine``                      what stepped the env (``env.engine``: ``python``,
                                ``gymnasium_sync``, ``gymnasium_async``, ``ale_vector``)
``threads``                     ``env.threads`` of a threaded engine (null: its default,
                                1); engine and threads are not part of the workload
``observation_cast``            ``"float64 -> float32"`` where the env's observations
                                are cast on their way to the model (not workload)
``simulator``                   a MuJoCo env's settings (:data:`SIMULATOR`)
``simulator_version``           ``"mujoco 4.0.1"`` (not workload)
==============================  =====================================================

Facts the Atari fields rest on (checked against ale-py 0.12.1's
``ale_py/registration.py`` and ``ale_py/env.py``, installed here):

- ale-py registers every ``{Game}-v0``, ``{Game}-v4``, ``{Game}NoFrameskip-v0/-v4`` and
  ``ALE/{Game}-v5`` with ``max_num_frames_per_episode=108_000`` and
  ``full_action_space=False``, and without a gymnasium ``max_episode_steps``. Their
  frameskip and sticky actions: ``-v0`` (2, 5) and 0.25, ``-v4`` (2, 5) and 0.0,
  ``NoFrameskip-v0`` 1 and 0.25, ``NoFrameskip-v4`` 1 and 0.0, ``v5`` 4 and 0.25
  (:data:`ALE_REGISTRATION`).
- rlperf's :func:`rlperf.envs.atari.make_atari_env` always passes its own
  ``frameskip`` and ``repeat_action_probability`` to ``gym.make``, so those come from
  the config whatever the id registers; it passes neither the frame cap nor the action
  set, so those are the registration's (108 000 frames, minimal) for every id. rlperf's
  wrappers never clip rewards, and RLlib 2.60's new API stack, which rlperf trains on,
  does not either: ``config.clip_rewards`` is read only by the old stack's
  ``RolloutWorker`` / agent connectors (``ray/rllib/evaluation/rollout_worker.py``,
  ``ray/rllib/connectors/util.py``), and rlperf's env is a registered name, never
  detected as Atari. rlperf reports raw scores.

Missing Atari keys take rlperf's defaults (:data:`ATARI_DEFAULTS`, the same table as
``rlperf.envs.atari.DEFAULT_ENV_CONFIG`` without its ``seed``; a test holds them equal).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from rlperf.specs.engines import DEFAULT_ENGINE, ENGINE_KEYS, EnvEngine

__all__ = [
    "ALE_FRAME_CAP",
    "ALE_REGISTRATION",
    "ATARI_DEFAULTS",
    "GYM017_GAMES",
    "GYM017_REGISTRATION",
    "NOT_WORKLOAD",
    "OBSERVATION_CAST",
    "PROTOCOL_SCHEMA",
    "SIMULATOR",
    "SIMULATOR_VERSION",
    "STUDY_ENV_ID",
    "env_protocol",
    "legacy_env_protocol",
    "protocol_key",
    "protocol_parts",
    "protocol_text",
]

#: Version of the record :func:`env_protocol` writes.
PROTOCOL_SCHEMA = 1

#: rlperf's Atari defaults, every key of an Atari env config but ``seed`` (not part of the
#: protocol). Written here, where the report can read them (it may not import rlperf.envs);
#: ``rlperf.envs.atari.DEFAULT_ENV_CONFIG`` is these and the seed.
ATARI_DEFAULTS: dict[str, Any] = {
    "id": "ALE/Pong-v5",
    "dim": 84,
    "framestack": 4,
    "frameskip": 1,
    "skip": 4,
    "repeat_action_probability": 0.0,
    "noop_max": 30,
    "episodic_life": True,
    "fire_reset": True,
    "max_episode_steps": None,
}

#: ale-py 0.12's ``max_num_frames_per_episode`` for every id it registers (30 minutes of
#: play at 60 frames/s).
ALE_FRAME_CAP = 108_000

#: ale-py 0.12's registration: id pattern -> (frameskip, repeat_action_probability); all
#: with the frame cap :data:`ALE_FRAME_CAP` and the minimal action set.
ALE_REGISTRATION: dict[str, tuple[int | tuple[int, int], float]] = {
    "{Game}-v0": ((2, 5), 0.25),
    "{Game}-v4": ((2, 5), 0.0),
    "{Game}NoFrameskip-v0": (1, 0.25),
    "{Game}NoFrameskip-v4": (1, 0.0),
    "ALE/{Game}-v5": (4, 0.25),
}

#: gym 0.17 / 0.18's registration of the old Atari ids (``gym/envs/__init__.py``, with
#: atari-py; the study ran gym 0.18, whose Atari block is 0.17's): id pattern ->
#: (frameskip, repeat_action_probability, max_episode_steps of gym's TimeLimit). Written
#: from knowledge of that file (no gym 0.17 source is installed here to check against).
#: ``AtariEnv``'s own defaults were ``frameskip=(2, 5)``, ``repeat_action_probability=0``,
#: ``full_action_space=False``; atari-py set no ALE frame cap, so only the TimeLimit cut
#: an episode. ``Deterministic`` ids skip 3 frames for SpaceInvaders, whose
#: ``NoFrameskip`` limit is 300 000.
GYM017_REGISTRATION: dict[str, tuple[int | tuple[int, int], float, int]] = {
    "{Game}-v0": ((2, 5), 0.25, 10_000),
    "{Game}-v4": ((2, 5), 0.0, 100_000),
    "{Game}Deterministic-v0": (4, 0.25, 100_000),
    "{Game}Deterministic-v4": (4, 0.0, 100_000),
    "{Game}NoFrameskip-v0": (1, 0.25, 400_000),
    "{Game}NoFrameskip-v4": (1, 0.0, 400_000),
}

#: The games gym 0.17 registered old Atari ids for (atari-py's list then; ale-py 0.12 keeps
#: the same 62 for its v0 / v4 ids, ``register_v0_v4_envs``: a test holds them equal).
GYM017_GAMES = frozenset(
    {
        "Adventure",
        "AirRaid",
        "Alien",
        "Amidar",
        "Assault",
        "Asterix",
        "Asteroids",
        "Atlantis",
        "BankHeist",
        "BattleZone",
        "BeamRider",
        "Berzerk",
        "Bowling",
        "Boxing",
        "Breakout",
        "Carnival",
        "Centipede",
        "ChopperCommand",
        "CrazyClimber",
        "Defender",
        "DemonAttack",
        "DoubleDunk",
        "ElevatorAction",
        "Enduro",
        "FishingDerby",
        "Freeway",
        "Frostbite",
        "Gopher",
        "Gravitar",
        "Hero",
        "IceHockey",
        "Jamesbond",
        "JourneyEscape",
        "Kangaroo",
        "Krull",
        "KungFuMaster",
        "MontezumaRevenge",
        "MsPacman",
        "NameThisGame",
        "Phoenix",
        "Pitfall",
        "Pong",
        "Pooyan",
        "PrivateEye",
        "Qbert",
        "Riverraid",
        "RoadRunner",
        "Robotank",
        "Seaquest",
        "Skiing",
        "Solaris",
        "SpaceInvaders",
        "StarGunner",
        "Tennis",
        "TimePilot",
        "Tutankham",
        "UpNDown",
        "Venture",
        "VideoPinball",
        "WizardOfWor",
        "YarsRevenge",
        "Zaxxon",
    }
)

#: The env of the 2021 study (reference/thesis/README.md: "on Pong-v0"); its params.json
#: files say ``"env": null`` (the env was given to the trainer, not in its config).
STUDY_ENV_ID = "Pong-v0"

#: The protocol's record of a cast of the env's observations on their way to the model
#: (``"float64 -> float32"``, :func:`rlperf.envs.factory.observation_cast`).
OBSERVATION_CAST = "observation_cast"

#: The protocol's record of a MuJoCo env's settings, which its id hides (``frame_skip``,
#: ``timestep``, ``dt``, ``reset_noise_scale``,
#: ``exclude_current_positions_from_observation``, the registered ``max_episode_steps``:
#: :func:`rlperf.envs.mujoco.simulator_facts`); part of the workload.
SIMULATOR = "simulator"
#: ... and the simulator's version (``"mujoco 4.0.1"``); not part of the workload.
SIMULATOR_VERSION = "simulator_version"

#: Fields that say how the env is stepped, not what an env step is (and the observations'
#: cast, which changes no step, and the simulator's version): left out of
#: :func:`protocol_key`, so that one protocol run on two engines (issue 26: rlperf's
#: Python wrappers against ale-py's C++ vector env, with N threads) compares as the same
#: work, which is the comparison an engine sweep exists for. Where an engine cannot
#: honour a setting (ALE presses FIRE only at reset), the record shows it in that
#: setting's own field, which does count.
NOT_WORKLOAD = ("schema", OBSERVATION_CAST, SIMULATOR_VERSION, *ENGINE_KEYS)

_VERSION = re.compile(r"-(v\d+)$")


def env_protocol(env: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol record of an rlperf ``env`` config subtree (resolved, as a plain dict).

    ``env``: the keys of rlperf/config/schema_env.py (``kind``; Atari: ``id``, ``dim``,
    ``framestack``, ``frameskip``, ``skip``, ``repeat_action_probability``, ``noop_max``,
    ``episodic_life``, ``fire_reset``, ``max_episode_steps``; gym: ``id``, ``config``;
    custom: ``entry_point``, ``config``). Without ``kind`` it is Atari (rlperf 0.1, and
    the Atari-only dict the edge stage records); missing Atari keys take
    :data:`ATARI_DEFAULTS`; ``seed`` and RLlib's ``num_envs`` are ignored. Never raises
    on an odd value: it records what it was given (``frames_per_step`` None where the
    frameskip is not a valid one), since a result must keep its record even if its
    config would fail validation today.
    """
    kind = str(env.get("kind") or "atari")
    if kind != "atari":
        return _non_atari_protocol(kind, env)
    cfg = {**ATARI_DEFAULTS, **{k: v for k, v in env.items() if k in ATARI_DEFAULTS}}
    frameskip = _frameskip(cfg["frameskip"])
    skip = cfg["skip"]
    frames = _frames_per_step(frameskip, skip)
    steps = cfg["max_episode_steps"]
    full = bool(env.get("full_action_space", False))  # ale-py's; no rlperf key sets it yet
    return _record(
        kind="atari",
        env_id=str(cfg["id"]),
        frameskip=frameskip,
        agent_skip=skip,
        frames_per_step=frames,
        sticky_action_probability=_float(cfg["repeat_action_probability"]),
        action_set="full" if full else "minimal",
        max_frames_per_episode=_frame_limit(ALE_FRAME_CAP, steps, frames),
        max_episode_steps=steps,
        noop_max=cfg["noop_max"],
        episodic_life=bool(cfg["episodic_life"]),
        fire_reset=bool(cfg["fire_reset"]),
        reward_clipping=False,
        observation={"dim": cfg["dim"], "framestack": cfg["framestack"], "grayscale": True},
        return_reported="raw score",
        **_engine(env),
    )


def _engine(env: Mapping[str, Any]) -> dict[str, Any]:
    """``engine`` and ``threads`` of an env config (``python`` where it names none: runs
    before engines; ``threads`` null: the engine's default)."""
    threads = env.get("threads")
    return {
        "engine": str(env.get("engine") or DEFAULT_ENGINE),
        "threads": None if threads is None else int(threads),
    }


def _non_atari_protocol(kind: str, env: Mapping[str, Any]) -> dict[str, Any]:
    """A gym or custom env: no emulator, no preprocessing; the id (or entry point) and the
    step limit are all the config says about the work."""
    env_id = env.get("id") if kind == "gym" else env.get("entry_point")
    config = env.get("config")
    return _record(
        kind=kind,
        env_id=None if env_id is None else str(env_id),
        max_episode_steps=env.get("max_episode_steps"),
        reward_clipping=False,
        return_reported="raw score",
        **_engine(env),
        # Keyword arguments of gymnasium.make / the class's config: they change the env.
        env_config=_plain(config) if config else None,
    )


def legacy_env_protocol(params: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol record of an RLlib 1.x (old API stack) Tune run, from its ``params.json``.

    ``params``: the trainer config as Tune saved it (``env``, ``env_config``, ``model``
    with ``dim`` and ``framestack``, ``preprocessor_pref``, ``clip_rewards``,
    ``horizon``). ``env`` null (the 2021 study) is :data:`STUDY_ENV_ID`.

    What RLlib 1.1 did with an Atari id, from knowledge of its source (no 1.x source is
    available offline; the old-stack code left in RLlib 2.60, ``rollout_worker.py`` and
    ``env/wrappers/atari_wrappers.py``, still does the same, except that it picks
    ``MaxAndSkipEnv`` by ``env_config.frameskip == 1`` instead of by the id): with
    ``preprocessor_pref="deepmind"`` it applied ``wrap_deepmind(env, dim=model.dim,
    framestack=model.framestack)``: ``MonitorEnv``, ``NoopResetEnv(noop_max=30)``,
    ``MaxAndSkipEnv(skip=4)`` only for ids containing ``NoFrameskip``,
    ``EpisodicLifeEnv``, ``FireResetEnv`` for games with FIRE, ``WarpFrame(dim)``
    (grayscale, whatever ``model.grayscale`` says), ``FrameStack(4)`` with
    ``framestack: true``. ``clip_rewards: null`` then meant clipping to the sign, in the
    sampler (the learner trained on clipped rewards); the reported
    ``episode_reward_mean`` came from ``MonitorEnv``, the innermost wrapper, over whole
    games (``_fetch_atari_metrics``): the raw score. On Pong, whose rewards are ±1, the
    clip changes nothing.
    """
    env_id = str(params.get("env") or STUDY_ENV_ID)
    model = params.get("model") or {}
    registered = _gym017_registration(env_id)
    env_config = params.get("env_config") or {}
    if registered is None:  # not an Atari id of gym 0.17: no deepmind wrappers
        kind = "custom" if ":" in env_id else "gym"
        record = _non_atari_protocol(kind, {"kind": kind, "id": env_id, "entry_point": env_id})
        record.update(reward_clipping=_legacy_clipping(params.get("clip_rewards"), atari=False))
        record["max_episode_steps"] = params.get("horizon")
        return record
    frameskip, sticky, limit = registered
    deepmind = params.get("preprocessor_pref", "deepmind") == "deepmind"
    skip = 4 if deepmind and "NoFrameskip" in env_id else 1
    frames = _frames_per_step(frameskip, skip)
    # gym's TimeLimit wraps the ALE env, inside MaxAndSkip: it counts ALE steps, limit /
    # skip env steps of the wrapped env; RLlib's ``horizon`` counts the wrapped env's.
    agent_steps = limit // skip
    horizon = params.get("horizon")
    if isinstance(horizon, int) and not isinstance(horizon, bool) and horizon > 0:
        agent_steps = min(agent_steps, horizon)
    clipping = _legacy_clipping(params.get("clip_rewards"), atari=deepmind)
    return _record(
        kind="atari",
        env_id=env_id,
        frameskip=frameskip,
        agent_skip=skip,
        frames_per_step=frames,
        sticky_action_probability=sticky,
        action_set="full" if env_config.get("full_action_space") else "minimal",
        max_frames_per_episode=_frame_limit(None, agent_steps, frames),
        max_episode_steps=agent_steps,
        noop_max=30 if deepmind else 0,
        episodic_life=deepmind,
        fire_reset=deepmind,
        reward_clipping=clipping,
        observation=(
            {
                "dim": model.get("dim", 84),
                "framestack": 4 if model.get("framestack", True) is True else 1,
                "grayscale": True,
            }
            if deepmind
            else None
        ),
        return_reported="raw score",
        engine=str(EnvEngine.python),  # the study stepped its envs in RLlib's own loop
    )


def _legacy_clipping(clip_rewards: Any, atari: bool) -> bool | float:
    """RLlib 1.x's ``clip_rewards``: None clips to the sign for deepmind-wrapped Atari."""
    if clip_rewards is None:
        return atari
    if isinstance(clip_rewards, bool):
        return clip_rewards
    if isinstance(clip_rewards, int | float):
        return float(clip_rewards)
    return bool(clip_rewards)


def protocol_key(protocol: Mapping[str, Any]) -> str:
    """A stable 12-hex-digit digest of what defines the work of an env step.

    Every field except :data:`NOT_WORKLOAD` (the record's schema, the engine and its
    threads: how the env is stepped, not what a step is). Numbers are canonical (3 and
    3.0 agree, a frameskip pair as a list), so a record read back from JSON keys the same
    as the one written; a field that is None counts as absent, so a field a later schema
    adds (None where it does not apply) leaves the keys of older records as they were.
    Cells with equal keys play the same env; the report's workload adds the algorithm,
    model, batch and target to it.
    """
    fields = {
        k: _canonical(v) for k, v in protocol.items() if k not in NOT_WORKLOAD and v is not None
    }
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def protocol_text(protocol: Mapping[str, Any]) -> str:
    """A short label for table headings: ``Pong v5 · skip 4 · sticky 0 · episodic life``
    (:func:`protocol_parts` joined). Two protocols may read alike (e.g. noop_max differs):
    compare :func:`protocol_key`, never the text."""
    return " · ".join(protocol_parts(protocol))


def protocol_parts(protocol: Mapping[str, Any]) -> list[str]:
    """The parts of :func:`protocol_text`, the env's name first (``Pong v5``).

    Atari: game and version, frames per step (how they are made), sticky actions, then
    only what departs from the common setup (full action set, no life loss, clipped
    rewards, a step limit, a frame size other than 84). Others: the id, and the step
    limit where one is set.
    """
    env_id = protocol.get("env_id")
    if protocol.get("kind") != "atari":
        name = str(env_id or "env unknown")
        if protocol.get("kind") == "custom" and ":" in name:
            name = name.rsplit(":", 1)[1] + " (custom)"
        parts = [name]
        if protocol.get("max_episode_steps") is not None:
            parts.append(_limit_text(protocol["max_episode_steps"]))
        return parts
    game = _game(str(env_id or ""))
    version = protocol.get("env_version")
    parts = [f"{game} {version}" if version else game, _skip_text(protocol)]
    sticky = protocol.get("sticky_action_probability")
    if isinstance(sticky, int | float):
        parts.append(f"sticky {sticky:g}")
    if protocol.get("action_set") == "full":
        parts.append("full actions")
    if protocol.get("episodic_life"):
        parts.append("episodic life")
    if protocol.get("reward_clipping"):
        parts.append("clipped rewards")
    if protocol.get("max_episode_steps") is not None:
        parts.append(_limit_text(protocol["max_episode_steps"]))
    observation = protocol.get("observation") or {}
    if observation.get("dim") not in (None, 84):
        parts.append(f"{observation['dim']}px")
    return [p for p in parts if p]


def _limit_text(steps: Any) -> str:
    return f"≤{steps:,} steps" if _is_int(steps) else f"≤{steps} steps"


def _skip_text(protocol: Mapping[str, Any]) -> str:
    """``skip 4`` (agent repeat), ``frameskip 2–4`` (ALE, random), or both."""
    frameskip, skip = protocol.get("frameskip"), protocol.get("agent_skip")
    parts = []
    if isinstance(frameskip, list | tuple) and len(frameskip) == 2:
        parts.append(f"frameskip {frameskip[0]}–{frameskip[1] - 1}")
    elif frameskip not in (None, 1):
        parts.append(f"frameskip {frameskip}")
    if skip not in (None, 1) or not parts:
        parts.append(f"skip {skip}")
    return " × ".join(parts)


# --------------------------------------------------------------------------


def _record(**fields: Any) -> dict[str, Any]:
    """Every field of the record, in the documented order (None where not given)."""
    record: dict[str, Any] = {"schema": PROTOCOL_SCHEMA}
    for name in _FIELDS:
        record[name] = fields.pop(name, None)
    record["env_version"] = _version(record["env_id"])
    assert not fields, f"not a protocol field: {sorted(fields)}"
    return record


_FIELDS = (
    "kind",
    "env_id",
    "env_version",
    "frameskip",
    "agent_skip",
    "frames_per_step",
    "sticky_action_probability",
    "action_set",
    "max_frames_per_episode",
    "max_episode_steps",
    "noop_max",
    "episodic_life",
    "fire_reset",
    "reward_clipping",
    "observation",
    "return_reported",
    "env_config",
    "engine",
    "threads",
)


def _version(env_id: Any) -> str | None:
    match = _VERSION.search(str(env_id)) if env_id is not None else None
    return match.group(1) if match else None


def _game(env_id: str) -> str:
    """``Pong`` of ``ALE/Pong-v5``, ``Pong-v0``, ``PongNoFrameskip-v4``, ``PongDeterministic-v4``
    (the frameskip the suffix stood for is in the record's own fields)."""
    name = _VERSION.sub("", env_id.rsplit("/", 1)[-1])
    return re.sub(r"(NoFrameskip|Deterministic)$", "", name) or env_id


def _frameskip(value: Any) -> Any:
    """An int, a ``[low, high)`` list, or what was given (recorded as is)."""
    if isinstance(value, list | tuple) and len(value) == 2 and all(_is_int(v) for v in value):
        return [int(value[0]), int(value[1])]
    return value


def _frames_per_step(frameskip: Any, skip: Any) -> float | None:
    """Mean emulator frames per env step: the mean ALE frameskip (uniform on low..high-1)
    times the agent's action repeat; None where either is not a valid value."""
    if not _is_int(skip) or skip < 1:
        return None
    if _is_int(frameskip) and frameskip >= 1:
        return float(frameskip * skip)
    if isinstance(frameskip, list) and 1 <= frameskip[0] < frameskip[1]:
        return (frameskip[0] + frameskip[1] - 1) / 2 * skip
    return None


def _frame_limit(cap: int | None, steps: Any, frames: float | None) -> int | None:
    """Frames after which an episode is cut: the emulator's cap, or the step limit in frames
    (at the mean frames per step), whichever is smaller."""
    limits = [cap] if cap is not None else []
    if _is_int(steps) and frames is not None:
        limits.append(round(steps * frames))
    return min(limits) if limits else None


def _gym017_registration(env_id: str) -> tuple[Any, float, int] | None:
    """gym 0.17's (frameskip, sticky, max_episode_steps) of an old Atari id, else None."""
    match = re.fullmatch(r"([A-Za-z]+?)(NoFrameskip|Deterministic)?-(v0|v4)", env_id)
    if match is None or match.group(1) not in GYM017_GAMES:
        return None
    suffix, version = match.group(2) or "", match.group(3)
    frameskip, sticky, limit = GYM017_REGISTRATION["{Game}" + suffix + "-" + version]
    if env_id.startswith("SpaceInvaders") and suffix:
        frameskip, limit = (3, 100_000) if suffix == "Deterministic" else (1, 300_000)
    return _frameskip(frameskip), sticky, limit


def _float(value: Any) -> Any:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _plain(value: Any) -> Any:
    """A JSON-able copy (mappings and sequences as dicts and lists)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _canonical(value: Any) -> Any:
    """Integral floats as ints, tuples as lists, mappings sorted: JSON round trips agree."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value
