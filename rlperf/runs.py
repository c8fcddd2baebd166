"""The run-folder contract every stage shares: what a job folder holds, and how a
downstream stage (rollout, edge) finds, checks and reuses a training run.

A job folder (``outputs/<date>/<time>`` or ``multirun/<date>/<time>/<n>``, see
``docs/results.md``) holds Hydra's ``.hydra/config.yaml``, ``fingerprint.json``,
``summary.json``, the stage's CSV files, and for a training job ``checkpoint/``:
the RLlib checkpoint plus ``rlperf_policy.pt`` (torch weights, reloads without
Ray) and ``probe.npz`` (observations with the logits the policy gave when it
was saved).

A downstream stage names its training run with ``run=`` (a training job folder,
or a sweep folder holding such jobs) or ``checkpoint=`` (the ``checkpoint/``
folder of a training job, or its ``rlperf_policy.pt``; the run is then the
folder the checkpoint was written into). It takes ``model``, ``env`` and
``algo`` from the run's config (:func:`merge_run_config`: ``env.*`` given on the
command line on top, an explicit ``model=`` that differs from the run's is an
error) and checks the restored policy against ``probe.npz``
(:func:`check_probe`). Everything is checked before Ray or an env starts, and
every error names the path and what was expected.

Importing this module is cheap: numpy, torch and Ray are imported by the
functions that need them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

if TYPE_CHECKING:
    import numpy as np

# --------------------------------------------------------------------------
# Layout of a job folder
# --------------------------------------------------------------------------

#: Hydra's snapshot of the composed, resolved config (downstream stages reload it).
CONFIG_FILE = Path(".hydra", "config.yaml")
#: A downstream job's config with the upstream run's model / env / algo in force.
EFFECTIVE_CONFIG_FILE = "effective_config.yaml"
FINGERPRINT_FILE = "fingerprint.json"
SUMMARY_FILE = "summary.json"
TELEMETRY_FILE = "telemetry.csv"
METRICS_FILE = "metrics.csv"  # training: one row per iteration
STEPS_FILE = "steps.csv"  # rollout, edge: one row per step
EPISODES_FILE = "episodes.csv"  # rollout, edge: one row per finished episode
REQUESTS_FILE = "requests.csv"  # serve: one row per request
LEVELS_FILE = "levels.csv"  # serve: one row per load level

#: A training job's checkpoint folder and the rlperf files in it.
CHECKPOINT_DIR = "checkpoint"
POLICY_FILE = "rlperf_policy.pt"
PROBE_FILE = "probe.npz"

#: Where the parts of an RLlib Algorithm checkpoint the rollout needs live.
RLLIB_METADATA = "rllib_checkpoint.json"
RL_MODULE_DIR = Path("learner_group", "learner", "rl_module", "default_policy")
ENV_TO_MODULE_DIR = Path("env_runner", "env_to_module_connector")
MODULE_TO_ENV_DIR = Path("env_runner", "module_to_env_connector")

#: Max abs logit error allowed between a reloaded policy and ``probe.npz``, by the
#: torch device the reloaded policy runs on. The probe is the same float32 network
#: on the same observations: on the CPU that is bit-identical in practice (1e-5
#: leaves room for another thread count's summation order), while GPU kernels
#: reorder and fuse sums (TF32 convolutions included), hence 1e-3. Both are far
#: below what another training's weights give (logits differ by ~1e-1 and more).
PROBE_ATOL = {"cpu": 1e-5, "cuda": 1e-3}


# --------------------------------------------------------------------------
# Outcomes: one status vocabulary for runs and sweep cells, one exclusion column
# --------------------------------------------------------------------------


class RunStatus(StrEnum):
    """``status`` of a run (``summary.json``) and of a sweep cell (``cell.json``, ``sweep.json``).

    Every stage and the sweep launcher use these values; the report reads them
    (docs/results.md#statuses). New outcomes are added here, not invented by a
    stage.
    """

    pending = "pending"  # a sweep cell that has not started (yet)
    running = "running"  # started and not ended (a killed run keeps this)
    completed = "completed"  # the stage finished; its results are measurements
    failed = "failed"  # the stage raised; ``error`` and ``traceback`` say what
    invalid = "invalid"  # refused before start: the config is wrong (``error`` names the key)
    skipped = "skipped"  # refused: this machine cannot run it (GPU, Edge TPU, CPUs, runtime)
    interrupted = "interrupted"  # Ctrl-C; the rows written so far are kept
    stopped_early = "stopped_early"  # a search scheduler stopped it; ``error`` has its reason


#: A sweep keeps cells with these statuses when it is resumed (not run again).
FINAL_STATUSES: frozenset[str] = frozenset({RunStatus.completed, RunStatus.stopped_early})
#: Statuses of runs that never started their stage (``summary.json`` has ``preflight: true``).
REFUSED_STATUSES: frozenset[str] = frozenset({RunStatus.invalid, RunStatus.skipped})

#: The per-row exclusion column of metrics.csv and steps.csv: empty when the row
#: counts, else the reason it is left out of summaries, rankings and figures
#: (the row stays in the file).
EXCLUDED_COLUMN = "excluded"


class Exclusion(StrEnum):
    """Why a row is excluded (the value of :data:`EXCLUDED_COLUMN`)."""

    warmup = "warmup"  # before the end of the warm-up (the rule is in summary.json)
    fault = "fault"  # measured while a fault was injected (serve: a replica killed)


def is_excluded(value: object) -> bool:
    """Whether an :data:`EXCLUDED_COLUMN` value excludes its row (empty / NaN: it counts)."""
    return isinstance(value, str) and value != ""


class CheckpointError(ValueError):
    """A run folder or checkpoint that cannot be used; the message says why and where."""


@dataclass
class Probe:
    """``probe.npz``: observations with the logits and greedy actions of the saved policy."""

    path: Path
    obs: np.ndarray
    logits: np.ndarray
    actions: np.ndarray


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
        return {
            "run": str(self.run_dir),
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
# Command-line overrides
# --------------------------------------------------------------------------


def command_line_overrides() -> list[str]:
    """This job's command-line overrides, sweep parameters included (empty outside Hydra)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return []
        return [str(o) for o in HydraConfig.get().overrides.task]
    except Exception:  # no Hydra app around this call
        return []


def override_keys(overrides: Iterable[str]) -> set[str]:
    """The config keys ``overrides`` set: ``+env.noop_max=0`` -> ``env.noop_max``."""
    return {str(o).split("=", 1)[0].lstrip("+~") for o in overrides}


def explicit_model(cfg: DictConfig, overrides: Iterable[str]) -> str | None:
    """``model.name`` where ``model=`` is among ``overrides``, else None."""
    return str(cfg.model.name) if "model" in override_keys(overrides) else None


# --------------------------------------------------------------------------
# Finding a run
# --------------------------------------------------------------------------

_EXPECTED_CHECKPOINT = f"the {CHECKPOINT_DIR}/ folder of a training job (or its {POLICY_FILE})"


def _as_path(value: str | Path, base: Path) -> Path:
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else base / path


def find_run_dir(run: Path, model_name: str | None = None) -> Path:
    """``run`` itself if it is a job folder, or the one training job of a sweep folder.

    A multirun folder (``multirun/<date>/<time>``) holds one job per cell; with
    several, ``model_name`` (an explicit ``model=``) picks the job trained with it.
    """
    if not run.exists():
        raise CheckpointError(
            f"run={run}: no such folder; expected a training job folder "
            f"(outputs/<date>/<time>) holding {CONFIG_FILE} and {CHECKPOINT_DIR}/"
        )
    if not run.is_dir():
        raise CheckpointError(
            f"run={run} is a file; expected a training job folder holding {CONFIG_FILE} "
            f"and {CHECKPOINT_DIR}/ (use checkpoint=<path> for a checkpoint folder)"
        )
    if (run / CONFIG_FILE).is_file() or (run / CHECKPOINT_DIR).is_dir():
        return run
    jobs = sorted(p.parent.parent for p in run.glob(f"*/{CONFIG_FILE}"))
    jobs = [j for j in jobs if (j / CHECKPOINT_DIR).is_dir()]
    if not jobs:
        raise CheckpointError(
            f"run={run} is neither a training job folder (with {CONFIG_FILE} and "
            f"{CHECKPOINT_DIR}/) nor a sweep folder containing such jobs"
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


def _checkpoint_dir(checkpoint: str | Path, base: Path) -> Path:
    ckpt = _as_path(checkpoint, base)
    if ckpt.is_file() and ckpt.name == POLICY_FILE:
        return ckpt.parent
    if not ckpt.exists():
        raise CheckpointError(
            f"checkpoint={checkpoint}: no such folder {ckpt}; expected {_EXPECTED_CHECKPOINT}"
        )
    if not ckpt.is_dir():
        raise CheckpointError(
            f"checkpoint={checkpoint}: {ckpt} is a file; expected {_EXPECTED_CHECKPOINT}"
        )
    return ckpt


def resolve_paths(
    run: str | Path | None,
    checkpoint: str | Path | None,
    base: Path | None = None,
    model_name: str | None = None,
) -> tuple[Path | None, Path]:
    """(run folder, checkpoint folder) of ``run=`` / ``checkpoint=`` (relative to ``base``).

    ``checkpoint=`` may name the checkpoint folder or its ``rlperf_policy.pt``;
    without ``run=`` the run folder is the one the checkpoint was written into
    (its parent), or None where that folder holds no run config.
    """
    base = base if base is not None else Path.cwd()
    if run is None and checkpoint is None:
        raise CheckpointError(
            f"no training run given: pass run=<training job folder> or checkpoint=<path> "
            f"({_EXPECTED_CHECKPOINT})"
        )
    run_dir = find_run_dir(_as_path(run, base), model_name) if run is not None else None
    if checkpoint is not None:
        ckpt = _checkpoint_dir(checkpoint, base)
        if run_dir is None and (ckpt.parent / CONFIG_FILE).is_file():
            run_dir = ckpt.parent
        return run_dir, ckpt
    assert run_dir is not None
    ckpt = run_dir / CHECKPOINT_DIR
    if not ckpt.is_dir():
        raise CheckpointError(
            f"run={run}: {ckpt} does not exist; a training job writes its checkpoint at "
            f"the end of training{_run_status(run_dir)}"
        )
    return run_dir, ckpt


def _run_status(run_dir: Path) -> str:
    try:
        status = json.loads((run_dir / SUMMARY_FILE).read_text()).get("status")
    except (OSError, ValueError):
        return ""
    return f" (its {SUMMARY_FILE} says status={status})" if status else ""


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
    from rlperf.models.vision_net import POLICY_FORMAT_VERSION

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


def read_probe(ckpt: Path) -> Probe | None:
    """``probe.npz`` of a checkpoint folder; None where there is none."""
    import numpy as np

    path = ckpt / PROBE_FILE
    if not path.is_file():
        return None
    try:
        with np.load(path) as data:
            return Probe(path, data["obs"], data["logits"], data["actions"])
    except Exception as exc:
        raise CheckpointError(
            f"{path} is truncated or unreadable ({type(exc).__name__}: {exc}); "
            f"expected the probe observations and logits saved with the checkpoint"
        ) from exc


def write_probe(ckpt: Path, obs: np.ndarray, logits: np.ndarray) -> Path:
    """Save ``probe.npz``: observations, the policy's logits and its greedy actions."""
    import numpy as np

    path = ckpt / PROBE_FILE
    np.savez(path, obs=obs, logits=logits, actions=logits.argmax(axis=1))
    return path


def load_trained_run(
    run: str | Path | None,
    checkpoint: str | Path | None,
    base: Path | None = None,
    model_name: str | None = None,
    *,
    rllib: bool = True,
) -> TrainedRun:
    """Resolve and check ``run=`` / ``checkpoint=`` (no Ray started, no weights built).

    Args:
        run: ``run`` of the config: a training job folder or a sweep folder.
        checkpoint: ``checkpoint`` of the config: a checkpoint folder or its policy file.
        base: folder relative paths are taken from (default: the working directory).
        model_name: an explicit ``model=`` of the downstream job, used to pick a job of
            a sweep folder.
        rllib: check the RLlib parts of the checkpoint and its Ray version too (the
            rollout restores them; the edge stage reads ``rlperf_policy.pt`` only).

    Raises:
        CheckpointError: naming the path and what was expected.
    """
    run_dir, ckpt = resolve_paths(run, checkpoint, base, model_name)
    if run_dir is None:
        raise CheckpointError(
            f"checkpoint={checkpoint}: no {CONFIG_FILE} in {ckpt.parent} (the job folder the "
            f"checkpoint was written into); downstream stages read the model and env "
            f"settings from it: pass run=<training job folder> as well"
        )
    run_cfg = load_run_config(run_dir)
    meta = check_checkpoint_files(ckpt, rllib)
    ray_version = check_ray_version(ckpt, meta) if meta is not None else None
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
        trained_iterations=int(extra["iteration"]) if "iteration" in extra else None,
        probe=probe,
        notes=notes,
    )


def check_probe(
    probe: Probe | None, logits_of: Callable[[np.ndarray], np.ndarray], device: str = "cpu"
) -> dict[str, Any] | None:
    """The reloaded policy gives the logits saved with the checkpoint (``probe.npz``).

    ``logits_of`` maps the probe observations to the reloaded policy's logits;
    ``device`` (``cpu`` / ``cuda``) picks the tolerance in :data:`PROBE_ATOL`.
    Returns the ``probe`` entry of ``summary.json`` (None without a probe).

    Raises:
        CheckpointError: the logits differ by more than the tolerance.
    """
    import numpy as np

    if probe is None:
        return None
    logits = np.asarray(logits_of(probe.obs))
    err = float(np.abs(logits - probe.logits).max())
    agreement = float((logits.argmax(axis=1) == probe.actions).mean())
    atol = PROBE_ATOL[device]
    if not err <= atol:
        raise CheckpointError(
            f"the policy restored from {probe.path.parent} does not reproduce the logits saved "
            f"with it in {probe.path} (max abs error {err:.3g}, tolerance {atol} on {device}): "
            f"the checkpoint's policy and {PROBE_FILE} come from different trainings"
        )
    return {
        "observations": int(len(logits)),
        "max_abs_logit_err": err,
        "greedy_agreement": agreement,
        "tolerance": atol,
    }


# --------------------------------------------------------------------------
# A downstream job's effective config
# --------------------------------------------------------------------------


def _plain(cfg: DictConfig, key: str) -> dict[str, Any]:
    node = OmegaConf.select(cfg, key)
    out = OmegaConf.to_container(node, resolve=True) if node is not None else {}
    assert isinstance(out, dict)
    return {str(k): v for k, v in out.items()}


def _check_explicit_model(cfg: DictConfig, trained: TrainedRun, keys: set[str]) -> None:
    from rlperf.config.validate import ConfigError

    run_model = model_geometry(trained.config.model)
    for key in sorted(keys):
        if (key == "model" or key.startswith("model.")) and (
            model_geometry(cfg.model) != run_model
            or (key == "model" and cfg.model.name != trained.config.model.name)
        ):
            given = cfg.model.name if key == "model" else OmegaConf.select(cfg, key)
            raise ConfigError(
                f"{key}={given} was given, but the run {trained.run_dir} trained "
                f"model={trained.config.model.name} (input {run_model['obs_shape']}, "
                f"conv_filters {run_model['conv_filters']}); the {cfg.stage} takes the model "
                f"from the run: drop {key}= or give that model's run"
            )


def merge_run_config(
    cfg: DictConfig, trained: TrainedRun, overrides: Iterable[str] = ()
) -> DictConfig:
    """A downstream job's config with ``model``, ``env`` and ``algo`` taken from the run.

    Everything else (``seed``, ``workers``, ``gpu_layout``, ``rollout``, ``edge``,
    ...) is the job's own. ``overrides`` are the job's command-line overrides: an
    ``env=`` / ``env.<key>=`` among them is applied on top of the run's env; a
    ``model=`` / ``model.<key>=`` that disagrees with the run's model is a
    :class:`~rlperf.config.validate.ConfigError`.
    """
    from rlperf.config.validate import validate_model

    keys = override_keys(overrides)
    _check_explicit_model(cfg, trained, keys)
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)
    own_env = dict(plain["env"])
    # The run's values over the job's defaults (keys newer than the run keep defaults).
    env = dict(own_env) if "env" in keys else {**own_env, **_plain(trained.config, "env")}
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


def upstream_run(cfg: DictConfig, *, rllib: bool = True) -> tuple[TrainedRun, DictConfig]:
    """The checked training run of a downstream job, and the job's effective config.

    Config keys used: ``run``, ``checkpoint``, ``model`` (an explicit ``model=``
    picks the job of a sweep folder and must match the run's); ``env.*`` given on
    the command line apply on top of the run's env (:func:`merge_run_config`).
    ``rllib`` as for :func:`load_trained_run`.
    """
    overrides = command_line_overrides()
    model_name = explicit_model(cfg, overrides)
    trained = load_trained_run(cfg.run, cfg.checkpoint, model_name=model_name, rllib=rllib)
    return trained, merge_run_config(cfg, trained, overrides)


def write_effective_config(out_dir: Path, cfg: DictConfig) -> Path:
    """A downstream job's config with the upstream run's ``model`` / ``env`` in force.

    ``.hydra/config.yaml`` holds what was composed (the default model, say); this
    file holds what actually ran, and the report reads it first.
    """
    path = out_dir / EFFECTIVE_CONFIG_FILE
    OmegaConf.save(cfg, path, resolve=True)
    return path
