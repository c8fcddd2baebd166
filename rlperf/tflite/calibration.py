"""Sets of real observations from the environment: calibration and fidelity sets.

Both are collected by playing the env (the run's env settings) with a random
or the trained policy from a recorded seed, keeping every ``stride``-th frame
so the set spans more of the game than consecutive frames would. The
calibration set feeds int8 post-training quantization; the fidelity set (a
different seed, and any frame also in the calibration set removed) is where
every variant is compared with the torch policy. Saved as ``.npz`` with their
metadata, so a job can say exactly which frames it used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: Keep every this-many-th frame: neighbouring frames of a 4-frame stack are near copies.
DEFAULT_STRIDE = 4

Policy = Callable[[np.ndarray], int]


@dataclass
class ObservationSet:
    """Real observations as the env gives them, stacked (uint8 frames ``(N, dim, dim, C)``,
    float vectors ``(N, d)``, Discrete states ``(N,)``), and how they were collected."""

    observations: np.ndarray
    purpose: str  # calibration | fidelity
    policy: str  # random | trained
    seed: int
    stride: int
    env_config: dict[str, Any]
    removed_duplicates: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. reference logits of a fidelity set

    @property
    def count(self) -> int:
        return int(len(self.observations))

    def digest(self) -> str:
        """sha256 of the observation bytes (identifies the exact frames)."""
        return hashlib.sha256(np.ascontiguousarray(self.observations).tobytes()).hexdigest()

    def metadata(self) -> dict[str, Any]:
        meta = {k: v for k, v in asdict(self).items() if k not in ("observations", "extra")}
        meta.update(count=self.count, shape=list(self.observations.shape), sha256=self.digest())
        meta["dtype"] = str(self.observations.dtype)
        lo = self.observations.min() if self.count else None
        hi = self.observations.max() if self.count else None
        if self.observations.dtype == np.uint8:
            meta["pixel_min"], meta["pixel_max"] = _item(lo), _item(hi)
        else:
            meta["value_min"], meta["value_max"] = _item(lo), _item(hi)
        return meta

    def save(self, path: Path) -> Path:
        """Write ``path`` (.npz: observations, extra arrays, metadata JSON) atomically."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        arrays: dict[str, Any] = {f"extra_{k}": np.asarray(v) for k, v in self.extra.items()}
        arrays["observations"] = self.observations
        arrays["metadata"] = np.array(json.dumps(self.metadata(), default=str))
        np.savez_compressed(tmp, **arrays)
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: Path) -> ObservationSet:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["metadata"]))
            extra = {
                k.removeprefix("extra_"): data[k] for k in data.files if k.startswith("extra_")
            }
            return cls(
                observations=data["observations"],
                purpose=meta["purpose"],
                policy=meta["policy"],
                seed=int(meta["seed"]),
                stride=int(meta["stride"]),
                env_config=dict(meta["env_config"]),
                removed_duplicates=int(meta.get("removed_duplicates", 0)),
                extra=extra,
            )


def observation_range(space: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """The values an observation space allows, for the int8 calibration of non-frame inputs:
    ``(start, start + n - 1)`` of a Discrete, ``(low, high)`` of a non-uint8 Box (infinite
    where unbounded); None for uint8 frames (calibrated as 0..255) or no space."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        start = float(space.start)
        return np.array(start, np.float32), np.array(start + int(space.n) - 1, np.float32)
    if isinstance(space, spaces.Box) and space.dtype != np.uint8:
        return space.low.astype(np.float32), space.high.astype(np.float32)
    return None


def _item(value: Any) -> Any:
    return None if value is None else np.asarray(value).item()


def _key(obs: Any) -> bytes:
    """Identity of an observation (its bytes), to skip frames of another set."""
    return hashlib.sha1(np.ascontiguousarray(obs).tobytes()).digest()


def collect_observations(
    env_config: Mapping[str, Any],
    count: int,
    seed: int,
    policy: Policy | None = None,
    stride: int = DEFAULT_STRIDE,
    exclude: np.ndarray | None = None,
    max_steps: int | None = None,
) -> tuple[np.ndarray, int]:
    """Play the env and keep every ``stride``-th observation until ``count`` are kept.

    Args:
        env_config: the ``env`` subtree (:func:`rlperf.envs.factory.make_env`).
        count: observations to keep.
        seed: seeds the first reset and the random actions; later episodes continue
            the env's own random stream, so the whole set is reproducible.
        policy: maps an observation to an action; None = uniformly random actions.
        exclude: observations that must not appear in the result (byte-identical
            frames are skipped), e.g. the calibration set when collecting the fidelity set.
        max_steps: give up after this many env steps (default ``count * stride * 20``).

    Returns:
        ``(observations stacked as the env gives them, number of skipped duplicates)``.
    """
    # rlperf.envs imports gymnasium, ale_py and cv2: deferred, reading and writing a
    # saved set (the edge benchmark's child, serve) needs no env.
    from rlperf.envs.factory import make_env

    excluded = {_key(o) for o in exclude} if exclude is not None else set()
    env = make_env({**dict(env_config), "seed": None})
    env.action_space.seed(seed)
    kept: list[np.ndarray] = []
    skipped = 0
    limit = max_steps if max_steps is not None else max(count, 1) * stride * 20
    try:
        obs, _ = env.reset(seed=seed)
        for step in range(limit):
            if len(kept) >= count:
                break
            if step % stride == 0:
                if _key(obs) in excluded:
                    skipped += 1
                else:
                    kept.append(np.asarray(obs))
            action = policy(obs) if policy is not None else env.action_space.sample()
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                obs, _ = env.reset()
    finally:
        env.close()
    if len(kept) < count:
        raise RuntimeError(
            f"collected only {len(kept)} of {count} observations in {limit} env steps"
        )
    return np.stack(kept), skipped


def build_observation_set(
    env_config: Mapping[str, Any],
    count: int,
    seed: int,
    purpose: str,
    policy_name: str = "random",
    policy: Policy | None = None,
    exclude: np.ndarray | None = None,
    stride: int = DEFAULT_STRIDE,
) -> ObservationSet:
    """:func:`collect_observations` wrapped with its metadata.

    Config keys (``edge.*``): ``calibration_size``, ``calibration_policy``,
    ``calibration_seed`` (calibration); ``fidelity_observations``, ``fidelity_seed``,
    ``fidelity_policy`` (fidelity).
    """
    if policy_name not in ("random", "trained"):
        raise ValueError(f"observation policy {policy_name!r} must be 'random' or 'trained'")
    if policy_name == "trained" and policy is None:
        raise ValueError("policy_name='trained' needs the trained policy")
    obs, removed = collect_observations(
        env_config, count, seed, policy if policy_name == "trained" else None, stride, exclude
    )
    return ObservationSet(obs, purpose, policy_name, seed, stride, dict(env_config), removed)
