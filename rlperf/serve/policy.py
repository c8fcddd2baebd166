"""Resolve the served policy: the upstream run (or a ``.tflite`` file), its backend's model
file (a TFLite variant from the shared artifact cache, built only where missing), and real
observations from its environment with the greedy actions the policy takes on them in-process
(a Box policy's action vectors, from its reference actor).

Config keys: ``run`` / ``checkpoint`` / ``model_path``, ``backend.name``,
``env.*`` (the run's env; keys given on the command line on top), ``edge.*``
(the artifact settings, so a serve job finds the variants an edge job built:
``cache_dir``, ``heads``, ``int8_io``, ``calibration_*``, ``fidelity_*``,
``xnnpack``), ``serve.observations``, ``serve.observation_seed``, ``serve.threads``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
from omegaconf import DictConfig, OmegaConf

from rlperf.errors import ServeError
from rlperf.runs.probe import check_probe, torch_policy_fns
from rlperf.serve.measure import ExpectedActions
from rlperf.serve.model import ModelSpec, load_model
from rlperf.serve.payload import encode_observation
from rlperf.specs.backends import backend_spec
from rlperf.tflite.artifacts import build_variant, fidelity_set
from rlperf.tflite.cache import ArtifactCache, resolve_cache_root
from rlperf.tflite.calibration import collect_observations
from rlperf.tflite.tflite_model import ensure_cpu_runnable, read_tflite

log = logging.getLogger("rlperf.serve")


@dataclass
class ServedPolicy:
    """The policy a serve job deploys, and what the job knows about it."""

    backend: str
    spec: ModelSpec | None = None
    source: dict[str, Any] = field(default_factory=dict)  # summary.json "source"
    model: dict[str, Any] | None = None  # summary.json "model"
    env: dict[str, Any] = field(default_factory=dict)
    net: Any = None  # the torch policy (run= / checkpoint=)
    cache: dict[str, Any] | None = None  # artifacts built / reused
    observations: np.ndarray | None = None
    bodies: list[bytes] = field(default_factory=list)  # the observations as request bodies
    action_span: np.ndarray | None = None  # a Box policy's high - low per dimension
    # greedy actions of the policy in-process (and a Box policy's ranges)
    expected_actions: ExpectedActions | None = None


def resolve_policy(cfg: DictConfig, out_dir: Path) -> ServedPolicy:
    """The upstream run's policy (checked against its probe) or ``model_path``, and the env."""
    # rlperf.runs.merge pulls rlperf.algos, gymnasium and ale_py: deferred, the module's
    # top imports numpy and the TFLite side only.
    from rlperf.runs.merge import upstream_run, write_effective_config

    policy = ServedPolicy(str(cfg.backend.name))
    ecfg = cfg
    if cfg.run is not None or cfg.checkpoint is not None:
        # torch only with an upstream run: a served model_path never loads it.
        from rlperf.models.policy_file import count_trainable_params, load_policy

        trained, ecfg = upstream_run(cfg, rllib=False)
        policy.net = load_policy(trained.policy_path)
        probe = check_probe(trained.probe, *torch_policy_fns(policy.net))
        name = str(trained.config.model.name)
        params = count_trainable_params(policy.net)
        policy.model = {"name": name, **policy.net.model_config(), "params": params}
        policy.source = {"run": str(trained.run_dir), "policy": str(trained.policy_path),
                         "model": name, "probe": probe}  # fmt: skip
        write_effective_config(out_dir, ecfg)
    policy.source["model_path"] = str(cfg.model_path) if cfg.model_path else None
    policy.env = cast(dict[str, Any], OmegaConf.to_container(ecfg.env, resolve=True))
    return policy


