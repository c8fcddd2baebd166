"""A training run's checkpoint, checked before Ray or an env starts: the run's config, the
checkpoint's files, the versions that wrote them and the network they hold.

:func:`load_trained_run` resolves ``run=`` / ``checkpoint=``
(:mod:`rlperf.runs.locate`) and checks, in order: the run's ``.hydra/config.yaml``
is a training job's (:func:`load_run_config`); the checkpoint folder holds
``rlperf_policy.pt`` and, for a stage that restores RLlib's parts (the rollout),
those parts and a Ray of the same major.minor (:func:`check_checkpoint_files`,
:func:`check_ray_version`); the policy file is readable by this rlperf
(:func:`rlperf.models.policy_file.read_policy_payload`) and holds the network the
run's config describes (:func:`rlperf.runs.geometry.check_same_model`). The result
is a :class:`TrainedRun`; no weights are built. Every error is a
:class:`~rlperf.errors.CheckpointError` naming the path and what was expected.

Importing this module is cheap: torch (the policy file) and Ray are imported by
the functions that need them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlperf.errors import CheckpointError
from rlperf.layout import (
    CONFIG_FILE,
    ENV_TO_MODULE_DIR,
    MODULE_TO_ENV_DIR,
    MULTIRUN_FILE,
    POLICY_FILE,
    PROBE_FILE,
    RL_MODULE_DIR,
    RLLIB_METADATA,
    compatible_version,
    major_minor,
)
from rlperf.results.columns import ITERATION
from rlperf.runs.geometry import check_same_model, model_geometry, model_kind_of
from rlperf.runs.jobs import JobQuery, UpstreamJob
from rlperf.runs.locate import resolve_paths
from rlperf.runs.probe import Probe, read_probe
from rlperf.specs.stages import trains


@dataclass
class TrainedRun:
    """A checked training run: its folders, its config, and what its checkpoint says."""

    run_dir: Path
    checkpoint_dir: Path
    config: DictConfig  # the run's .hydra/config.yaml (interpolations resolved)
    rlperf_version: str
    ray_version: str | None  # of rllib_checkpoint.json; None where the RLlib parts were not read
    model_config: dict[str, Any]  # obs_shape, num_actions, conv_filters of rlperf_policy.pt
    trained_iterations: int | None
    probe: Probe | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def policy_path(self) -> Path:
        return self.checkpoint_dir / POLICY_FILE

    @property
    def module_dir(self) -> Path:
        return self.checkpoint_dir / RL_MODULE_DIR

    @property
    def env_to_module_dir(self) -> Path:
        return self.checkpoint_dir / ENV_TO_MODULE_DIR

    @property
    def module_to_env_dir(self) -> Path:
        return self.checkpoint_dir / MODULE_TO_ENV_DIR

    def describe(self) -> dict[str, Any]:
        """The ``source`` entry of a rollout's ``summary.json``."""
        model = self.config.model
        geometry = model_geometry(model)
        if "obs_shape" in geometry:
            dim, _, stack = geometry.pop("obs_shape")
            geometry = {"dim": dim, "framestack": stack, **geometry}
        return {
            "run": str(self.run_dir),
            "checkpoint": str(self.checkpoint_dir),
            "model": {"name": str(model.name), **geometry},
            **self.job_identity(),
            "trained_iterations": self.trained_iterations,
            "rlperf_version": self.rlperf_version,
            "ray_version": self.ray_version,
            "notes": list(self.notes),
        }

    def job_identity(self) -> dict[str, Any]:
        """Which job of which sweep this run is (keys of ``summary.json["source"]``).

        ``sweep``: the sweep folder holding the run (None for a single run's folder),
        ``job``: the run's folder name, ``identity``: its model and the
        :data:`~rlperf.runs.jobs.IDENTITY_KEYS` values, ``overrides``: its command-line overrides.
        """
        job = UpstreamJob(self.run_dir)
        parent = self.run_dir.parent
        in_sweep = (parent / MULTIRUN_FILE).is_file()
        return {
            "sweep": str(parent) if in_sweep else None,
            "job": self.run_dir.name,
            "identity": {"model": job.model, **job.identity},
            "overrides": job.overrides(),
        }


def load_run_config(run_dir: Path) -> DictConfig:
    """The run's ``.hydra/config.yaml``, checked to be a training job's config."""
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        raise CheckpointError(
            f"{path} does not exist; expected the training job's config written by Hydra "
            f"(downstream stages read the model and env settings from it)"
        )
    try:
        cfg = OmegaConf.load(path)
    except Exception as exc:  # truncated / not YAML
        raise CheckpointError(
            f"{path} is not a readable config ({type(exc).__name__}: {exc})"
        ) from exc
    if not isinstance(cfg, DictConfig):
        raise CheckpointError(f"{path} is not a config mapping; expected a training job's config")
    missing = [k for k in _required_run_keys(cfg) if OmegaConf.select(cfg, k, default=None) is None]
    if missing:
        raise CheckpointError(
            f"{path} lacks {', '.join(missing)}; expected the resolved config of an rlperf "
            f"training job (is the file truncated?)"
        )
    if not trains(cfg.stage):
        raise CheckpointError(
            f"{run_dir} is a stage={cfg.stage} job, not a training job; expected a folder "
            f"written by `rlperf stage=train` (run=<training job folder>)"
        )
    return cfg


