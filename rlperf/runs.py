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

import csv
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from rlperf.errors import UserError

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

#: Hydra's record of a sweep, in the sweep folder (``multirun/<date>/<time>``).
MULTIRUN_FILE = "multirun.yaml"

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
    # Training: an env runner or learner was lost or restarted during the iteration (RLlib's
    # fault tolerance); serve: measured while a fault was injected (a replica killed). Its
    # times and throughput measure the fault, not the configuration.
    fault = "fault"
    no_samples = "no_samples"  # the iteration sampled no env steps


def is_excluded(value: object) -> bool:
    """Whether an :data:`EXCLUDED_COLUMN` value excludes its row (empty / NaN: it counts)."""
    return isinstance(value, str) and value != ""


class CheckpointError(UserError, ValueError):
    """A run folder or checkpoint that cannot be used; the message says why and where (exit 2)."""


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
        :data:`IDENTITY_KEYS` values, ``overrides``: its command-line overrides.
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
# The jobs of an upstream sweep folder, and which of them a downstream job takes
# --------------------------------------------------------------------------

#: What identifies a training job of a sweep besides its model: the keys of
#: ``run_match`` (``rlperf.config.schema.RunMatchConfig``) and where a training
#: job holds each (a config key, or ``choice:<group>`` for the Hydra group option
#: it was composed with). A training axis added later joins here and there.
IDENTITY_KEYS: dict[str, str] = {
    "study_training_row": "choice:study_training_row",
    "seed": "seed",
    "workers": "workers",
    "gpu_layout": "gpu_layout.name",
    "cpu_affinity": "cpu_affinity.name",
}

_HYDRA_FILE = Path(".hydra", "hydra.yaml")
_OVERRIDES_FILE = Path(".hydra", "overrides.yaml")


@dataclass(frozen=True)
class JobQuery:
    """Which jobs of an upstream sweep folder a downstream job takes.

    ``model``: an explicit ``model=`` of the downstream job; ``match``: the set
    keys of ``run_match`` (:data:`IDENTITY_KEYS`); ``select``: ``run_select``
    (``all`` keeps every matching job; a downstream sweep fans out over them).
    """

    model: str | None = None
    match: tuple[tuple[str, str], ...] = ()
    select: str = "all"

    def describe(self, prefix: str = "") -> str:
        """``model=tiny run_match.seed=1`` (with ``prefix``), or '' for an empty query."""
        parts = [f"model={self.model}"] if self.model is not None else []
        parts += [f"run_match.{k}={v}" for k, v in self.match]
        return f"{prefix}{' '.join(parts)}" if parts else ""

    def matches(self, job: UpstreamJob) -> bool:
        if self.model is not None and job.model != self.model:
            return False
        return all(str(job.identity.get(k)) == v for k, v in self.match)