def prepare_model(cfg: DictConfig, policy: ServedPolicy) -> None:
    """The model file of the backend: the torch policy, ``model_path``, or a cached variant."""
    # gymnasium and ale_py (rlperf.envs): deferred, as in resolve_policy.
    from rlperf.envs.factory import env_spaces
    from rlperf.envs.from_config import env_for_policy

    threads, xnnpack = int(cfg.serve.threads), bool(cfg.edge.xnnpack)
    model_path = Path(str(cfg.model_path)) if cfg.model_path else None
    obs_shape = _tflite_input_shape(model_path) if model_path else tuple(policy.net.obs_shape)
    policy.env = env_for_policy(policy.env, obs_shape)
    obs_space, action_space = env_spaces(policy.env)
    continuous = not hasattr(action_space, "n")
    if continuous:
        policy.action_span = _box_span(action_space, policy.env)
    if tuple(obs_space.shape or ()) != obs_shape:
        raise ServeError(
            f"the policy takes observations of shape {obs_shape}, but env {policy.env.get('id')} "
            f"gives {tuple(obs_space.shape or ())}"
        )
    if model_path is not None:
        path, kind = model_path, "tflite"
    elif backend_spec(policy.backend).in_rllib:
        path, kind = Path(policy.source["policy"]), "torch"
    else:  # built only now that the env and the policy are known to fit
        path, kind = _cached_variant(cfg, policy), "tflite"
    obs_dtype = str(np.dtype(obs_space.dtype))
    span = policy.action_span
    size = len(span) if span is not None else int(action_space.n)  # type: ignore[attr-defined]
    policy.spec = ModelSpec(
        kind, str(path), obs_shape, obs_dtype, size, threads, xnnpack, continuous
    )
    policy.source["model_file"] = str(path)


def _box_span(action_space: Any, env: dict[str, Any]) -> np.ndarray:
    """``high - low`` of a bounded 1-D Box: what a served action's error is relative to."""
    from gymnasium import spaces

    finite = isinstance(action_space, spaces.Box) and bool(
        np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))
    )
    if not finite or len(action_space.shape) != 1:
        raise ServeError(
            f"the serve stage answers with Discrete actions or a bounded 1-D Box; "
            f"{env.get('id') or env.get('entry_point')} has {action_space} actions (a served "
            f"action is checked relative to each dimension's range: it needs finite bounds)"
        )
    return (action_space.high - action_space.low).astype(np.float64)


def _tflite_input_shape(path: Path) -> tuple[int, ...]:

    if not path.is_file():
        raise ServeError(f"model_path={path}: no such file; expected a .tflite policy")
    info = read_tflite(path)
    ensure_cpu_runnable(info, "tflite")
    return tuple(int(s) for s in info.inputs[0].shape[1:])


def _cached_variant(cfg: DictConfig, policy: ServedPolicy) -> Path:
    """The backend's variant from the policy's artifact cache, built (once) where missing."""

    root = resolve_cache_root(cfg.edge.cache_dir)
    cache = ArtifactCache.for_policy(root, Path(policy.source["policy"]))
    with cache.lock():
        fidelity, name, new = fidelity_set(cache, cfg, policy.env, policy.net)
        variant = build_variant(cache, cfg, policy.backend, policy.net, policy.env, fidelity)
    (variant.built if new else variant.reused).insert(0, name)
    policy.cache = {"dir": str(cache.dir), "built": variant.built, "reused": variant.reused}
    log.info("%s: %s (built %s)", policy.backend, variant.path.name, variant.built or "nothing")
    return variant.path


def load_observations(cfg: DictConfig, policy: ServedPolicy) -> None:
    """Real observations (random play, ``serve.observation_seed``), as request bodies, with the
    greedy action of the same model in this process for each."""

    assert policy.spec is not None
    count, seed = int(cfg.serve.observations), int(cfg.serve.observation_seed)
    obs, _ = collect_observations(policy.env, count, seed)
    model = load_model(policy.spec)
    policy.observations = obs
    policy.bodies = [encode_observation(o) for o in obs]
    actions = np.stack([model.act(o[None])[0][0] for o in obs])
    policy.expected_actions = ExpectedActions(actions, policy.action_span)
