"""What steps an env's instances: ``env.engine`` (docs/environment.md#engines).

One :class:`EngineSpec` per engine a user picks, and every table derives from them: how
RLlib vectorises it (``gym_env_vectorize_mode``), which env kinds it builds, whether it
has threads of its own (``env.threads``, counted as env-runner CPUs by the resource plan),
and how it treats each Atari key.

=================  ===================  ======================================================
engine             RLlib's mode         what an env runner steps
=================  ===================  ======================================================
``python``         ``sync``             rlperf's wrappers (:mod:`rlperf.envs.atari`), its
                                        ``num_envs`` envs one after another (RLlib's own loop)
``gymnasium_sync`` ``sync``             the same through gymnasium's ``SyncVectorEnv`` (in
                                        training RLlib's loop *is* that; apart in
                                        ``stage=env``)
``gymnasium_async`` ``async``           gymnasium's ``AsyncVectorEnv``: each env in a process
                                        of its own (not counted by Ray's CPU accounting)
``ale_vector``     ``vector_entry_point``  ale-py's ``AtariVectorEnv``: ALE and its
                                        preprocessing in C++ threads (Atari only); its
                                        channels-first frames transposed to rlperf's
                                        ``(dim, dim, framestack)`` inside the creator
``envpool``        ``vector_entry_point``  EnvPool's Atari pool (C++ threads, Atari only,
                                        ``pip install 'rlperf[envpool]'``), transposed
                                        the same way
=================  ===================  ======================================================

Import is cheap (standard library); each engine's library is imported when it builds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: How an engine treats an Atari key: the same as rlperf's wrappers, mapped to its own
#: setting (the protocol is the same), or not at all (the pre-flight refuses the key).
EQUAL, MAPPED, REFUSED = "equal", "mapped", "refused"


@dataclass(frozen=True)
class EngineSpec:
    """One ``env.engine``."""

    name: str
    rllib_mode: str  # RLlib's gym_env_vectorize_mode
    kinds: tuple[str, ...]  # env kinds it builds
    threaded: bool  # C++ threads of its own (env.threads)
    #: Atari keys: how this engine honours each (keys not listed: equal, as rlperf's own).
    atari_keys: dict[str, str] = field(default_factory=dict)


#: How ale-py's AtariVectorEnv honours rlperf's Atari keys (ale-py 0.12.1, checked:
#: tests/envs/test_engines.py).
ALE_VECTOR_KEYS = {
    "id": MAPPED,  # the game of ALE/<Game>-v5 (any version: its frameskip comes from here)
    "dim": MAPPED,  # img_height = img_width
    "framestack": MAPPED,  # stack_num; after a reset ALE stacks zeros, rlperf the first frame
    "frameskip": REFUSED,  # ALE-level skip: AtariVectorEnv has one skip (rlperf's `skip`), 1
    "skip": MAPPED,  # frameskip with maxpool over the last 2 frames, as MaxAndSkip
    "repeat_action_probability": EQUAL,
    "noop_max": MAPPED,  # up to noop_max NOOPs after a reset, ALE drawing their number
    # A game with lives: ALE's episodic life ends an episode every 25 steps (its counter is
    # not the game's); refused where lives exist, off (the same) where they do not.
    "episodic_life": MAPPED,
    # ALE presses FIRE at reset only, rlperf after every life lost: the same without lives.
    "fire_reset": MAPPED,
    "max_episode_steps": MAPPED,  # max_num_frames_per_episode = steps x skip (ALE's cap too)
}

#: How EnvPool's Atari pool honours them (EnvPool 1.2.5, checked: tests/envs/test_engines.py).
ENVPOOL_KEYS = {
    **ALE_VECTOR_KEYS,
    "id": MAPPED,  # its task <Game>-v5 (the frameskip and sticky actions come from rlperf's keys)
    "skip": MAPPED,  # frame_skip, max over the last 2 frames
    "noop_max": MAPPED,  # EnvPool's noop_max (NOOPs drawn by EnvPool after a reset)
    "max_episode_steps": MAPPED,  # its max_episode_steps (agent steps; ALE's frame cap too)
}

ANY_KIND = ("atari", "gym", "custom")
ENGINES: dict[str, EngineSpec] = {
    spec.name: spec
    for spec in (
        EngineSpec("python", "sync", ANY_KIND, False),
        EngineSpec("gymnasium_sync", "sync", ANY_KIND, False),
        EngineSpec("gymnasium_async", "async", ANY_KIND, False),
        EngineSpec("ale_vector", "vector_entry_point", ("atari",), True, ALE_VECTOR_KEYS),
        EngineSpec("envpool", "vector_entry_point", ("atari",), True, ENVPOOL_KEYS),
    )
}

#: Engines whose library is an extra of rlperf's (engine -> (module, extra)).
EXTRA_ENGINES = {"envpool": ("envpool", "envpool")}

#: Engines RLlib gets as one vector env from rlperf's creator (``num_envs`` in its config).
VECTOR_ENGINES = tuple(n for n, s in ENGINES.items() if s.rllib_mode == "vector_entry_point")


def engine_of(env_config: dict[str, object] | object) -> EngineSpec:
    """The spec of an env config's ``engine`` (``python`` where it has none: older runs)."""
    name = str(getattr(env_config, "get", lambda *_: None)("engine") or "python")
    return ENGINES[name]


def engine_threads(env_config: dict[str, object] | object) -> int:
    """Threads of the env's engine in one env runner: ``env.threads`` (null: 1)."""
    threads = getattr(env_config, "get", lambda *_: None)("threads")
    return int(threads) if threads is not None else 1  # type: ignore[call-overload]