class UpstreamJob:
    """A job folder of a sweep, read lazily: its model, identity, status and figures."""

    def __init__(self, path: Path) -> None:
        self.path = path
        cfg = OmegaConf.load(path / CONFIG_FILE)
        self.stage = OmegaConf.select(cfg, "stage", default=None)
        self.model = OmegaConf.select(cfg, "model.name", default=None)
        choices = _hydra_choices(path)
        self.identity: dict[str, Any] = {}
        for key, where in IDENTITY_KEYS.items():
            value = (
                choices.get(where.split(":", 1)[1])
                if where.startswith("choice:")
                else OmegaConf.select(cfg, where, default=None)
            )
            if value is not None:
                self.identity[key] = value
        self.status = _summary_status(path)

    @property
    def trained(self) -> bool:
        """A training job with a policy whose summary says completed (or that has none)."""
        return (
            self.stage == "train"
            and (self.path / CHECKPOINT_DIR / POLICY_FILE).is_file()
            and self.status in (None, RunStatus.completed)
        )

    def label(self, keys: Iterable[str] | None = None) -> str:
        """``3 (model=tiny, workers=0)``: the folder name, model and identity keys.

        ``keys``: the identity keys to show; by default those the job's own
        command line set (the axes of its sweep).
        """
        if keys is None:
            keys = [k for k in IDENTITY_KEYS if k in override_keys(self.overrides())]
        parts = [f"model={self.model}"] + [f"{k}={self.identity.get(k)}" for k in keys]
        if not self.trained:
            parts.append(f"stage={self.stage}" if self.stage != "train" else _why_not(self))
        return f"{self.path.name} ({', '.join(parts)})"

    def overrides(self) -> list[str]:
        """The job's command-line overrides (``.hydra/overrides.yaml``)."""
        try:
            data = OmegaConf.load(self.path / _OVERRIDES_FILE)
        except (OSError, ValueError):
            return []
        return [str(o) for o in data] if OmegaConf.is_list(data) else []

    def iter_s(self) -> float | None:
        """Mean seconds per iteration over the counted iterations (all where none counts)."""
        rows = _metrics_rows(self.path)
        counted = [r for r in rows if not is_excluded(r.get(EXCLUDED_COLUMN))] or rows
        values = [v for v in (_float(r.get("iter_s")) for r in counted) if v is not None]
        return sum(values) / len(values) if values else None

    def final_return(self) -> float | None:
        """``episode_return_mean`` of the last iteration: the return the checkpoint had."""
        rows = _metrics_rows(self.path)
        return _float(rows[-1].get("episode_return_mean")) if rows else None

    def started_at(self) -> str:
        """``start_time`` of ``fingerprint.json`` (ISO 8601, so it sorts), or ''."""
        try:
            return str(json.loads((self.path / FINGERPRINT_FILE).read_text())["start_time"])
        except (OSError, ValueError, KeyError, TypeError):
            return ""


def _why_not(job: UpstreamJob) -> str:
    if job.status not in (None, RunStatus.completed):
        return f"status={job.status}"
    return f"no {CHECKPOINT_DIR}/{POLICY_FILE}"


def _hydra_choices(job_dir: Path) -> dict[str, Any]:
    try:
        node = OmegaConf.select(OmegaConf.load(job_dir / _HYDRA_FILE), "hydra.runtime.choices")
    except (OSError, ValueError):
        return {}
    out = OmegaConf.to_container(node) if node is not None else {}
    return {str(k): v for k, v in out.items()} if isinstance(out, dict) else {}


