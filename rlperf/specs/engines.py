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

Adding an engine: its member of :class:`EnvEngine`, its spec line, its builder and docs
(docs/development.md#adding-an-engine). Import is cheap (standard library); each engine's
library is imported when it builds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum, auto
from typing import Any


class EnvEngine(StrEnum):
    """``env.engine``: what steps the env's instances (one :class:`EngineSpec` each)."""

    python = auto()  # rlperf's wrappers, an env runner's envs one after another
    gymnasium_sync = auto()  # gymnasium's SyncVectorEnv over rlperf's wrappers
    gymnasium_async = auto()  # gymnasium's AsyncVectorEnv: a process per env
    ale_vector = auto()  # ale-py's AtariVectorEnv: C++ threads (Atari only)
    envpool = auto()  # EnvPool's Atari pool: C++ threads (Atari only; rlperf[envpool])


#: The engine of an env config that names none (the schema's default; runs before engines).
DEFAULT_ENGINE = EnvEngine.python

#: The keys of an env config that say what steps it, not what the env is.
ENGINE_KEYS = ("engine", "threads")

#: How an engine treats an Atari key: the same as rlperf's wrappers, mapped to its own
#: setting (the protocol is the same), or not at all (the pre-flight refuses the key).
EQUAL, MAPPED, REFUSED = "equal", "mapped", "refused"


@dataclass(frozen=True)
class EngineSpec:
    """One ``env.engine``. ``builder``: ``module:function`` that makes ``num_envs`` envs
    of an env config as the engine steps them, ``(env, num_envs) -> vector env``
    (``stage=env`` steps it; RLlib takes a ``vector_entry_point`` engine's whole)."""

    name: str  # an EnvEngine, held as the plain string
    rllib_mode: str  # RLlib's gym_env_vectorize_mode
    kinds: tuple[str, ...]  # env kinds it builds
    threaded: bool  # C++ threads of its own (env.threads)
    builder: str
    #: Atari keys: how this engine honours each (keys not listed: equal, as rlperf's own).
    atari_keys: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", str(self.name))

    @property
    def vector(self) -> bool:
        """RLlib takes its envs as one vector env from rlperf's creator."""
        return self.rllib_mode == "vector_entry_point"


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
_BATCH, _VECTOR = "rlperf.envs.batch", "rlperf.envs.vector"  # where the builders live
ENGINES: dict[str, EngineSpec] = {
    spec.name: spec
    for spec in (
        EngineSpec(EnvEngine.python, "sync", ANY_KIND, False, f"{_BATCH}:env_loop"),
        EngineSpec(EnvEngine.gymnasium_sync, "sync", ANY_KIND, False, f"{_BATCH}:sync_vector_env"),
        EngineSpec(
            EnvEngine.gymnasium_async, "async", ANY_KIND, False, f"{_BATCH}:async_vector_env"
        ),
        EngineSpec(
            EnvEngine.ale_vector,
            "vector_entry_point",
            ("atari",),
            True,
            f"{_VECTOR}:ale_vector_env",
            ALE_VECTOR_KEYS,
        ),  # fmt: skip
        EngineSpec(
            EnvEngine.envpool,
            "vector_entry_point",
            ("atari",),
            True,
            f"{_VECTOR}:envpool_env",
            ENVPOOL_KEYS,
        ),  # fmt: skip
    )
}
if list(ENGINES) != list(EnvEngine):
    raise ValueError(f"ENGINES {list(ENGINES)} must list every EnvEngine once, in its order")

#: Engines whose library is an extra of rlperf's (engine -> (module, extra)).
EXTRA_ENGINES = {"envpool": ("envpool", "envpool")}

#: Engines RLlib gets as one vector env from rlperf's creator (``num_envs`` in its config).
VECTOR_ENGINES = tuple(n for n, s in ENGINES.items() if s.vector)


def engine_of(env_config: dict[str, object] | object) -> EngineSpec:
    """The spec of an env config's ``engine`` (``python`` where it has none: older runs)."""
    name = str(getattr(env_config, "get", lambda *_: None)("engine") or DEFAULT_ENGINE)
    return ENGINES[name]


def without_engine(env: Mapping[str, Any]) -> dict[str, Any]:
    """An env config without :data:`ENGINE_KEYS`: the env one instance of it is."""
    return {k: v for k, v in env.items() if k not in ENGINE_KEYS}


def engine_threads(env_config: dict[str, object] | object) -> int:
    """Threads of the env's engine in one env runner: ``env.threads`` (null: 1)."""
    threads = getattr(env_config, "get", lambda *_: None)("threads")
    return int(threads) if threads is not None else 1  # type: ignore[call-overload]
