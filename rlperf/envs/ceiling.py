"""The raw speed of a run's environment: the ceiling that ``sampling_efficiency`` divides by.

:func:`measure_ceiling` steps the run's env (same kind, config and
preprocessing, built by :func:`rlperf.envs.factory.make_env`) with uniformly
random actions in this one process for ``train.env_ceiling.duration_s``
seconds, resets included, after a short warm-up; no policy, no RLlib, no Ray.
Env steps per second of that loop is ``env_ceiling_steps_per_s``: what one env
runner could sample if the policy, the connectors and the episode bookkeeping
cost nothing.

The result is cached (:func:`env_ceiling`) in ``train.env_ceiling.cache_dir``
(default ``~/.cache/rlperf/env_ceiling``), one JSON file per key: the env
config (without the seed) and the duration, plus what the speed depends on
on this machine — host, CPU model, the affinity mask in force, Python, rlperf
and the env libraries' versions. A machine under other load than when the
value was measured gets the cached value: delete the folder, or set
``train.env_ceiling.cache_dir`` to a fresh one, to measure again. Import is
cheap (numpy and gymnasium come with the env).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from rlperf import __version__
from rlperf.envs.factory import make_env
from rlperf.results.columns import RESETS
from rlperf.specs.engines import VECTOR_ENGINES, engine_of
from rlperf.telemetry.fingerprint import compact_ranges, cpu_model

#: Default ``train.env_ceiling.cache_dir`` (null in the config).
DEFAULT_CACHE_DIR = Path("~/.cache/rlperf/env_ceiling")
#: Libraries whose version is part of the cache key.
KEY_LIBRARIES = ("gymnasium", "ale-py", "numpy", "opencv-python-headless", "opencv-python")
#: Warm-up before the timed loop (first resets, caches, lazy imports).
WARMUP_S = 0.3


def measure_ceiling(
    env_config: Mapping[str, Any], duration_s: float, seed: int = 0, num_envs: int = 1
) -> dict[str, Any]:
    """Env steps per second of ``env_config``'s env with random actions, in this process.

    A vector engine (``env.engine=ale_vector``) is measured as an env runner steps it: one
    vector env of ``num_envs`` envs (its threads included), every sub-env's step counted.
    """
    vector = engine_of(env_config).name in VECTOR_ENGINES
    extra = {"num_envs": int(num_envs)} if vector else {}
    env = make_env({**dict(env_config), "seed": None, **extra})
    env.action_space.seed(seed)
    step_for = _vector_step_for if vector else _step_for
    try:
        env.reset(seed=seed)
        step_for(env, WARMUP_S)
        steps, resets, elapsed = step_for(env, duration_s)
    finally:
        env.close()
    return {
        "steps_per_s": steps / elapsed,
        "steps": steps,
        RESETS: resets,
        "seconds": elapsed,
        **extra,
        "actions": "uniformly random (action_space.sample)",
    }


def _vector_step_for(env: Any, seconds: float) -> tuple[int, int, float]:
    """:func:`_step_for` of a vector env (it resets its envs itself): every sub-env counts."""
    clock = time.perf_counter
    start = clock()
    end = start + seconds
    steps = resets = 0
    while clock() < end:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += int(env.num_envs)
        resets += int(np.sum(np.logical_or(terminated, truncated)))
    return steps, resets, clock() - start


def _step_for(env: Any, seconds: float) -> tuple[int, int, float]:
    """Step with random actions until ``seconds`` have passed: (steps, resets, seconds)."""
    steps = resets = 0
    clock = time.perf_counter
    start = clock()
    end = start + seconds
    while True:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        if terminated or truncated:
            env.reset()
            resets += 1
        if steps % 16 == 0 and clock() >= end:
            return steps, resets, clock() - start


def cache_key(
    env_config: Mapping[str, Any], duration_s: float, num_envs: int = 1
) -> dict[str, Any]:
    """What a cached ceiling is valid for (see the module docstring)."""
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in KEY_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {
        "env": {k: v for k, v in dict(env_config).items() if k != "seed"},
        "duration_s": float(duration_s),
        **({"num_envs": int(num_envs)} if num_envs != 1 else {}),
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpus": compact_ranges(sorted(os.sched_getaffinity(0))),
        "python": platform.python_version(),
        "rlperf": __version__,
        "libraries": versions,
    }


def env_ceiling(
    env_config: Mapping[str, Any],
    duration_s: float,
    cache_dir: str | os.PathLike[str] | None = None,
    seed: int = 0,
    num_envs: int = 1,
) -> dict[str, Any]:
    """The env's ceiling, from the cache or measured now (and cached).

    Returns ``steps_per_s``, ``probe_s`` (seconds this call spent measuring: 0 when
    cached), ``cached``, ``measured_at``, ``load_avg`` (1-minute load average when
    measured), ``cache_file`` and the measurement's details.
    """
    vector = engine_of(env_config).name in VECTOR_ENGINES
    num_envs = int(num_envs) if vector else 1  # one env stands for a sync engine's runner
    key = cache_key(env_config, duration_s, num_envs)
    root = Path(cache_dir if cache_dir else DEFAULT_CACHE_DIR).expanduser()
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
    path = root / f"{digest[:16]}.json"
    if path.is_file():
        try:
            cached = json.loads(path.read_text())
            if cached.get("key") == json.loads(json.dumps(key, default=str)):
                return {**cached["result"], "cached": True, "probe_s": 0.0, "cache_file": str(path)}
        except (OSError, ValueError, KeyError):
            pass  # unreadable: measure again and overwrite
    t0 = time.perf_counter()
    result = measure_ceiling(env_config, duration_s, seed, num_envs)
    result.update(
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        load_avg=os.getloadavg()[0],
    )
    probe_s = time.perf_counter() - t0
    root.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"key": key, "result": result}, indent=1, default=str))
    tmp.replace(path)
    return {**result, "cached": False, "probe_s": probe_s, "cache_file": str(path)}