def _summary_status(job_dir: Path) -> str | None:
    try:
        status = json.loads((job_dir / SUMMARY_FILE).read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return None
    return str(status) if status is not None else None


def _metrics_rows(job_dir: Path) -> list[dict[str, str]]:
    try:
        with open(job_dir / METRICS_FILE, newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def _float(value: object) -> float | None:
    try:
        out = float(str(value))
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def is_job_folder(path: Path) -> bool:
    """Whether ``path`` is one job's folder (its config or checkpoint), not a sweep folder."""
    return (path / CONFIG_FILE).is_file() or (path / CHECKPOINT_DIR).is_dir()


def sweep_jobs(sweep: Path) -> list[UpstreamJob]:
    """The job folders of a sweep folder, in Hydra's job order (``0, 1, ..., 10``)."""
    dirs = [p.parent.parent for p in sweep.glob(f"*/{CONFIG_FILE}")]
    return [UpstreamJob(d) for d in sorted(dirs, key=_natural)]


def _natural(path: Path) -> tuple[Any, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name))


def describe_jobs(jobs: Sequence[UpstreamJob]) -> str:
    """``0 (model=tiny, workers=0), 1 (...)``: each job with the identity keys that vary."""
    varying = [k for k in IDENTITY_KEYS if len({str(j.identity.get(k)) for j in jobs}) > 1]
    return ", ".join(j.label(varying) for j in jobs)


def select_job(jobs: Sequence[UpstreamJob], how: str) -> UpstreamJob:
    """The job ``run_select=how`` picks (ties: the first in job order).

    ``fastest``: lowest mean seconds per iteration; ``best_return``: highest
    ``episode_return_mean`` at the last iteration (the checkpoint's); ``latest``:
    the last started. Jobs without the figure come last.
    """
    if how == "fastest":
        return min(jobs, key=lambda j: (j.iter_s() is None, j.iter_s() or 0.0))
    if how == "best_return":
        return min(jobs, key=lambda j: (j.final_return() is None, -(j.final_return() or 0.0)))
    if how == "latest":
        return max(jobs, key=lambda j: j.started_at())
    from rlperf.config.schema import RunSelect

    raise ValueError(f"run_select={how!r}: expected one of {', '.join(RunSelect)}")


def pick_jobs(sweep: Path, query: JobQuery) -> list[UpstreamJob]:
    """The trained jobs of ``sweep`` that ``query`` matches; one where it selects.

    Raises:
        CheckpointError: no job matches; the message lists what the folder holds.
    """
    jobs = sweep_jobs(sweep)
    trained = [j for j in jobs if j.trained]
    if not trained:
        held = f"; it holds {describe_jobs(jobs)}" if jobs else ""
        raise CheckpointError(
            f"run={sweep} is neither a training job folder (with {CONFIG_FILE} and "
            f"{CHECKPOINT_DIR}/) nor a sweep folder containing completed training jobs{held}"
        )
    matching = [j for j in trained if query.matches(j)]
    if not matching:
        raise CheckpointError(
            f"run={sweep}: no trained job matches {query.describe()}; the folder holds "
            f"{describe_jobs(jobs)}"
        )
    return matching if query.select == "all" else [select_job(matching, query.select)]


def job_query(cfg: DictConfig, overrides: Iterable[str]) -> JobQuery:
    """The :class:`JobQuery` of a downstream job (keys ``model``, ``run_match``, ``run_select``).

    Only an explicit ``model=`` among ``overrides`` names the model (a default
    model is not a choice); every ``run_match.<key>`` that is set names its key.
    """
    node = OmegaConf.select(cfg, "run_match", default=None)
    match = OmegaConf.to_container(node, resolve=True) if node is not None else {}
    assert isinstance(match, dict)
    return JobQuery(
        model=explicit_model(cfg, overrides),
        match=tuple((str(k), str(v)) for k, v in match.items() if v is not None),
        select=str(OmegaConf.select(cfg, "run_select", default="all")),
    )


# --------------------------------------------------------------------------
# Finding a run
# --------------------------------------------------------------------------

_EXPECTED_CHECKPOINT = f"the {CHECKPOINT_DIR}/ folder of a training job (or its {POLICY_FILE})"


def _as_path(value: str | Path, base: Path) -> Path:
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else base / path


def find_run_dir(run: Path, query: JobQuery | None = None) -> Path:
    """``run`` itself if it is a job folder, or the training job of a sweep folder ``query`` picks.

    A multirun folder (``multirun/<date>/<time>``) holds one job per cell. The
    jobs ``query`` matches (:func:`pick_jobs`) must come down to one: a single
    run cannot fan out (a downstream sweep does, :mod:`rlperf.sweep.upstream`).
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
    if is_job_folder(run):
        return run
    query = query or JobQuery()
    picked = pick_jobs(run, query)
    if len(picked) == 1:
        return picked[0].path
    raise CheckpointError(
        f"run={run} is a sweep folder with {len(picked)} trained jobs{query.describe(' matching ')}"
        f" ({describe_jobs(picked)}); a single run takes one: choose it with run={run}/<job>, "
        f"pick one with run_select=fastest|best_return|latest, narrow the match with model= "
        f"or run_match.<key>=, or run them all as a sweep (rlperf -m ...: a downstream sweep "
        f"fans out over the matching jobs)"
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
    query: JobQuery | None = None,
) -> tuple[Path | None, Path]:
    """(run folder, checkpoint folder) of ``run=`` / ``checkpoint=`` (relative to ``base``).

    ``checkpoint=`` may name the checkpoint folder or its ``rlperf_policy.pt``;
    without ``run=`` the run folder is the one the checkpoint was written into
    (its parent), or None where that folder holds no run config. ``query``
    picks the job of a sweep folder (:func:`find_run_dir`).
    """
    base = base if base is not None else Path.cwd()
    if run is None and checkpoint is None:
        raise CheckpointError(
            f"no training run given: pass run=<training job folder> or checkpoint=<path> "
            f"({_EXPECTED_CHECKPOINT})"
        )
    run_dir = find_run_dir(_as_path(run, base), query) if run is not None else None
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
    missing = [k for k in _required_run_keys(cfg) if OmegaConf.select(cfg, k, default=None) is None]
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
    from rlperf.models.policy_file import POLICY_FORMAT_VERSION, READABLE_FORMAT_VERSIONS

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
    if fmt not in READABLE_FORMAT_VERSIONS or not compatible_version(saved, __version__):
        raise CheckpointError(
            f"{path} was written by rlperf {saved} (policy format {fmt!r}); this is rlperf "
            f"{__version__}, which reads checkpoints of rlperf "
            f"{'.'.join(_major_minor(__version__))}.x with policy format "
            f"{' or '.join(map(str, READABLE_FORMAT_VERSIONS))} (it writes "
            f"{POLICY_FORMAT_VERSION}); retrain with this rlperf or use the rlperf that trained it"
        )
    return payload


def _normalize_filters(filters: Iterable[Any]) -> list[list[Any]]:
    out = []
    for f in filters:
        k = f[1]
        kernel = [int(k[0]), int(k[1])] if isinstance(k, list | tuple) else [int(k), int(k)]
        out.append([int(f[0]), kernel, int(f[2])])
    return out


def model_kind_of(cfg_model: Any) -> str:
    """``kind`` of a config's ``model`` subtree (``vision`` for configs of rlperf 0.1, which
    had only the study's networks)."""
    kind = cfg_model.get("kind") if cfg_model is not None else None
    return str(kind or "vision")


def model_geometry(cfg_model: Any) -> dict[str, Any]:
    """What identifies a config's network: vision ``obs_shape`` and ``conv_filters``; mlp
    ``hiddens`` and ``activation`` (the spaces come from the env)."""
    if model_kind_of(cfg_model) == "mlp":
        hiddens = OmegaConf.to_container(cfg_model.hiddens, resolve=True)
        assert isinstance(hiddens, list)
        return {
            "kind": "mlp",
            "hiddens": [int(h) for h in hiddens],
            "activation": str(cfg_model.activation),
        }
    filters = OmegaConf.to_container(cfg_model.conv_filters, resolve=True)
    assert isinstance(filters, list)
    dim, stack = int(cfg_model.dim), int(cfg_model.framestack)
    return {"obs_shape": [dim, dim, stack], "conv_filters": _normalize_filters(filters)}


def _saved_geometry(model_config: dict[str, Any]) -> dict[str, Any]:
    """:func:`model_geometry` of a policy file's ``model_config``."""
    if str(model_config.get("kind", "vision")) == "mlp":
        return {
            "kind": "mlp",
            "hiddens": [int(h) for h in model_config.get("hiddens", [])],
            "activation": str(model_config.get("activation")),
        }
    return {
        "obs_shape": [int(v) for v in model_config.get("obs_shape", [])],
        "conv_filters": _normalize_filters(model_config.get("conv_filters", [])),
    }


def check_same_model(ckpt: Path, run_cfg: DictConfig, model_config: dict[str, Any]) -> None:
    """The checkpoint's network is the one its run's config describes."""
    want = model_geometry(run_cfg.model)
    have = _saved_geometry(model_config)
    if want != have:
        raise CheckpointError(
            f"checkpoint {ckpt} holds another model than its run's config: the checkpoint's "
            f"network is {_geometry_text(have)}, the run's config (model={run_cfg.model.name}) "
            f"expects {_geometry_text(want)}"
        )


def _geometry_text(geometry: dict[str, Any]) -> str:
    if geometry.get("kind") == "mlp":
        return f"an MLP with hiddens {geometry['hiddens']} ({geometry['activation']})"
    return f"input {geometry['obs_shape']} with conv_filters {geometry['conv_filters']}"


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
            ``run_match``, ``run_select``; :func:`job_query`).
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
    from rlperf.errors import ConfigError

    run_model = model_geometry(trained.config.model)
    for key in sorted(keys):
        if (key == "model" or key.startswith("model.")) and (
            model_geometry(cfg.model) != run_model
            or (key == "model" and cfg.model.name != trained.config.model.name)
        ):
            given = cfg.model.name if key == "model" else OmegaConf.select(cfg, key)
            raise ConfigError(
                f"{key}={given} was given, but the run {trained.run_dir} trained "
                f"model={trained.config.model.name} ({_geometry_text(run_model)}); the "
                f"{cfg.stage} takes the model from the run: drop {key}= or give that model's run"
            )


