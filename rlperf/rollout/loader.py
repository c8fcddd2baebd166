"""Find, check and load the trained policy a rollout plays (``run=`` / ``checkpoint=``).

A training job folder (``outputs/<date>/<time>`` or one job of a sweep) holds
``.hydra/config.yaml`` (the resolved config it trained with) and ``checkpoint/``
(the RLlib checkpoint plus ``rlperf_policy.pt`` and ``probe.npz``, see
:func:`rlperf.training.job.save_checkpoint`). The rollout takes the model, env and
algo settings from that config, so nothing has to be repeated on its command
line; ``env.*`` keys given on the command line are applied on top (e.g.
``env.max_episode_steps=500``), an explicit ``model=`` that differs from the
run's is an error.

Everything is checked before Ray or an env starts, and every error names the
path and what was expected: a missing folder or file, a truncated file, a
checkpoint of another model than its run's config, a checkpoint written by an
incompatible rlperf or Ray version.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

#: Where the parts of an RLlib Algorithm checkpoint the rollout needs live.
RLLIB_METADATA = "rllib_checkpoint.json"
RL_MODULE_DIR = Path("learner_group", "learner", "rl_module", "default_policy")
ENV_TO_MODULE_DIR = Path("env_runner", "env_to_module_connector")
MODULE_TO_ENV_DIR = Path("env_runner", "module_to_env_connector")
PROBE_FILE = "probe.npz"
CONFIG_FILE = Path(".hydra", "config.yaml")

# Logits of the restored RLModule on the probe observations must match the ones
# saved with the checkpoint to this tolerance (float32 on CPU is bit-identical in
# practice; GPUs reorder sums).
PROBE_ATOL = {"cpu": 1e-5, "cuda": 1e-3}


class CheckpointError(ValueError):
    """A run folder or checkpoint that cannot be rolled out; the message says why and where."""


@dataclass
class TrainedRun:
    """A checked training run: its folders, its config, and what its checkpoint says."""

    run_dir: Path | None
    checkpoint_dir: Path
    config: DictConfig  # the run's .hydra/config.yaml (interpolations resolved)
    rlperf_version: str
    ray_version: str
    model_config: dict[str, Any]  # obs_shape, num_actions, conv_filters of rlperf_policy.pt
    trained_iterations: int | None
    probe: dict[str, Any] | None = None  # obs, logits, actions (numpy) from probe.npz
    notes: list[str] = field(default_factory=list)

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
        """The ``source`` entry of ``summary.json``."""
        model = self.config.model
        return {
            "run": str(self.run_dir) if self.run_dir is not None else None,
            "checkpoint": str(self.checkpoint_dir),
            "model": {
                "name": str(model.name),
                "dim": int(model.dim),
                "framestack": int(model.framestack),
                "conv_filters": OmegaConf.to_container(model.conv_filters),
            },
            "trained_iterations": self.trained_iterations,
            "rlperf_version": self.rlperf_version,
            "ray_version": self.ray_version,
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------


def _as_path(value: str | Path, base: Path | None) -> Path:
    path = Path(str(value)).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    return path


def find_run_dir(run: Path, model_name: str | None = None) -> Path:
    """``run`` itself if it is a job folder, or the one training job of a sweep folder.

    A multirun folder (``multirun/<date>/<time>``) holds one job per cell; with
    several, ``model_name`` (an explicit ``model=``) picks the job trained with it.
    """
    if not run.exists():
        raise CheckpointError(
            f"run={run}: no such folder; expected a training job folder "
            f"(outputs/<date>/<time>) holding {CONFIG_FILE} and checkpoint/"
        )
    if not run.is_dir():
        raise CheckpointError(
            f"run={run} is a file; expected a training job folder holding {CONFIG_FILE} "
            f"and checkpoint/ (use checkpoint=<path> for a checkpoint folder)"
        )
    if (run / CONFIG_FILE).is_file() or (run / "checkpoint").is_dir():
        return run
    jobs = sorted(p.parent.parent for p in run.glob(f"*/{CONFIG_FILE}"))
    jobs = [j for j in jobs if (j / "checkpoint").is_dir()]
    if not jobs:
        raise CheckpointError(
            f"run={run} is neither a training job folder (with {CONFIG_FILE} and "
            f"checkpoint/) nor a sweep folder containing such jobs"
        )
    names = {j: OmegaConf.select(OmegaConf.load(j / CONFIG_FILE), "model.name") for j in jobs}
    matching = [j for j in jobs if model_name is None or names[j] == model_name]
    if len(matching) == 1:
        return matching[0]
    listing = ", ".join(f"{j.name} (model={names[j]})" for j in jobs)
    if not matching:
        raise CheckpointError(f"run={run}: no job trained model={model_name}; jobs: {listing}")
    raise CheckpointError(
        f"run={run} is a sweep folder with {len(matching)} trained jobs ({listing}); "
        f"choose one with run={run}/<job>" + ("" if model_name else " or pick one with model=")
    )


def resolve_paths(
    run: str | Path | None,
    checkpoint: str | Path | None,
    base: Path | None = None,
    model_name: str | None = None,
) -> tuple[Path | None, Path]:
    """(run folder, checkpoint folder) of ``run=`` / ``checkpoint=`` (relative to ``base``).

    ``checkpoint=`` may name the checkpoint folder or its ``rlperf_policy.pt``;
    without ``run=`` the run folder is the one the checkpoint was written into
    (its parent).
    """
    from rlperf.models.vision_net import POLICY_FILE

    if run is None and checkpoint is None:
        raise CheckpointError("stage=rollout needs run=<training job folder> or checkpoint=<path>")
    run_dir = find_run_dir(_as_path(run, base), model_name) if run is not None else None
    if checkpoint is not None:
        ckpt = _as_path(checkpoint, base)
        if ckpt.is_file() and ckpt.name == POLICY_FILE:
            ckpt = ckpt.parent
        if not ckpt.exists():
            raise CheckpointError(
                f"checkpoint={checkpoint}: no such folder {ckpt}; expected the checkpoint/ "
                f"folder of a training job (RLlib checkpoint + {POLICY_FILE})"
            )
        if not ckpt.is_dir():
            raise CheckpointError(
                f"checkpoint={checkpoint}: {ckpt} is a file; expected the checkpoint/ folder "
                f"of a training job (RLlib checkpoint + {POLICY_FILE})"
            )
        if run_dir is None:
            run_dir = ckpt.parent if (ckpt.parent / CONFIG_FILE).is_file() else None
    else:
        assert run_dir is not None
        ckpt = run_dir / "checkpoint"
        if not ckpt.is_dir():
            raise CheckpointError(
                f"run={run}: {ckpt} does not exist; a training job writes its checkpoint at "
                f"the end of training{_run_status(run_dir)}"
            )
    return run_dir, ckpt


def _run_status(run_dir: Path) -> str:
    summary = run_dir / "summary.json"
    try:
        status = json.loads(summary.read_text()).get("status")
    except (OSError, ValueError):
        return ""
    return f" (its summary.json says status={status})" if status else ""


# --------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------


def _major_minor(version: str) -> tuple[str, ...]:
    return tuple(str(version).split("+")[0].split(".")[:2])


def compatible_version(saved: str, current: str) -> bool:
    """Same major.minor (rlperf and Ray both break checkpoint formats in minor releases)."""
    return _major_minor(saved) == _major_minor(current)


def load_run_config(run_dir: Path) -> DictConfig:
    """The run's ``.hydra/config.yaml``, checked to be a training job's config."""
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        raise CheckpointError(
            f"{path} does not exist; expected the training job's config written by Hydra "
            f"(the rollout reads the model and env settings from it)"
        )
    try:
        cfg = OmegaConf.load(path)
    except Exception as exc:  # truncated / not YAML
        raise CheckpointError(
            f"{path} is not a readable config ({type(exc).__name__}: {exc})"
        ) from exc
    if not isinstance(cfg, DictConfig):
        raise CheckpointError(f"{path} is not a config mapping; expected a training job's config")
    missing = [
        k
        for k in ("stage", "model.dim", "model.framestack", "model.conv_filters", "env.id")
        if OmegaConf.select(cfg, k, default=None) is None
    ]
    if missing:
        raise CheckpointError(
            f"{path} lacks {', '.join(missing)}; expected the resolved config of an rlperf "
            f"training job (is the file truncated?)"
        )
    if cfg.stage != "train":
        raise CheckpointError(
            f"{run_dir} is a stage={cfg.stage} job, not a training job; expected a folder "
            f"written by `rlperf stage=train` (run=<training job folder>)"
        )
    return cfg


def check_checkpoint_files(ckpt: Path) -> dict[str, Any]:
    """The RLlib parts and rlperf files are there; returns ``rllib_checkpoint.json``."""
    from rlperf.models.vision_net import POLICY_FILE

    needed: list[str | Path] = [
        RLLIB_METADATA,
        POLICY_FILE,
        RL_MODULE_DIR,
        ENV_TO_MODULE_DIR,
        MODULE_TO_ENV_DIR,
    ]
    missing = [str(p) for p in needed if not (ckpt / p).exists()]
    if missing:
        raise CheckpointError(
            f"checkpoint {ckpt} is incomplete: missing {', '.join(missing)}; expected an RLlib "
            f"Algorithm checkpoint written by rlperf's training job ({RLLIB_METADATA}, "
            f"{RL_MODULE_DIR}/, {ENV_TO_MODULE_DIR}/, {MODULE_TO_ENV_DIR}/, {POLICY_FILE})"
        )
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
    import ray

    saved = str(meta.get("ray_version", "unknown"))
    if not compatible_version(saved, ray.__version__):
        raise CheckpointError(
            f"checkpoint {ckpt} was written by Ray {saved}; this rlperf runs Ray "
            f"{ray.__version__} and reads RLlib checkpoints of Ray "
            f"{'.'.join(_major_minor(ray.__version__))}.x"
        )
    return saved


def read_policy_payload(ckpt: Path) -> dict[str, Any]:
    """``rlperf_policy.pt``: readable, of this format version, from a compatible rlperf."""
    import torch

    from rlperf import __version__
    from rlperf.models.vision_net import POLICY_FILE, POLICY_FORMAT_VERSION

    path = ckpt / POLICY_FILE
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(
            f"{path} is truncated or not a torch file ({type(exc).__name__}: {exc}); expected "
            f"the rlperf policy file written with the checkpoint"
        ) from exc
    if not isinstance(payload, dict) or "model_config" not in payload:
        raise CheckpointError(f"{path}: not an rlperf policy file (no model_config)")
    fmt = payload.get("format_version")
    saved = str(payload.get("rlperf_version", "unknown"))
    if fmt != POLICY_FORMAT_VERSION or not compatible_version(saved, __version__):
        raise CheckpointError(
            f"{path} was written by rlperf {saved} (policy format {fmt!r}); this is rlperf "
            f"{__version__}, which reads checkpoints of rlperf "
            f"{'.'.join(_major_minor(__version__))}.x with policy format {POLICY_FORMAT_VERSION}"
            f"; retrain with this rlperf or use the rlperf that trained it"
        )
    return payload


def _normalize_filters(filters: Iterable[Any]) -> list[list[Any]]:
    out = []
    for f in filters:
        k = f[1]
        kernel = [int(k[0]), int(k[1])] if isinstance(k, list | tuple) else [int(k), int(k)]
        out.append([int(f[0]), kernel, int(f[2])])
    return out


def model_geometry(cfg_model: Any) -> dict[str, Any]:
    """``obs_shape`` and ``conv_filters`` of a config's ``model`` subtree."""
    filters = OmegaConf.to_container(cfg_model.conv_filters, resolve=True)
    assert isinstance(filters, list)
    dim, stack = int(cfg_model.dim), int(cfg_model.framestack)
    return {"obs_shape": [dim, dim, stack], "conv_filters": _normalize_filters(filters)}