def _required_run_keys(cfg: DictConfig) -> tuple[str, ...]:
    """Keys a training run's config has, by its model and env kinds (no kind: rlperf 0.1)."""
    model = OmegaConf.select(cfg, "model", default=None)
    if model_kind_of(model) == "mlp":
        model_keys: tuple[str, ...] = ("model.hiddens", "model.activation")
    else:
        model_keys = ("model.dim", "model.framestack", "model.conv_filters")
    env_key = "env.entry_point" if OmegaConf.select(cfg, "env.kind") == "custom" else "env.id"
    return ("stage", *model_keys, env_key)


def check_checkpoint_files(ckpt: Path, rllib: bool = True) -> dict[str, Any] | None:
    """The rlperf files (and with ``rllib`` the RLlib parts) are there.

    Returns ``rllib_checkpoint.json`` with ``rllib``, else None: a stage that
    only plays ``rlperf_policy.pt`` (edge) needs no RLlib part.
    """
    needed: list[str | Path] = [POLICY_FILE]
    if rllib:
        needed = [RLLIB_METADATA, POLICY_FILE, RL_MODULE_DIR, ENV_TO_MODULE_DIR, MODULE_TO_ENV_DIR]
    missing = [str(p) for p in needed if not (ckpt / p).exists()]
    if missing:
        what = (
            f"an RLlib Algorithm checkpoint written by rlperf's training job ({RLLIB_METADATA}, "
            f"{RL_MODULE_DIR}/, {ENV_TO_MODULE_DIR}/, {MODULE_TO_ENV_DIR}/, {POLICY_FILE})"
            if rllib
            else f"the checkpoint folder of rlperf's training job (with {POLICY_FILE})"
        )
        raise CheckpointError(
            f"checkpoint {ckpt} is incomplete: missing {', '.join(missing)}; expected {what}"
        )
    if not rllib:
        return None
    meta_path = ckpt / RLLIB_METADATA
    try:
        meta = json.loads(meta_path.read_text())
    except ValueError as exc:
        raise CheckpointError(
            f"{meta_path} is truncated or not JSON ({exc}); expected RLlib's checkpoint metadata"
        ) from exc
    if not isinstance(meta, dict):
        raise CheckpointError(f"{meta_path}: expected a JSON object, got {type(meta).__name__}")
    return meta


def check_ray_version(ckpt: Path, meta: dict[str, Any]) -> str:
    """The checkpoint was written by a Ray this rlperf's Ray can read (same major.minor)."""
    import ray  # seconds to import; only the stages that restore RLlib's parts call this

    saved = str(meta.get("ray_version", "unknown"))
    if not compatible_version(saved, ray.__version__):
        raise CheckpointError(
            f"checkpoint {ckpt} was written by Ray {saved}; this rlperf runs Ray "
            f"{ray.__version__} and reads RLlib checkpoints of Ray "
            f"{'.'.join(major_minor(ray.__version__))}.x"
        )
    return saved


def load_trained_run(
    run: str | Path | None,
    checkpoint: str | Path | None,
    base: Path | None = None,
    query: JobQuery | None = None,
    *,
    rllib: bool = True,
) -> TrainedRun:
    """Resolve and check ``run=`` / ``checkpoint=`` (no Ray started, no weights built).

    Args:
        run: ``run`` of the config: a training job folder or a sweep folder.
        checkpoint: ``checkpoint`` of the config: a checkpoint folder or its policy file.
        base: folder relative paths are taken from (default: the working directory).
        query: which job of a sweep folder to take (an explicit ``model=``,
            ``run_match``, ``run_select``; :func:`~rlperf.runs.jobs.job_query`).
        rllib: check the RLlib parts of the checkpoint and its Ray version too (the
            rollout restores them; the edge stage reads ``rlperf_policy.pt`` only).

    Raises:
        CheckpointError: naming the path and what was expected.
    """
    run_dir, ckpt = resolve_paths(run, checkpoint, base, query)
    if run_dir is None:
        raise CheckpointError(
            f"checkpoint={checkpoint}: no {CONFIG_FILE} in {ckpt.parent} (the job folder the "
            f"checkpoint was written into); downstream stages read the model and env "
            f"settings from it: pass run=<training job folder> as well"
        )
    run_cfg = load_run_config(run_dir)
    meta = check_checkpoint_files(ckpt, rllib)
    ray_version = check_ray_version(ckpt, meta) if meta is not None else None
    # policy_file imports torch at its top; reading run folders does not need it.
    from rlperf.models.policy_file import read_policy_payload

    payload = read_policy_payload(ckpt)
    check_same_model(ckpt, run_cfg, payload["model_config"])
    resolved = OmegaConf.create(OmegaConf.to_container(run_cfg, resolve=True))
    assert isinstance(resolved, DictConfig)
    probe = read_probe(ckpt)
    notes = [] if probe else [f"no {PROBE_FILE}: the restored policy was not checked against it"]
    extra = payload.get("extra") or {}
    return TrainedRun(
        run_dir=run_dir,
        checkpoint_dir=ckpt,
        config=resolved,
        rlperf_version=str(payload.get("rlperf_version")),
        ray_version=ray_version,
        model_config=dict(payload["model_config"]),
        trained_iterations=int(extra[ITERATION]) if ITERATION in extra else None,
        probe=probe,
        notes=notes,
    )