def merge_run_config(
    cfg: DictConfig, trained: TrainedRun, overrides: Iterable[str] = ()
) -> DictConfig:
    """A downstream job's config with ``model``, ``env`` and ``algo`` taken from the run.

    Everything else (``seed``, ``workers``, ``gpu_layout``, ``rollout``, ``edge``,
    ...) is the job's own. ``overrides`` are the job's command-line overrides: an
    ``env=`` / ``env.<key>=`` among them is applied on top of the run's env; a
    ``model=`` / ``model.<key>=`` that disagrees with the run's model is a
    :class:`~rlperf.errors.ConfigError`.
    """
    from rlperf.config.validate import validate_env, validate_env_model, validate_model

    keys = override_keys(overrides)
    _check_explicit_model(cfg, trained, keys)
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)
    plain["model"] = {"kind": "vision", **_plain(trained.config, "model")}
    plain["env"] = _effective_env(dict(plain["env"]), trained, keys)
    plain["algo"] = {**plain["algo"], **_plain(trained.config, "algo")}
    out = OmegaConf.create(plain)
    OmegaConf.set_struct(out, True)
    validate_env(out)
    validate_model(out)
    validate_env_model(out)
    return out


def _effective_env(own_env: dict[str, Any], trained: TrainedRun, keys: set[str]) -> dict[str, Any]:
    """The run's env; the job's own where ``env=`` was given; ``env.<key>=`` on top.

    Keys the job's env has and the run's lacks (newer than the run) keep the job's
    defaults where both are of the same kind (a run without ``kind`` is Atari).
    """
    from rlperf.errors import ConfigError

    run_env = {"kind": "atari", **_plain(trained.config, "env")}
    if "env" in keys:
        return own_env
    env = {**own_env, **run_env} if own_env.get("kind") == run_env["kind"] else dict(run_env)
    for key in sorted(keys):
        if not key.startswith("env."):
            continue
        top = key[4:].split(".")[0]
        if top not in env:
            raise ConfigError(
                f"{key} was given, but the run {trained.run_dir} trained on an env of kind "
                f"{run_env['kind']}, which has no {top!r}; its keys are {sorted(env)}"
            )
        env[top] = own_env[top]
    return env


def upstream_run(cfg: DictConfig, *, rllib: bool = True) -> tuple[TrainedRun, DictConfig]:
    """The checked training run of a downstream job, and the job's effective config.

    Config keys used: ``run``, ``checkpoint``, ``model`` (an explicit ``model=``
    picks the job of a sweep folder and must match the run's), ``run_match`` and
    ``run_select`` (which job of a sweep folder, :func:`job_query`); ``env.*``
    given on the command line apply on top of the run's env
    (:func:`merge_run_config`). ``rllib`` as for :func:`load_trained_run`.
    """
    overrides = command_line_overrides()
    query = job_query(cfg, overrides)
    trained = load_trained_run(cfg.run, cfg.checkpoint, query=query, rllib=rllib)
    return trained, merge_run_config(cfg, trained, overrides)


def write_effective_config(out_dir: Path, cfg: DictConfig) -> Path:
    """A downstream job's config with the upstream run's ``model`` / ``env`` in force.

    ``.hydra/config.yaml`` holds what was composed (the default model, say); this
    file holds what actually ran, and the report reads it first.
    """
    path = out_dir / EFFECTIVE_CONFIG_FILE
    OmegaConf.save(cfg, path, resolve=True)
    return path