def check_same_model(ckpt: Path, run_cfg: DictConfig, model_config: dict[str, Any]) -> None:
    """The checkpoint's network is the one its run's config describes."""
    want = model_geometry(run_cfg.model)
    have = {
        "obs_shape": [int(v) for v in model_config.get("obs_shape", [])],
        "conv_filters": _normalize_filters(model_config.get("conv_filters", [])),
    }
    if want != have:
        raise CheckpointError(
            f"checkpoint {ckpt} holds another model than its run's config: the checkpoint's "
            f"network has input {have['obs_shape']} and conv_filters {have['conv_filters']}, "
            f"the run's config (model={run_cfg.model.name}) expects input {want['obs_shape']} "
            f"and conv_filters {want['conv_filters']}"
        )


def load_trained_run(
    run: str | Path | None,
    checkpoint: str | Path | None,
    base: Path | None = None,
    model_name: str | None = None,
) -> TrainedRun:
    """Resolve and check ``run=`` / ``checkpoint=`` (no Ray started, no weights built).

    Args:
        run: ``run`` of the config: a training job folder or a sweep folder.
        checkpoint: ``checkpoint`` of the config: a checkpoint folder.
        base: folder relative paths are taken from (default: the working directory).
        model_name: an explicit ``model=`` of the rollout job, used to pick a job of a
            sweep folder.

    Raises:
        CheckpointError: naming the path and what was expected.
    """
    import numpy as np

    base = base if base is not None else Path.cwd()
    run_dir, ckpt = resolve_paths(run, checkpoint, base, model_name)
    if run_dir is None:
        raise CheckpointError(
            f"checkpoint={checkpoint}: no {CONFIG_FILE} in {ckpt.parent} (the job folder the "
            f"checkpoint was written into); the rollout reads the model and env settings "
            f"from it: pass run=<training job folder> as well"
        )
    run_cfg = load_run_config(run_dir)
    meta = check_checkpoint_files(ckpt)
    ray_version = check_ray_version(ckpt, meta)
    payload = read_policy_payload(ckpt)
    check_same_model(ckpt, run_cfg, payload["model_config"])
    resolved = OmegaConf.create(OmegaConf.to_container(run_cfg, resolve=True))
    assert isinstance(resolved, DictConfig)
    probe = None
    notes: list[str] = []
    probe_path = ckpt / PROBE_FILE
    if probe_path.is_file():
        try:
            with np.load(probe_path) as data:
                probe = {k: data[k] for k in ("obs", "logits", "actions")}
        except Exception as exc:
            raise CheckpointError(
                f"{probe_path} is truncated or unreadable ({type(exc).__name__}: {exc}); "
                f"expected the probe observations and logits saved with the checkpoint"
            ) from exc
    else:
        notes.append(f"no {PROBE_FILE}: the restored policy was not checked against it")
    extra = payload.get("extra") or {}
    return TrainedRun(
        run_dir=run_dir,
        checkpoint_dir=ckpt,
        config=resolved,
        rlperf_version=str(payload.get("rlperf_version")),
        ray_version=ray_version,
        model_config=dict(payload["model_config"]),
        trained_iterations=int(extra["iteration"]) if "iteration" in extra else None,
        probe=probe,
        notes=notes,
    )


