"""Resolve an edge cell: its policy (``run`` / ``checkpoint``), its file (``model_path``),
its backend and its env — the first step of :func:`rlperf.edge.edge_job.run_edge`.

Config keys: ``run`` / ``checkpoint``, ``model_path``, ``backend.name``, ``env.*``
(only keys given on the command line override the run's env), ``edge.cache_dir``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from omegaconf import DictConfig

from rlperf.envs.factory import describe_env, env_spaces
from rlperf.envs.from_config import play_env
from rlperf.errors import TfliteInputError
from rlperf.models.spaces import describe_space
from rlperf.runs.checkpoint import TrainedRun
from rlperf.runs.merge import upstream_run, write_effective_config
from rlperf.runs.probe import check_probe, torch_policy_fns
from rlperf.specs.backends import (
    BACKEND_SPECS,
    POST_TRAINING_BACKENDS,
    Backend,
    BackendSpec,
    backend_spec,
)
from rlperf.tflite.artifacts import VariantBuild
from rlperf.tflite.cache import ArtifactCache, resolve_cache_root
from rlperf.tflite.export import policy_input_shape
from rlperf.tflite.tflite_model import ensure_cpu_runnable, read_tflite


@dataclass
class EdgeCell:
    """What the steps of one edge cell share."""

    cfg: DictConfig
    out_dir: Path
    backend: str
    cache_root: Path
    # The "source" entry of summary.json: policy, run, model_path (and the policy's checks).
    source: dict[str, Any] = field(
        default_factory=lambda: {"policy": None, "run": None, "model_path": None}
    )
    trained: TrainedRun | None = None  # run= / checkpoint=
    net: Any = None  # its torch policy (VisionNet)
    model: dict[str, Any] | None = None  # the "model" entry of summary.json
    cache: Any = None  # the policy's ArtifactCache
    model_file: Path | None = None  # model_path=
    file_info: Any = None  # what read_tflite says about model_path=
    env: dict[str, Any] = field(default_factory=dict)
    num_actions: int = 0  # Discrete: actions; Box: action dimensions
    action_span: Any = None  # Box: high - low per dimension (None: Discrete)
    obs_space: Any = None  # the env's observation space
    edgetpu: dict[str, Any] | None = None  # runtime and device, for backend=edgetpu
    fidelity: Any = None  # the fidelity ObservationSet with the torch logits
    fidelity_name: str | None = None
    variant: VariantBuild | None = None

    @property
    def spec(self) -> BackendSpec:
        """The backend's spec (:mod:`rlperf.specs.backends`)."""
        return backend_spec(self.backend)

    @property
    def benchmarked_file(self) -> Path:
        """``rlperf_policy.pt`` for ``backend=rllib``, else the variant's ``.tflite``."""
        if self.spec.in_rllib:
            assert self.trained is not None
            return self.trained.policy_path
        assert self.variant is not None
        return self.variant.path


def resolve_cell(cfg: DictConfig, out_dir: Path) -> EdgeCell:
    """The cell's policy (``run`` / ``checkpoint``), file (``model_path``), backend and env."""
    cell = EdgeCell(cfg, out_dir, str(cfg.backend.name), resolve_cache_root(cfg.edge.cache_dir))
    if cfg.model_path:
        cell.model_file = Path(str(cfg.model_path))
        if not cell.model_file.is_file():
            raise TfliteInputError(f"model_path={cfg.model_path}: no such file")
    cell.source["model_path"] = str(cell.model_file) if cell.model_file else None
    ecfg = load_trained_policy(cell) if cfg.run or cfg.checkpoint else cfg
    if cell.model_file is not None:
        inspect_model_file(cell)
    if cell.file_info is not None:
        obs_shape = cell.file_info.inputs[0].shape[1:]
    else:
        obs_shape = cell.net.obs_shape
    cell.env = play_env(ecfg, tuple(obs_shape))
    obs_space, action_space = env_spaces(cell.env)
    cell.obs_space = obs_space
    if isinstance(action_space, spaces.Discrete):
        cell.num_actions = int(action_space.n)
        return cell
    box = check_box_actions(cell, action_space)
    cell.num_actions = int(box.shape[0])
    cell.action_span = (box.high - box.low).astype(np.float64).ravel()
    return cell


def check_box_actions(cell: EdgeCell, action_space: Any) -> spaces.Box:
    """A Box policy is benchmarked when its actions are a bounded 1-D Box (the fidelity
    check measures errors relative to each dimension's range) and it has the heads asked."""
    where = f"{describe_space(action_space)} actions of {describe_env(cell.env)}"
    if not isinstance(action_space, spaces.Box) or len(action_space.shape) != 1:
        raise TfliteInputError(
            f"the edge stage benchmarks policies with Discrete or 1-D Box actions; {where} "
            f"are not supported"
        )
    if not (np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))):
        raise TfliteInputError(
            f"{where} are unbounded: the edge stage measures a variant's action error "
            f"relative to each dimension's range (high - low), so it needs finite bounds; "
            f"give the env a bounded action space"
        )
    if cell.net is not None and not cell.net.has_value and str(cell.cfg.edge.heads) == "both":
        raise TfliteInputError(
            "edge.heads=both: this policy was saved without a value network (SAC's actor); "
            "use edge.heads=policy"
        )
    return action_space


def load_trained_policy(cell: EdgeCell) -> DictConfig:
    """Load and check the run's policy (``probe.npz`` too); write ``effective_config.yaml``.

    Returns the effective config: the run's model, env and algo, with ``env.*``
    of the command line on top.
    """
    # rlperf.models.policy_file imports torch: only a cell with a policy needs it.
    from rlperf.models.policy_file import count_trainable_params, load_policy

    trained, ecfg = upstream_run(cell.cfg, rllib=False)
    net = load_policy(trained.policy_path)
    probe = check_probe(trained.probe, *torch_policy_fns(net))
    cell.trained, cell.net = trained, net
    cell.cache = ArtifactCache.for_policy(cell.cache_root, trained.policy_path)
    name = str(trained.config.model.name)
    cell.model = {"name": name, **net.model_config(), "params": count_trainable_params(net)}
    cell.source.update(
        policy=str(trained.policy_path),
        run=str(trained.run_dir),
        model=name,
        policy_sha256_16=cell.cache.key,
        probe=probe,
        **trained.job_identity(),
    )
    write_effective_config(cell.out_dir, ecfg)
    return ecfg


def inspect_model_file(cell: EdgeCell) -> None:
    """``model_path``: the backend for it, runnable there, the policy's input shape."""
    assert cell.model_file is not None
    cell.file_info = info = read_tflite(cell.model_file)
    cell.backend = _backend_for_file(cell.backend, info)
    if not cell.spec.on_edgetpu:
        ensure_cpu_runnable(info, cell.backend)
    in_shape = info.inputs[0].shape[1:]
    if cell.net is not None and policy_input_shape(cell.net) != tuple(in_shape):
        raise TfliteInputError(
            f"model_path input {list(in_shape)} does not match the policy's "
            f"observation shape {list(policy_input_shape(cell.net))}"
        )


def _backend_for_file(backend: str, info: Any) -> str:
    """``backend=rllib`` (the default) with ``model_path``: pick the backend from the file."""
    if not backend_spec(backend).in_rllib:
        return backend
    if info.is_edgetpu_compiled:
        return next(spec.name for spec in BACKEND_SPECS if spec.on_edgetpu)
    by_variant = {backend_spec(name).variant: name for name in POST_TRAINING_BACKENDS}
    return by_variant.get(info.variant, str(Backend.tflite_fp32))