# --------------------------------------------------------------------------
# The rollout's effective config
# --------------------------------------------------------------------------


def _plain(cfg: DictConfig, key: str) -> dict[str, Any]:
    node = OmegaConf.select(cfg, key)
    out = OmegaConf.to_container(node, resolve=True) if node is not None else {}
    assert isinstance(out, dict)
    return {str(k): v for k, v in out.items()}


def _override_key(override: str) -> str:
    return str(override).split("=", 1)[0].lstrip("+~")


def effective_config(
    cfg: DictConfig, trained: TrainedRun, overrides: Iterable[str] = ()
) -> DictConfig:
    """The rollout job's config with ``model``, ``env`` and ``algo`` taken from the run.

    Everything else (``seed``, ``workers``, ``gpu_layout``, ``cpu_affinity``,
    ``ray``, ``rollout``) is the rollout job's own. ``overrides`` are the job's
    command-line overrides: an ``env=`` / ``env.<key>=`` among them is applied on
    top of the run's env; a ``model=`` / ``model.<key>=`` that disagrees with the
    run's model is an error.
    """
    from rlperf.config.validate import ConfigError, validate_model

    keys = [_override_key(o) for o in overrides]
    run_model = model_geometry(trained.config.model)
    for key in keys:
        if (key == "model" or key.startswith("model.")) and (
            model_geometry(cfg.model) != run_model
            or (key == "model" and cfg.model.name != trained.config.model.name)
        ):
            given = cfg.model.name if key == "model" else OmegaConf.select(cfg, key)
            raise ConfigError(
                f"{key}={given} was given, but the run {trained.run_dir} trained "
                f"model={trained.config.model.name} (input {run_model['obs_shape']}, "
                f"conv_filters {run_model['conv_filters']}); the rollout takes the model "
                f"from the run: drop {key}= or give that model's run"
            )
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)
    own_env = dict(plain["env"])
    # The run's values over the job's defaults (keys newer than the run keep defaults).
    env = {**own_env, **_plain(trained.config, "env")}
    if "env" in keys:
        env = dict(own_env)
    for key in keys:
        if key.startswith("env.") and key[4:] in own_env:
            env[key[4:]] = own_env[key[4:]]
    plain["model"] = _plain(trained.config, "model")
    plain["env"] = env
    plain["algo"] = {**plain["algo"], **_plain(trained.config, "algo")}
    out = OmegaConf.create(plain)
    OmegaConf.set_struct(out, True)
    validate_model(out)
    return out
